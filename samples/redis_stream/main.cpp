// samples/redis_stream — an order consumer on a Redis Stream whose redeliveries idem turns away.
//
//   idem_sample_redis_stream --start                  start a throwaway redis-server (the test fixture's script)
//   idem_sample_redis_stream --address 127.0.0.1:6379
//   idem_sample_redis_stream --address-file <file>    a file holding host:port (the ctest fixture's)
//
// Two consumers of one consumer group read orders from a stream. Each order is charged through an
// idem::engine on an idem::redis_store, keyed by the order id, with a zero wait (waitTimeout =
// PT0S): a redelivery never blocks, it is declined while the original is in flight and skipped once
// the original completed.
//
//  1. consumer-a (a child process) reads o-1, o-2, o-3. It charges o-1 and acknowledges it, charges
//     o-2 but "crashes" before XACK, and is SIGKILLed while it is charging o-3.
//  2. consumer-b takes the dead consumer's pending messages over with XAUTOCLAIM: o-2 is replayed
//     (completed by consumer-a: acknowledged, not charged again), o-3 is in flight (consumer-a's lease
//     has not run out yet: declined and left pending). It reads the new o-4 and charges it.
//  3. After the lease has run out, consumer-b claims o-3 again and charges it.
//
// It ends by counting the charges: one per order, or the exit status is 1.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <idem/codec.hpp>
#include <idem/engine.hpp>
#include <idem/lease_token.hpp>
#include <idem/redis_store.hpp>

namespace {

using namespace std::chrono_literals;

struct address {
  std::string host = "127.0.0.1";
  int port = 6379;
};

// --- a few stream commands over hiredis --------------------------------------------------------

struct reply_deleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

class redis_client {
 public:
  explicit redis_client(const address& where) {
    c_ = redisConnectWithTimeout(where.host.c_str(), where.port, timeval{2, 0});
    if (c_ == nullptr || c_->err != 0) throw std::runtime_error("cannot connect to redis at " + where.host);
  }
  ~redis_client() { redisFree(c_); }
  redis_client(const redis_client&) = delete;
  redis_client& operator=(const redis_client&) = delete;

  reply_ptr run(std::initializer_list<std::string_view> args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(c_, static_cast<int>(argv.size()), argv.data(), lengths.data()));
    if (r == nullptr) throw std::runtime_error(std::string("redis: ") + c_->errstr);
    reply_ptr reply(r);
    if (reply->type == REDIS_REPLY_ERROR) throw std::runtime_error(std::string("redis: ") + reply->str);
    return reply;
  }

 private:
  redisContext* c_;
};

struct message {
  std::string id;
  std::string order;
};

// Entries as XREADGROUP and XAUTOCLAIM list them: [[id, [field, value, ...]], ...].
std::vector<message> entries(const redisReply* list) {
  std::vector<message> out;
  if (list == nullptr || list->type != REDIS_REPLY_ARRAY) return out;
  for (std::size_t i = 0; i < list->elements; ++i) {
    const redisReply* entry = list->element[i];
    if (entry->type != REDIS_REPLY_ARRAY || entry->elements < 2 || entry->element[1]->type != REDIS_REPLY_ARRAY) continue;
    message m{entry->element[0]->str, ""};
    const redisReply* fields = entry->element[1];
    for (std::size_t f = 0; f + 1 < fields->elements; f += 2) {
      if (std::string_view(fields->element[f]->str) == "order") m.order = fields->element[f + 1]->str;
    }
    out.push_back(m);
  }
  return out;
}

// --- the consumer ------------------------------------------------------------------------------

struct names {
  std::string stream;
  std::string group = "billing";
  std::string charges;  // a hash: order -> times charged
  std::string records;  // the idem records' prefix: this run's, so that runs on one server stay apart
};

class consumer {
 public:
  consumer(const address& where, const names& n, std::string name)
      : redis_(where), names_(n), name_(std::move(name)), store_(store_options(where, n)), engine_(store_) {}

  static idem::redis_store_options store_options(const address& where, const names& n) {
    idem::redis_store_options o;
    o.host = where.host;
    o.port = where.port;
    o.prefix = n.records;
    return o;
  }

