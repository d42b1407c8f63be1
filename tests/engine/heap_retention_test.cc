#include "engine/heap_retention.h"

#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "gtest/gtest.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace meshtune::engine {
namespace {

#if defined(__GLIBC__)
// An 8 MiB block, far above glibc's default 128 KiB mmap threshold, comes
// from the heap once the engine's settings are in, and stays there, free,
// after it is released: the next micro-batch reuses it without faults.
TEST(RetainFreedHeapMemory, LargeBlocksStayInTheHeapAfterFree) {
  ASSERT_TRUE(RetainFreedHeapMemory());
  constexpr size_t kBytes = size_t{8} << 20;
  const struct mallinfo2 before = mallinfo2();
  void* block = std::malloc(kBytes);
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, kBytes);
  const struct mallinfo2 held = mallinfo2();
  // Not a separate mapping: glibc counts mmap'd blocks in hblkhd.
  EXPECT_EQ(held.hblkhd, before.hblkhd);
  std::free(block);
  const struct mallinfo2 after = mallinfo2();
  // Kept as free heap space, not returned to the kernel: the heap is not
  // trimmed. (Whether it grew depends on the free space earlier tests of
  // the process left, so only "not shrunk" is checked.)
  EXPECT_GE(after.fordblks, kBytes);
  EXPECT_EQ(after.arena, held.arena);
  // Idempotent.
  EXPECT_TRUE(RetainFreedHeapMemory());
}
#endif

}  // namespace
}  // namespace meshtune::engine
