// testing/contract_support.cpp — fixtures and checks shared by the store contract cases.
#include <idem/testing/store_contract.hpp>

#include <atomic>
#include <string>
#include <type_traits>
#include <variant>

#include <catch2/catch.hpp>

#include <idem/errors.hpp>

#include "support/eventually.hpp"

namespace idem::contract {
namespace {

std::atomic<bool> exclusive_backend{false};
std::atomic<bool> expiring_backend{false};

std::string where_text(const std::source_location& where) {
  return std::string(where.file_name()) + ":" + std::to_string(where.line());
}

template <class T>
T require_alternative(const idem::acquire_result& result, std::string_view expected,
                      const std::source_location& where) {
  INFO("checked at " << where_text(where));
  INFO("expected " << expected << ", got " << describe(result));
  REQUIRE(std::holds_alternative<T>(result));
  return std::get<T>(result);
}

}  // namespace

std::string unique_key(std::string_view hint) {
  std::string key(hint);
  key += '-';
  key += idem::lease_token::generate().to_string();
  return key;
}

idem::identity fresh_identity(std::string_view hint, std::string_view scope) {
  return idem::identity(std::string(scope), unique_key(hint));
}

idem::payload sample_payload(std::string body) {
  idem::payload value;
  value.type = std::string(sample_type);
  value.body = std::move(body);
  value.attributes = {{"status", "200"}, {"requestId", "abc-123"}};
  return value;
}

std::string fingerprint(char digit) { return std::string(64, digit); }

void set_backend_exclusive(bool exclusive) noexcept { exclusive_backend.store(exclusive); }
bool backend_is_exclusive() noexcept { return exclusive_backend.load(); }
void set_backend_expires_complete_records(bool expires) noexcept { expiring_backend.store(expires); }
bool backend_expires_complete_records() noexcept { return expiring_backend.load(); }

std::string describe(const idem::acquire_result& result) {
  return std::visit(
      [](const auto& r) -> std::string {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, idem::acquired>) {
          return "acquired (token " + r.token.to_string() + (r.took_over ? ", taken over)" : ")");
        } else if constexpr (std::is_same_v<T, idem::duplicate>) {
          return "duplicate (payload type '" + r.value.type + "', " + std::to_string(r.value.body.size()) +
                 " body bytes)";
        } else if constexpr (std::is_same_v<T, idem::in_flight>) {
          return "in flight (retry after " + std::to_string(r.retry_after.count()) + " ms)";
        } else {
          return "fingerprint mismatch (stored " + r.stored + ", received " + r.received + ")";
        }
      },
      result);
}

idem::lease_token require_acquired(const idem::acquire_result& result, std::source_location where) {
  return require_alternative<idem::acquired>(result, "acquired", where).token;
}

idem::duplicate require_duplicate(const idem::acquire_result& result, std::source_location where) {
  return require_alternative<idem::duplicate>(result, "duplicate", where);
}

idem::in_flight require_in_flight(const idem::acquire_result& result, std::source_location where) {
  return require_alternative<idem::in_flight>(result, "in flight", where);
}

idem::fingerprint_mismatch require_mismatch(const idem::acquire_result& result, std::source_location where) {
  return require_alternative<idem::fingerprint_mismatch>(result, "fingerprint mismatch", where);
}

std::string require_lease_lost(std::string_view operation, const idem::identity& id,
                               const std::function<void()>& mutation, std::source_location where) {
  INFO("checked at " << where_text(where));
  INFO("expected " << operation << " to throw lease_lost_error");
  std::string message;
  std::string error_operation;
  std::string error_record;
  bool thrown = false;
  try {
    mutation();
  } catch (const idem::lease_lost_error& e) {
    thrown = true;
    message = e.what();
    error_operation = e.operation();
    error_record = e.record();
  }
  REQUIRE(thrown);
  INFO("message: " << message);
  // The error names what failed as data, not only in its text.
  CHECK(error_operation == operation);
  CHECK(error_record == id.to_string());
  CHECK(message.find(operation) != std::string::npos);
  CHECK(message.find(id.to_string()) != std::string::npos);
  CHECK(message.find(id.key()) == std::string::npos);
  return message;
}

void require_waiting(const idem::store& store, std::size_t n, std::chrono::milliseconds bound,
                     std::source_location where) {
  INFO("checked at " << where_text(where));
  const bool reached = idem::test::eventually([&] { return store.waiting() == n; }, bound);
  INFO("expected " << store.name() << ".waiting() == " << n << " within " << bound.count() << " ms, it is "
                   << store.waiting());
  REQUIRE(reached);
}

}  // namespace idem::contract
