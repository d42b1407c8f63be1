// engine/cuda/runtime/device.h on a device (label gpu; skips without one):
// PinnedUpload's asynchronous copies.
#include "engine/cuda/runtime/device.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace meshtune::engine::cuda {
namespace {

// Two uploads through one pinned buffer into two device buffers, the
// source overwritten right after each call: each device buffer holds what
// its call was given (the second waits for the first's copy).
TEST(PinnedUploadTest, EachCopyDeliversItsOwnData) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t n = 1 << 20;
  auto upload = PinnedUpload::Create(n * sizeof(int32_t));
  ASSERT_TRUE(upload.ok()) << upload.status().message();
  auto a = DeviceBuffer::Allocate(n * sizeof(int32_t));
  auto b = DeviceBuffer::Allocate(n * sizeof(int32_t));
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<int32_t> host(n, 7);
  ASSERT_TRUE(upload->Copy(host.data(), a->data(), n * 4, nullptr).ok());
  host.assign(n, 9);
  ASSERT_TRUE(upload->Copy(host.data(), b->data(), n * 4, nullptr).ok());
  host.assign(n, -1);
  ASSERT_TRUE(Synchronize("test").ok());
  EXPECT_EQ(Download<int32_t>(*a, n).value(), std::vector<int32_t>(n, 7));
  EXPECT_EQ(Download<int32_t>(*b, n).value(), std::vector<int32_t>(n, 9));
}

TEST(PinnedUploadTest, MoreThanTheBufferIsAnError) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto upload = PinnedUpload::Create(16);
  ASSERT_TRUE(upload.ok()) << upload.status().message();
  auto dst = DeviceBuffer::Allocate(64);
  ASSERT_TRUE(dst.ok());
  std::vector<char> host(64);
  const Status s = upload->Copy(host.data(), dst->data(), 64, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "pinned upload of 64 bytes into a buffer of 16");
}

TEST(PinnedUploadHostOnlyTest, NoDeviceIsAStatus) {
  if (DeviceCount() > 0) GTEST_SKIP() << "a device is present";
  auto upload = PinnedUpload::Create(16);
  ASSERT_FALSE(upload.ok());
  EXPECT_EQ(upload.status().message(),
            "no CUDA device: cudaGetDeviceCount found none");
}

}  // namespace
}  // namespace meshtune::engine::cuda