  std::vector<message> read_new(int count) {
    const std::string n = std::to_string(count);
    auto reply = redis_.run({"XREADGROUP", "GROUP", names_.group, name_, "COUNT", n, "STREAMS", names_.stream, ">"});
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements == 0) return {};
    return entries(reply->element[0]->element[1]);
  }

  // Pending messages of any consumer, idle for at least 0 ms, taken over by this one.
  std::vector<message> claim_pending() {
    auto reply = redis_.run({"XAUTOCLAIM", names_.stream, names_.group, name_, "0", "0-0", "COUNT", "100"});
    return entries(reply->element[1]);
  }

  void ack(const message& m) { redis_.run({"XACK", names_.stream, names_.group, m.id}); }

  // Charges the order once per order id. `work` runs inside the guarded action before the charge.
  // Returns true when the message may be acknowledged (charged now or earlier), false when it
  // must stay pending (another consumer holds it).
  bool handle(const message& m, const std::function<void()>& work = [] {}) {
    auto ctx = engine_.make_context("OrderConsumer.charge", m.order, idem::call_options{.lease = 2s, .wait = 0ms});
    auto outcome = engine_.execute<std::string>(
        ctx,
        [&] {
          work();
          redis_.run({"HINCRBY", names_.charges, m.order, "1"});
          return "charged by " + name_;
        },
        idem::string_codec{});
    if (auto* done = std::get_if<idem::executed<std::string>>(&outcome)) {
      say(m.order + ": " + done->value);
      return true;
    }
    if (auto* replay = std::get_if<idem::replayed<std::string>>(&outcome)) {
      say(m.order + ": redelivered, already completed (" + replay->value + ") - skipped, not charged again");
      return true;
    }
    const auto& busy = std::get<idem::in_flight>(outcome);
    say(m.order + ": redelivered while the original is in flight (its lease has " +
        std::to_string(busy.retry_after.count()) + " ms left) - declined, left pending");
    last_retry_after_ = busy.retry_after;
    return false;
  }

  void say(const std::string& text) const {
    std::printf("[%s] %s\n", name_.c_str(), text.c_str());
    std::fflush(stdout);
  }

  std::chrono::milliseconds last_retry_after() const { return last_retry_after_; }
  redis_client& redis() { return redis_; }

 private:
  redis_client redis_;
  names names_;
  std::string name_;
  idem::redis_store store_;
  idem::engine engine_;
  std::chrono::milliseconds last_retry_after_{0};
};

