// tests/unit/recycled_test.cpp — the per-thread block cache behind detail::recycling_allocator.
#include <idem/detail/recycled.hpp>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

#include <malloc.h>

#include <catch2/catch.hpp>

namespace {

using idem::detail::recycled_allocate;
using idem::detail::recycled_blocks_kept;
using idem::detail::recycled_deallocate;
using idem::detail::recycled_kept_per_size;
using idem::detail::recycling_blocks;

// Runs `body` on a thread of its own, whose cache starts empty.
template <class Body>
void on_fresh_thread(Body body) {
  std::thread t(body);
  t.join();
}

}  // namespace

TEST_CASE("a block given back is kept for the thread's next block of its size, up to a bound per size",
          "[recycled]") {
  on_fresh_thread([] {
    std::vector<void*> blocks;
    for (int i = 0; i < 100; ++i) blocks.push_back(recycled_allocate(1500));
    CHECK(recycled_blocks_kept() == 0);
    for (void* b : blocks) recycled_deallocate(b, 1500);
    CHECK(recycled_blocks_kept() == (recycling_blocks() ? recycled_kept_per_size : 0));

    // 1,400 bytes is in the same 256-byte class as 1,500: the last block kept comes first (the
    // blocks given back once the class was full went to operator delete).
    void* again = recycled_allocate(1400);
    if (recycling_blocks()) {
      CHECK(again == blocks[recycled_kept_per_size - 1]);
      CHECK(recycled_blocks_kept() == recycled_kept_per_size - 1);
    }
    recycled_deallocate(again, 1400);

    // Another class, and a block too large to keep, leave the class above alone.
    void* small = recycled_allocate(100);
    void* large = recycled_allocate(idem::detail::recycled_max_bytes + 1);
    recycled_deallocate(large, idem::detail::recycled_max_bytes + 1);
    CHECK(recycled_blocks_kept() == (recycling_blocks() ? recycled_kept_per_size : 0));
    recycled_deallocate(small, 100);
    CHECK(recycled_blocks_kept() == (recycling_blocks() ? recycled_kept_per_size + 1 : 0));
  });
}

TEST_CASE("a block made on one thread and given back on another joins the other thread's cache", "[recycled]") {
  std::vector<void*> blocks;
  on_fresh_thread([&] {
    for (int i = 0; i < 10; ++i) blocks.push_back(recycled_allocate(700));
  });
  on_fresh_thread([&] {
    for (void* b : blocks) recycled_deallocate(b, 700);
    CHECK(recycled_blocks_kept() == (recycling_blocks() ? 10U : 0U));
    // The blocks are usable memory of their full size, whoever made them.
    void* reused = recycled_allocate(768);
    std::fill_n(static_cast<char*>(reused), 768, 'x');
    if (recycling_blocks()) CHECK(std::find(blocks.begin(), blocks.end(), reused) != blocks.end());
    recycled_deallocate(reused, 768);
  });
}

TEST_CASE("a thread's kept blocks go back to the heap when the thread ends", "[recycled]") {
  if (!recycling_blocks()) return;  // nothing kept: the sanitizers see every block's own life
  // Made on this thread (the main arena, which mallinfo2 counts), kept by a thread that ends.
  constexpr std::size_t count = recycled_kept_per_size;
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < count; ++i) blocks.push_back(recycled_allocate(2000));
  const std::size_t in_use = mallinfo2().uordblks;
  on_fresh_thread([&] {
    for (void* b : blocks) recycled_deallocate(b, 2000);
    CHECK(recycled_blocks_kept() == count);
  });
  // Without the thread's drain, its ~128 KiB would still be in use.
  CHECK(mallinfo2().uordblks + count * 2000 * 9 / 10 <= in_use);
}

TEST_CASE("std::allocate_shared with recycling_allocator builds and destroys its object", "[recycled]") {
  on_fresh_thread([] {
    struct big {
      std::vector<int> values;
      char bytes[1200];
    };
    auto first = std::allocate_shared<big>(idem::detail::recycling_allocator<big>(), big{{1, 2, 3}, {}});
    CHECK(first->values.size() == 3);
    const void* where = first.get();
    first.reset();
    CHECK(recycled_blocks_kept() == (recycling_blocks() ? 1U : 0U));
    auto second = std::allocate_shared<big>(idem::detail::recycling_allocator<big>(), big{{4}, {}});
    if (recycling_blocks()) CHECK(second.get() == where);
    CHECK(second->values == std::vector<int>{4});
  });
}
