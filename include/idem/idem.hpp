// idem/idem.hpp — the umbrella header: the engine, the memory store, the errors and the codecs.
#pragma once

#include <idem/codec.hpp>
#include <idem/config.hpp>
#include <idem/context.hpp>
#include <idem/duration.hpp>
#include <idem/engine.hpp>
#include <idem/errors.hpp>
#include <idem/identity.hpp>
#include <idem/json_codec.hpp>
#include <idem/lease_token.hpp>
#include <idem/listener.hpp>
#include <idem/log.hpp>
#include <idem/memory_store.hpp>
#include <idem/metrics.hpp>
#include <idem/outcome.hpp>
#include <idem/payload.hpp>
#include <idem/store.hpp>
#include <idem/transaction.hpp>