// consumer-a: charges o-1 (acked), o-2 (crashes before the ack), then is killed inside o-3.
[[noreturn]] void run_consumer_a(const address& where, const names& n, int report_fd) {
  try {
    consumer a(where, n, "consumer-a");
    auto batch = a.read_new(3);
    a.say("read " + std::to_string(batch.size()) + " orders");
    if (batch.size() != 3) throw std::runtime_error("expected three orders");
    if (a.handle(batch[0])) a.ack(batch[0]);
    a.handle(batch[1]);
    a.say(batch[1].order + ": crashing before XACK");
    a.handle(batch[2], [&] {
      a.say(batch[2].order + ": charging slowly...");
      [[maybe_unused]] ssize_t w = ::write(report_fd, "x", 1);  // tell the parent to kill us now
      std::this_thread::sleep_for(60s);                        // the kill lands here
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[consumer-a] %s\n", e.what());
  }
  std::_Exit(1);
}

address parse_address(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("expected host:port, got " + text);
  return address{text.substr(0, colon), std::stoi(text.substr(colon + 1))};
}

std::string read_file_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) throw std::runtime_error("cannot read " + path);
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  std::string started_dir;
  try {
    address where;
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--address" && i + 1 < argc) {
        where = parse_address(argv[++i]);
      } else if (arg == "--address-file" && i + 1 < argc) {
        where = parse_address(read_file_line(argv[++i]));
      } else if (arg == "--start") {
        started_dir = "/tmp/idem-sample-redis-" + idem::lease_token::generate().to_string().substr(0, 10);
        const std::string cmd = std::string("bash '") + IDEM_REDIS_SERVER_SCRIPT + "' start '" + started_dir + "'";
        if (std::system(cmd.c_str()) != 0) throw std::runtime_error("could not start redis-server");
        where = parse_address(read_file_line(started_dir + "/address"));
      } else {
        std::fprintf(stderr, "usage: %s --start | --address host:port | --address-file file\n", argv[0]);
        return 2;
      }
    }

    const std::string run = idem::lease_token::generate().to_string().substr(0, 8);
    names n{"sample:orders:" + run, "billing", "sample:charges:" + run, "sample:idem:" + run + ":"};
    {
      redis_client setup(where);
      setup.run({"XGROUP", "CREATE", n.stream, n.group, "$", "MKSTREAM"});
      for (const char* order : {"o-1", "o-2", "o-3"}) setup.run({"XADD", n.stream, "*", "order", order});
    }
    std::printf("stream %s: orders o-1, o-2, o-3 published, consumer group '%s'\n", n.stream.c_str(), n.group.c_str());
    std::fflush(stdout);

    // consumer-a runs in a child process so that it can really be killed. Fork before this process
    // starts any thread (the store's and the engine's come later).
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) throw std::runtime_error("pipe failed");
    const pid_t child = ::fork();
    if (child < 0) throw std::runtime_error("fork failed");
    if (child == 0) {
      ::close(pipe_fds[0]);
      run_consumer_a(where, n, pipe_fds[1]);
    }
    ::close(pipe_fds[1]);
    char signal_byte = 0;
    const bool reached = ::read(pipe_fds[0], &signal_byte, 1) == 1;
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ::close(pipe_fds[0]);
    if (!reached) throw std::runtime_error("consumer-a failed before it reached o-3");
    std::printf("-- consumer-a (pid %d) killed while charging o-3; o-2 and o-3 stay pending\n", static_cast<int>(child));
    std::fflush(stdout);

    consumer b({where}, n, "consumer-b");
    b.redis().run({"XADD", n.stream, "*", "order", "o-4"});
    b.say("o-4 published");
    for (int round = 1; round <= 10; ++round) {
      bool declined = false;
      for (const message& m : b.claim_pending()) {
        if (b.handle(m)) {
          b.ack(m);
        } else {
          declined = true;
        }
      }
      for (const message& m : b.read_new(10)) {
        if (b.handle(m)) {
          b.ack(m);
        } else {
          declined = true;
        }
      }
      if (!declined) break;
      const auto pause = b.last_retry_after() + 50ms;
      b.say("waiting " + std::to_string(pause.count()) + " ms (retry_after) before claiming again");
      std::this_thread::sleep_for(pause);
    }

    // The verdict: one charge per order, nothing left pending.
    auto charges = b.redis().run({"HGETALL", n.charges});
    std::map<std::string, std::string> counted;
    for (std::size_t i = 0; i + 1 < charges->elements; i += 2) counted[charges->element[i]->str] = charges->element[i + 1]->str;
    auto pending = b.redis().run({"XPENDING", n.stream, n.group});
    bool ok = pending->element[0]->integer == 0;
    std::printf("-- charges per order:");
    for (const char* order : {"o-1", "o-2", "o-3", "o-4"}) {
      const std::string count = counted.count(order) ? counted[order] : "0";
      std::printf(" %s=%s", order, count.c_str());
      ok = ok && count == "1";
    }
    std::printf("; pending: %lld\n", pending->element[0]->integer);
    std::printf(ok ? "one execution per order\n" : "FAILED: not exactly one execution per order\n");
    b.redis().run({"DEL", n.stream, n.charges});
    if (!started_dir.empty()) {
      const std::string cmd = std::string("bash '") + IDEM_REDIS_SERVER_SCRIPT + "' stop '" + started_dir + "' >/dev/null";
      [[maybe_unused]] int rc = std::system(cmd.c_str());
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idem_sample_redis_stream: %s\n", e.what());
    if (!started_dir.empty()) {
      const std::string cmd = std::string("bash '") + IDEM_REDIS_SERVER_SCRIPT + "' stop '" + started_dir + "' >/dev/null";
      [[maybe_unused]] int rc = std::system(cmd.c_str());
    }
    return 1;
  }
}
