// idem/idem.hpp — the umbrella header of the core (target idem::runtime): the engine, the memory
// store, the errors, the codecs, what generated wrappers call (invoke.hpp, policy_registry.hpp)
// and the store interface with its administration. The other stores, Asio and HTTP have headers
// of their own (<idem/redis_store.hpp>, <idem/asio.hpp>, <idem/http/httplib.hpp>, ...).
#pragma once

#include <idem/async.hpp>
#include <idem/codec.hpp>
#include <idem/config.hpp>
#include <idem/context.hpp>
#include <idem/deadline.hpp>
#include <idem/duration.hpp>
#include <idem/engine.hpp>
#include <idem/errors.hpp>
#include <idem/event_loop.hpp>
#include <idem/function_ref.hpp>
#include <idem/identity.hpp>
#include <idem/invoke.hpp>
#include <idem/json_codec.hpp>
#include <idem/lease_token.hpp>
#include <idem/listener.hpp>
#include <idem/log.hpp>
#include <idem/memory_store.hpp>
#include <idem/metrics.hpp>
#include <idem/outcome.hpp>
#include <idem/payload.hpp>
#include <idem/policy_registry.hpp>
#include <idem/store.hpp>
#include <idem/store_admin.hpp>
#include <idem/transaction.hpp>
