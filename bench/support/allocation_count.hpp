// bench/support/allocation_count.hpp — how many times the program has allocated, for the benches that
// print allocations per call beside their timings. A bench counts by linking idem_bench_allocations,
// whose replacement of the global operator new counts every call of it, on any thread (so the
// allocations of a store's own threads count too). C's malloc is not counted: what hiredis and libpq
// allocate for themselves is not in the figure. Not for tests: nothing asserts a count.
#pragma once

#include <cstdint>

namespace idem::bench {

// The calls of any global operator new so far, all threads together. Relaxed: read it between
// phases, when the threads that allocate have nothing in flight.
[[nodiscard]] std::uint64_t allocations() noexcept;

// Allocations per call over a phase of `calls` calls that began when allocations() was `before`.
[[nodiscard]] double allocations_per_call(std::uint64_t before, std::uint64_t calls) noexcept;

}  // namespace idem::bench
