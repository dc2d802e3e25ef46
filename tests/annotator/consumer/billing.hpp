#pragma once

#include "billing_types.hpp"

inline int invoices_sent = 0;

[[idem::idempotent(key = "i.id")]] inline void send_invoice(const invoice& i) { invoices_sent += i.id > 0 ? 1 : 0; }
