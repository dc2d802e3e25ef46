// tests/reliability/crash_worker.cpp — one worker process of the crash and paused-holder tests.
//
//   idem_crash_worker <kind> <where> <mode> <incarnation> <keys> <log-file> <lease-ms>
//
// mode "autonomous" / "join": run every key 0..keys-1 (in an order of its own) through the engine
// until each one executed or replayed. The action logs "A k" when it starts, writes the effect
// (one row/list element: key, incarnation) between two spans of 0-30 ms of work, logs "E k" and returns
// "inc<incarnation>". Under "join" the effect and the record commit in one transaction
// (sqlite_transaction / postgres_transaction). Outcomes are logged "C k" (executed and the
// completion confirmed), "R k <value>" (replayed), "X k <error>" (a failure; retried later).
// mode "hold": claims key 0 once and works 3 leases long (the supervisor stops it meanwhile), then
// writes its effect; "hold-tx": the same inside a transaction on the effects connection (SQL
// stores; autonomous completion: the commit confirms the lease first); mode "steal": claims key 0
// with a long wait and writes its effect. Both log "A", then "C 0" or "X 0 <error>".
// A listener logs "F k <phase> <error>" for every on_failed. Each line is one write(2) to an
// O_APPEND file, so a SIGKILL never leaves half a line. With fd 3 open, "A" lines go there too.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <idem/engine.hpp>
#include <idem/errors.hpp>
#include <idem/postgres_transaction.hpp>
#include <idem/sqlite_transaction.hpp>

#include "reliability_support.hpp"

namespace {

int log_fd = -1;
bool notify = false;

void log_line(const std::string& line) {
  const std::string text = line + "\n";
  if (::write(log_fd, text.data(), text.size()) < 0) std::_Exit(3);
  if (notify && line.starts_with("A ")) {
    if (::write(3, text.data(), text.size()) < 0) std::_Exit(3);
  }
}

std::string error_name(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const idem::lease_lost_error&) {
    return "lease_lost_error";
  } catch (const idem::store_unavailable_error&) {
    return "store_unavailable_error";
  } catch (const idem::in_flight_error&) {
    return "in_flight_error";
  } catch (const idem::error&) {
    return "idem_error";
  } catch (...) {
    return "other_error";
  }
}

thread_local int current_key = -1;

class failure_log final : public idem::lifecycle_listener {
 public:
  void on_failed(const idem::context&, const idem::lease_token&, std::exception_ptr cause,
                 idem::failure_phase phase) override {
    log_line("F " + std::to_string(current_key) + " " + std::string(idem::to_string(phase)) + " " +
             error_name(cause));
  }
};

}  // namespace

int main(int argc, char** argv) {
  using namespace std::chrono;
  if (argc != 8) {
    std::fprintf(stderr, "usage: %s kind where mode incarnation keys log-file lease-ms\n", argv[0]);
    return 2;
  }
  const idem::reliability::target where{argv[1], argv[2]};
  const std::string mode = argv[3];
  const int incarnation = std::atoi(argv[4]);
  const int keys = std::atoi(argv[5]);
  const milliseconds lease{std::atoi(argv[7])};
  log_fd = ::open(argv[6], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return 2;
  notify = ::fcntl(3, F_GETFD) != -1;

  try {
    auto store = idem::reliability::open_store(where);
    idem::reliability::effects fx{where};
    idem::engine_hooks hooks;
    hooks.listeners.push_back(std::make_shared<failure_log>());
    hooks.log = [](const idem::log_record& r) { log_line("L " + std::string(idem::to_string(r.level)) + " " + r.message); };
    idem::engine engine{*store, {.default_lease = lease, .purge_interval = milliseconds(0)}, std::move(hooks)};
    const std::string value = "inc" + std::to_string(incarnation);
    const std::string scope = "Crash.run";

    if (mode == "hold" || mode == "hold-tx" || mode == "steal") {
      current_key = 0;
      const bool holds = mode != "steal";
      const auto wait = holds ? milliseconds(0) : milliseconds(10000);
      auto ctx = engine.make_context(scope, "key-0", {.wait = wait});
      try {
        auto run = [&] {
          return engine.execute(
              ctx,
              [&] {
                log_line("A 0");
                if (holds) {
                  const auto until = steady_clock::now() + 3 * lease;
                  while (steady_clock::now() < until) std::this_thread::sleep_for(milliseconds(5));
                }
                // After the pause: a SQLite transaction that wrote would hold the write lock.
                fx.record(0, incarnation);
                return value;
              },
              idem::string_codec{});
        };
        std::optional<idem::outcome<std::string>> o;
        if (mode == "hold-tx" && where.kind == "sqlite") {
          idem::sqlite_transaction tx{fx.sqlite()};
          o.emplace(run());
          tx.commit();  // confirms the lease first (autonomous completion under a transaction)
        } else if (mode == "hold-tx" && where.kind == "postgres") {
          idem::postgres_transaction tx{fx.postgres()};
          o.emplace(run());
          tx.commit();
        } else {
          o.emplace(run());
        }
        if (o->ran()) log_line("C 0");
        else if (o->is_replay()) log_line("R 0 " + o->value());
        else log_line("I 0");
      } catch (...) {
        log_line("X 0 " + error_name(std::current_exception()));
      }
      return 0;
    }

    const bool join = mode == "join";
    std::vector<int> pending(static_cast<std::size_t>(keys));
    for (int k = 0; k < keys; ++k) pending[static_cast<std::size_t>(k)] = k;
    std::mt19937 rng(static_cast<unsigned>(incarnation) * 7919u + 1u);
    std::uniform_int_distribution<int> work_ms(0, 30);
    while (!pending.empty()) {
      std::shuffle(pending.begin(), pending.end(), rng);
      std::vector<int> again;
      for (int k : pending) {
        current_key = k;
        auto ctx = engine.make_context(
            scope, "key-" + std::to_string(k),
            {.wait = milliseconds(50),
             .completion = join ? idem::completion_mode::join_transaction : idem::completion_mode::autonomous});
        auto action = [&] {
          log_line("A " + std::to_string(k));
          std::this_thread::sleep_for(milliseconds(work_ms(rng)));  // work before the effect
          fx.record(k, incarnation);
          log_line("E " + std::to_string(k));
          std::this_thread::sleep_for(milliseconds(work_ms(rng)));
          return value;
        };
        try {
          std::optional<idem::outcome<std::string>> o;
          if (join && where.kind == "sqlite") {
            idem::sqlite_transaction tx{fx.sqlite()};
            o.emplace(engine.execute(ctx, action, idem::string_codec{}));
            if (o->is_in_flight()) tx.rollback();
            else tx.commit();
          } else if (join && where.kind == "postgres") {
            idem::postgres_transaction tx{fx.postgres()};
            o.emplace(engine.execute(ctx, action, idem::string_codec{}));
            if (o->is_in_flight()) tx.rollback();
            else tx.commit();
          } else {
            o.emplace(engine.execute(ctx, action, idem::string_codec{}));
          }
          if (o->ran()) log_line("C " + std::to_string(k));
          else if (o->is_replay()) log_line("R " + std::to_string(k) + " " + o->value());
          else again.push_back(k);
        } catch (...) {
          log_line("X " + std::to_string(k) + " " + error_name(std::current_exception()));
          again.push_back(k);
        }
      }
      pending = std::move(again);
    }
    log_line("D");
    return 0;
  } catch (const std::exception& e) {
    log_line(std::string("Z ") + e.what());
    return 1;
  }
}
