// libFuzzer target for what idem::sqlite_store does with hostile column bytes: each input is
// written as the row of one record into a real SQLite file (every column of the idem table, each
// NULL, an integer, text or a blob as the input says) and try_acquire (wait 0) reads it. The store
// answers or throws corrupt_record_error — never crashes, never throws anything else — and what
// it answers is what the row holds: a replay carries exactly the stored type, body and attributes;
// a claim leaves the record held under the new token (release succeeds).
//
// One database file per process (a temporary directory removed at exit), one store reused.
#include <sqlite3.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <variant>

#include <idem/detail/attributes_codec.hpp>
#include <idem/errors.hpp>
#include <idem/identity.hpp>
#include <idem/sqlite_store.hpp>

namespace {

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "sqlite_record_fuzz: %s\n", why.c_str());
  std::abort();
}

// Reads the input front to back; past its end every read gives zeros.
class input {
 public:
  input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::string bytes() {
    const std::size_t n = std::min<std::size_t>(byte(), size_ - pos_);
    std::string out(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return out;
  }
  std::int64_t raw_int() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | byte();
    return static_cast<std::int64_t>(v);
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

struct fixture {
  std::filesystem::path dir;
  std::unique_ptr<idem::sqlite_store> store;
  sqlite3* db = nullptr;
  sqlite3_stmt* write = nullptr;
  sqlite3_stmt* read = nullptr;
  idem::identity id{"fuzz.Record", "fuzzed-key"};

  fixture() {
    char pattern[] = "/tmp/idem-sqlite-fuzz-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) fail("mkdtemp");
    dir = pattern;
    idem::sqlite_store_options options;
    options.path = dir / "records.db";
    options.synchronous = idem::sqlite_synchronous::normal;
    options.connections = 1;
    store = std::make_unique<idem::sqlite_store>(options);
    if (sqlite3_open((dir / "records.db").c_str(), &db) != SQLITE_OK) fail("open");
    sqlite3_exec(db, "PRAGMA synchronous=OFF", nullptr, nullptr, nullptr);
    const char* insert =
        "INSERT OR REPLACE INTO idem_records (scope, key_digest, state, lease_token, lease_expires_at, expires_at,"
        " fingerprint, payload_type, payload_body, payload_attributes, completed_at, created_at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";
    if (sqlite3_prepare_v2(db, insert, -1, &write, nullptr) != SQLITE_OK) fail(sqlite3_errmsg(db));
    const char* select =
        "SELECT payload_type, payload_body, payload_attributes FROM idem_records WHERE scope = ?1 AND key_digest = ?2";
    if (sqlite3_prepare_v2(db, select, -1, &read, nullptr) != SQLITE_OK) fail(sqlite3_errmsg(db));
  }
  ~fixture() {
    sqlite3_finalize(write);
    sqlite3_finalize(read);
    sqlite3_close(db);
    store.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
};

fixture& the_fixture() {
  static fixture f;
  return f;
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Binds column `index` as the input says: NULL, an interesting or raw integer, text or a blob.
void bind_column(sqlite3_stmt* s, int index, input& in) {
  const std::uint8_t kind = in.byte();
  switch (kind % 4) {
    case 0:
      sqlite3_bind_null(s, index);
      return;
    case 1: {
      std::int64_t v = 0;
      switch ((kind / 4) % 9) {
        case 0: v = 1; break;  // in progress
        case 1: v = 2; break;  // complete
        case 2: v = now_ms() + 3'600'000; break;
        case 3: v = now_ms() - 3'600'000; break;
        case 4: v = 0; break;
        case 5: v = std::numeric_limits<std::int64_t>::max(); break;
        case 6: v = std::numeric_limits<std::int64_t>::min(); break;
        case 7: v = -1; break;
        default: v = in.raw_int(); break;
      }
      sqlite3_bind_int64(s, index, v);
      return;
    }
    case 2: {
      const std::string text = in.bytes();
      sqlite3_bind_text(s, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
      return;
    }
    default: {
      const std::string blob = in.bytes();
      sqlite3_bind_blob(s, index, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
      return;
    }
  }
}

std::string column_bytes(sqlite3_stmt* s, int column) {
  const void* blob = sqlite3_column_blob(s, column);
  const int n = sqlite3_column_bytes(s, column);
  return blob == nullptr ? std::string() : std::string(static_cast<const char*>(blob), static_cast<std::size_t>(n));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fixture& f = the_fixture();
  input in(data, size);
  const std::uint8_t flags = in.byte();

  const auto digest = f.id.key_digest();
  sqlite3_reset(f.write);
  sqlite3_clear_bindings(f.write);
  sqlite3_bind_text(f.write, 1, f.id.scope().data(), static_cast<int>(f.id.scope().size()), SQLITE_STATIC);
  sqlite3_bind_blob(f.write, 2, digest.data(), static_cast<int>(digest.size()), SQLITE_TRANSIENT);
  for (int column = 3; column <= 12; ++column) bind_column(f.write, column, in);
  if (sqlite3_step(f.write) != SQLITE_DONE) return 0;  // NOT NULL refused the row: nothing to read

  idem::context ctx{.id = f.id, .ttl = std::chrono::hours(1), .lease = std::chrono::seconds(30),
                    .wait = std::chrono::milliseconds(0)};
  if (flags & 1) ctx.fingerprint = (flags & 2) ? "00112233445566778899aabbccddeeff" : "ffeeddccbbaa99887766554433221100";

  idem::acquire_result result;
  try {
    result = f.store->try_acquire(ctx);
  } catch (const idem::corrupt_record_error& e) {
    if (e.operation().empty() || e.record() != f.id.to_string()) fail(std::string("bare corrupt_record_error: ") + e.what());
    if (std::string_view(e.what()).find(f.id.key()) != std::string_view::npos) fail("the key is in a message");
    return 0;
  } catch (const std::exception& e) {
    fail(std::string("unexpected exception: ") + e.what());
  }

  if (const auto* d = std::get_if<idem::duplicate>(&result)) {
    sqlite3_reset(f.read);
    sqlite3_bind_text(f.read, 1, f.id.scope().data(), static_cast<int>(f.id.scope().size()), SQLITE_STATIC);
    sqlite3_bind_blob(f.read, 2, digest.data(), static_cast<int>(digest.size()), SQLITE_TRANSIENT);
    if (sqlite3_step(f.read) != SQLITE_ROW) fail("a replayed record has no row");
    if (d->value.type != column_bytes(f.read, 0)) fail("replayed another payload type");
    if (d->value.body != column_bytes(f.read, 1)) fail("replayed another body");
    if (idem::detail::encode_attributes(d->value.attributes) != column_bytes(f.read, 2)) fail("replayed other attributes");
    sqlite3_reset(f.read);
  } else if (const auto* a = std::get_if<idem::acquired>(&result)) {
    try {
      f.store->release(f.id, a->token);
    } catch (const std::exception& e) {
      fail(std::string("a claimed record cannot be released: ") + e.what());
    }
  } else if (const auto* busy = std::get_if<idem::in_flight>(&result)) {
    if (busy->retry_after.count() < 0) fail("negative retry_after");
  }
  return 0;
}
