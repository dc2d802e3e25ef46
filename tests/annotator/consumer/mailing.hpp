#pragma once

#include <string>

inline int mails_sent = 0;

struct mailer {
  [[idem::idempotent(key = "address", waitTimeout = "PT0S")]] void welcome(const std::string& address) {
    mails_sent += address.empty() ? 0 : 1;
  }
};
