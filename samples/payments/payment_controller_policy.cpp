// samples/payments/payment_controller_policy.cpp — the registration of the hand-written policy
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
