// tests/unit/engine_support.hpp — a recording listener, a recording log sink and a test transaction.
#pragma once

#include "support/test_transaction.hpp"

#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include <idem/engine.hpp>
#include <idem/transaction.hpp>

namespace idem::test {

// Records every callback as a line such as "acquired", "completed", "failed:action".
class recording_listener : public lifecycle_listener {
 public:
  void on_acquired(const context&, const lease_token& token) override { add("acquired", token); }
  void on_completed(const context&, const lease_token& token, const payload&) override { add("completed", token); }
  void on_failed(const context&, const lease_token& token, std::exception_ptr cause, failure_phase phase) override {
    std::lock_guard lock(mutex_);
    events_.push_back(std::string("failed:") + std::string(to_string(phase)));
    tokens_.push_back(token);
    causes_.push_back(cause);
  }
  void on_duplicate(const context&, const payload&, std::chrono::system_clock::time_point) override {
    add("duplicate", {});
  }
  void on_in_flight(const context&, std::chrono::milliseconds) override { add("in_flight", {}); }

  std::vector<std::string> events() const {
    std::lock_guard lock(mutex_);
    return events_;
  }
  std::vector<lease_token> tokens() const {
    std::lock_guard lock(mutex_);
    return tokens_;
  }
  std::exception_ptr last_cause() const {
    std::lock_guard lock(mutex_);
    return causes_.empty() ? nullptr : causes_.back();
  }

 private:
  void add(const char* event, lease_token token) {
    std::lock_guard lock(mutex_);
    events_.emplace_back(event);
    tokens_.push_back(token);
  }
  mutable std::mutex mutex_;
  std::vector<std::string> events_;
  std::vector<lease_token> tokens_;
  std::vector<std::exception_ptr> causes_;
};

// Collects log records.
struct recording_log {
  std::shared_ptr<std::mutex> mutex = std::make_shared<std::mutex>();
  std::shared_ptr<std::vector<log_record>> records = std::make_shared<std::vector<log_record>>();
  log_sink sink() const {
    return [m = mutex, r = records](const log_record& record) {
      std::lock_guard lock(*m);
      r->push_back(record);
    };
  }
  std::vector<log_record> get() const {
    std::lock_guard lock(*mutex);
    return *records;
  }
};

}  // namespace idem::test
