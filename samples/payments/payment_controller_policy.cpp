// samples/payments/payment_controller_policy.cpp — the registrations of the hand-written policies
// (builds without idem-annotate); see payment_controller_policy.hpp.
#include "payment_controller_policy.hpp"

#include <idem/policy_registry.hpp>

const bool idem::policy<&payments::PaymentController::create>::registered = idem::detail::register_policy({
    .function = function,
    .scope = scope,
    .scope_explicit = false,
    .options = options(),
    .codec = {},
    .result_type = "void",
    .http_endpoint = true,
    .file = file,
    .line = line,
    .column = column,
});

#ifdef IDEM_SAMPLE_WITH_BEAST
const bool idem::policy<&payments::BeastPayments::create>::registered = idem::detail::register_policy({
    .function = function,
    .scope = scope,
    .scope_explicit = true,
    .options = options(),
    .codec = {},
    .result_type = "boost::asio::awaitable<idem::http::beast::response_type>",
    .http_endpoint = true,
    .file = file,
    .line = line,
    .column = column,
});
#endif
