// idem/detail/recycled.hpp — a per-thread cache for the objects of asynchronous calls.
#pragma once

#include <cstddef>
#include <new>

namespace idem::detail {

// A block of `bytes` from the calling thread's cache, or from operator new. Blocks of up to
// recycled_max_bytes are kept for reuse when given back; larger ones pass straight through.
[[nodiscard]] void* recycled_allocate(std::size_t bytes);
// Gives back a block recycled_allocate(bytes) returned, on any thread: it joins the calling
// thread's cache (up to a bound per size), or goes back to operator delete.
void recycled_deallocate(void* block, std::size_t bytes) noexcept;

inline constexpr std::size_t recycled_max_bytes = 4096;
// At most this many blocks of one size class (256 bytes wide) are kept per thread.
inline constexpr std::size_t recycled_kept_per_size = 64;

// Whether blocks are recycled in this build (not under AddressSanitizer or ThreadSanitizer).
[[nodiscard]] bool recycling_blocks() noexcept;
// How many blocks the calling thread's cache holds, every size together: for tests.
[[nodiscard]] std::size_t recycled_blocks_kept() noexcept;

// recycling_allocator
//
// For std::allocate_shared of the objects an asynchronous call makes once per call (the Asio
// operation, the engine's call, a store's claim with its request, script call and wait: 0.4 to
// 2 KiB). glibc keeps a per-thread cache only of blocks up to 1 KiB, and only seven of a size; with
// dozens of calls in flight their completions free a burst of such blocks before the next calls
// allocate them again, and each goes through malloc's bins (a large one also makes it consolidate
// its fast bins). Kept here instead, up to 64 of a size per thread. Under AddressSanitizer and
// ThreadSanitizer it is plain operator new, so that they see every block's life.
template <class T>
struct recycling_allocator {
  using value_type = T;
  recycling_allocator() noexcept = default;
  template <class U>
  recycling_allocator(const recycling_allocator<U>&) noexcept {}  // NOLINT: converting, as allocators do
  [[nodiscard]] T* allocate(std::size_t n) {
    static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "recycled blocks have operator new's alignment");
    return static_cast<T*>(recycled_allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { recycled_deallocate(p, n * sizeof(T)); }
  template <class U>
  friend bool operator==(const recycling_allocator&, const recycling_allocator<U>&) noexcept {
    return true;
  }
};

}  // namespace idem::detail
