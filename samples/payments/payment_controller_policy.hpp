// samples/payments/payment_controller_policy.hpp — the policy of PaymentController::create written
// by hand, for builds without idem-annotate (IDEM_BUILD_ANNOTATOR=OFF). With the annotator, the
// sample uses the generated payment_controller.idem.hpp instead, which says the same (docs/http.md,
// "What the generator must emit for an endpoint").
#pragma once

#include <chrono>
#include <string_view>

#include <idem/invoke.hpp>

#include "payment_controller.hpp"

template <>
struct idem::policy<&payments::PaymentController::create> {
  static constexpr std::string_view function = "payments::PaymentController::create";
  static constexpr std::string_view scope = "PaymentController.create";
  static constexpr std::string_view file = "samples/payments/payment_controller.hpp";
  static constexpr unsigned line = 46;
  static constexpr unsigned column = 11;  // of `idempotent`, as idem-annotate counts
  static constexpr bool http_endpoint = true;
  static idem::call_options options() { return {.wait = std::chrono::milliseconds(0)}; }
  static const bool registered;  // defined in payment_controller_policy.cpp
};
