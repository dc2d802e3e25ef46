// runtime/core/recycled.cpp — the per-thread block cache behind recycling_allocator.
#include <idem/detail/recycled.hpp>

#include <array>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define IDEM_RECYCLE_BLOCKS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define IDEM_RECYCLE_BLOCKS 0
#endif
#endif
#ifndef IDEM_RECYCLE_BLOCKS
#define IDEM_RECYCLE_BLOCKS 1
#endif

namespace idem::detail {

#if IDEM_RECYCLE_BLOCKS
namespace {

constexpr std::size_t granule = 256;
constexpr std::size_t size_classes = recycled_max_bytes / granule;

struct free_block {
  free_block* next;
};

// Trivially destructible, so that it outlives every other thread_local of the thread: a block
// given back during the thread's teardown, after `drain` emptied it, goes to operator delete.
struct block_cache {
  std::array<free_block*, size_classes> heads;
  std::array<std::size_t, size_classes> counts;
  enum : unsigned char { unused, open, closed } state;
};
constinit thread_local block_cache cache{};

// Empties the thread's cache when the thread ends.
struct drain {
  drain() = default;
  drain(const drain&) = delete;
  drain& operator=(const drain&) = delete;
  ~drain() {
    cache.state = block_cache::closed;
    for (std::size_t c = 0; c < size_classes; ++c) {
      while (free_block* b = cache.heads[c]) {
        cache.heads[c] = b->next;
        ::operator delete(b, (c + 1) * granule);
      }
      cache.counts[c] = 0;
    }
  }
};

std::size_t class_of(std::size_t bytes) noexcept { return (bytes - 1) / granule; }

}  // namespace

void* recycled_allocate(std::size_t bytes) {
  if (bytes == 0 || bytes > recycled_max_bytes) return ::operator new(bytes);
  const std::size_t c = class_of(bytes);
  if (free_block* b = cache.heads[c]) {
    cache.heads[c] = b->next;
    --cache.counts[c];
    return b;
  }
  return ::operator new((c + 1) * granule);
}

void recycled_deallocate(void* block, std::size_t bytes) noexcept {
  if (bytes == 0 || bytes > recycled_max_bytes) return ::operator delete(block, bytes);
  const std::size_t c = class_of(bytes);
  if (cache.state != block_cache::open) {
    if (cache.state == block_cache::closed) return ::operator delete(block, (c + 1) * granule);
    thread_local drain drains_at_exit;  // the thread's first block kept: emptied when the thread ends
    cache.state = block_cache::open;
  }
  if (cache.counts[c] == recycled_kept_per_size) return ::operator delete(block, (c + 1) * granule);
  cache.heads[c] = ::new (block) free_block{cache.heads[c]};
  ++cache.counts[c];
}

bool recycling_blocks() noexcept { return true; }

std::size_t recycled_blocks_kept() noexcept {
  std::size_t kept = 0;
  for (std::size_t n : cache.counts) kept += n;
  return kept;
}
#else
bool recycling_blocks() noexcept { return false; }
std::size_t recycled_blocks_kept() noexcept { return 0; }
void* recycled_allocate(std::size_t bytes) { return ::operator new(bytes); }
void recycled_deallocate(void* block, std::size_t bytes) noexcept { ::operator delete(block, bytes); }
#endif

}  // namespace idem::detail
