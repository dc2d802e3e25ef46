// samples/payments/payment_controller_policy.hpp — the policies of PaymentController::create (and,
// with Beast, BeastPayments::create) written by hand, for builds without idem-annotate
// (IDEM_BUILD_ANNOTATOR=OFF). With the annotator, the sample uses the generated
// payment_controller.idem.hpp and beast_payments.idem.hpp instead, which say the same
// (docs/http.md, "What the generator must emit for an endpoint").
#pragma once

#include <chrono>
#include <string_view>

#include <idem/invoke.hpp>

#include "payment_controller.hpp"
#ifdef IDEM_SAMPLE_WITH_BEAST
#include "beast_payments.hpp"
#endif

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

#ifdef IDEM_SAMPLE_WITH_BEAST
template <>
struct idem::policy<&payments::BeastPayments::create> {
  static constexpr std::string_view function = "payments::BeastPayments::create";
  static constexpr std::string_view scope = "PaymentController.create";  // named: shared with the other server
  static constexpr std::string_view file = "samples/payments/beast_payments.hpp";
  static constexpr unsigned line = 21;
  static constexpr unsigned column = 11;
  static constexpr bool http_endpoint = true;
  static idem::call_options options() { return {.wait = std::chrono::milliseconds(0)}; }
  static const bool registered;  // defined in payment_controller_policy.cpp
};
#endif
