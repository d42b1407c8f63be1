// NCCL collectives on device buffers (engine/cuda/comm/nccl_communicator.h)
// over every local GPU (up to 4), one thread per rank with the in-process host
// communicator carrying the bootstrap id, as MPI does across processes.
// Values are small integers, exact in bf16, so every result is exact.
#include "engine/cuda/comm/nccl_communicator.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "engine/comm/local_communicator.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "gtest/gtest.h"

namespace meshtune::engine::cuda {
namespace {

TEST(NcclCommunicatorTest, NoDeviceIsAStatus) {
  if (DeviceCount() > 0) GTEST_SKIP() << "a device is present";
  auto world = MakeLocalWorld(1);
  auto comm = NcclCommunicator::Create(world[0].get());
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().message(),
            "no CUDA device: cudaGetDeviceCount found none");
}

TEST(NcclCommunicatorTest, CollectivesAreExactOnEveryLocalGpu) {
  const int n = std::min(DeviceCount(), 4);
  if (n == 0) GTEST_SKIP() << "no CUDA device";
  constexpr int64_t kCount = 1000;
  auto world = MakeLocalWorld(n);
  std::vector<std::string> failures(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto fail = [&](const std::string& what) { failures[r] = what; };
      if (!SetDevice(r).ok()) return fail("SetDevice");
      auto comm = NcclCommunicator::Create(world[r].get());
      if (!comm.ok()) return fail(comm.status().message());
      // All-reduce: rank r contributes r + 1 everywhere; sum n(n+1)/2.
      auto sum = Upload(std::vector<float>(kCount, r + 1.0f));
      if (!(*comm)->AllReduceSum(sum->as<float>(), kCount, nullptr).ok()) {
        return fail("all_reduce");
      }
      // All-gather of bf16 blocks: block q holds q + 1.
      auto mine = Upload(std::vector<Bf16>(kCount, FloatToBf16(r + 1.0f)));
      auto gathered = Upload(std::vector<Bf16>(kCount * n));
      if (!(*comm)
               ->AllGather(mine->as<Bf16>(), gathered->as<Bf16>(), kCount,
                           nullptr)
               .ok()) {
        return fail("all_gather");
      }
      // Reduce-scatter: every rank sends block q = q + 1; rank r gets
      // n·(r + 1).
      std::vector<float> blocks(kCount * n);
      for (int q = 0; q < n; ++q) {
        std::fill_n(blocks.begin() + q * kCount, kCount, q + 1.0f);
      }
      auto rs_in = Upload(blocks);
      auto rs_out = Upload(std::vector<float>(kCount));
      if (!(*comm)
               ->ReduceScatterSum(rs_in->as<float>(), rs_out->as<float>(),
                                  kCount, nullptr)
               .ok()) {
        return fail("reduce_scatter");
      }
      if (!Synchronize("nccl test").ok()) return fail("synchronize");
      const auto s = Download<float>(*sum, kCount).value();
      const auto g = ToFloat(Download<Bf16>(*gathered, kCount * n).value());
      const auto rs = Download<float>(*rs_out, kCount).value();
      for (int64_t i = 0; i < kCount; ++i) {
        if (s[i] != n * (n + 1) / 2.0f) return fail("all_reduce value");
        if (rs[i] != n * (r + 1.0f)) return fail("reduce_scatter value");
      }
      for (int q = 0; q < n; ++q) {
        if (g[q * kCount] != q + 1.0f) return fail("all_gather value");
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(failures[r], "") << "rank " << r;
}

}  // namespace
}  // namespace meshtune::engine::cuda
