// The GPU's cached attention (engine/cuda/kernels/attention_cached.cu)
// against the CPU op (engine/cpu/attention_cached.h) on bf16-rounded qkv: a
// prefill, a decode step and a step of several positions, GQA, b = 2, and a
// context longer than one key tile (1024) so the online-softmax merge runs.
// Tolerance: ops_test.cc's bf16 bound.
#include "engine/cpu/attention_cached.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <tuple>
#include <vector>

#include "engine/cuda/kernels/ops.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "tests/engine/cuda/cuda_test_util.h"

namespace meshtune::engine::cuda {
namespace {

using testing::Close;
using testing::kBf16Atol;
using testing::kBf16Rtol;
using testing::RandomBf16Values;

// (positions per step..., head_dim)
using Case = std::tuple<std::vector<int64_t>, int64_t>;

class CudaAttentionCachedTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(CudaAttentionCachedTest, StepsMatchTheCpuOp) {
  const auto& [steps, d] = GetParam();
  constexpr int64_t kB = 2, kHeads = 4, kGroups = 2;
  int64_t total = 0;
  for (int64_t t : steps) total += t;
  const int64_t capacity = total + 3, width = (kHeads + 2 * kGroups) * d;
  const cpu::AttentionChunkShape shape{kB, kHeads, kGroups, d};
  const std::vector<float> qkv = RandomBf16Values(total * kB * width, 5, 2.0f);
  const int64_t cache = kB * kGroups * capacity * d;
  std::vector<float> cpu_k(cache, 0.0f), cpu_v(cache, 0.0f);
  auto k = DeviceBuffer::Allocate(cache * sizeof(Bf16));
  auto v = DeviceBuffer::Allocate(cache * sizeof(Bf16));
  ASSERT_TRUE(k.ok() && v.ok());
  int64_t past = 0;
  for (int64_t t : steps) {
    const std::vector<float> rows(qkv.begin() + past * kB * width,
                                  qkv.begin() + (past + t) * kB * width);
    cpu::KvCacheAppend(rows.data(), t, past, capacity, shape, cpu_k.data(),
                       cpu_v.data());
    std::vector<float> expected(t * kB * kHeads * d);
    cpu::AttentionCachedForward(rows.data(), cpu_k.data(), cpu_v.data(), t,
                                past, capacity, shape, expected.data());
    auto in = Upload(ToBf16(rows));
    auto out = DeviceBuffer::Allocate(expected.size() * sizeof(Bf16));
    ASSERT_TRUE(in.ok() && out.ok());
    ASSERT_TRUE(KvCacheAppend(in->as<Bf16>(), t, kB, kHeads, kGroups, d, past,
                              capacity, k->as<Bf16>(), v->as<Bf16>(), nullptr)
                    .ok());
    ASSERT_TRUE(AttentionCachedForward(in->as<Bf16>(), k->as<Bf16>(),
                                       v->as<Bf16>(), t, kB, kHeads, kGroups, d,
                                       past, capacity, out->as<Bf16>(), nullptr)
                    .ok());
    auto got = Download<Bf16>(*out, expected.size());
    ASSERT_TRUE(got.ok());
    EXPECT_TRUE(Close(ToFloat(*got), expected, kBf16Rtol, kBf16Atol))
        << "step at " << past;
    past += t;
  }
}

INSTANTIATE_TEST_SUITE_P(Steps, CudaAttentionCachedTest,
                         ::testing::Values(Case{{5, 1, 3}, 64},
                                           Case{{16, 1}, 128},
                                           Case{{1100, 1, 2}, 32}));

TEST(CudaAttentionCachedHostOnlyTest, RejectsWhatItCannotRun) {
  // Checked before any launch, so this runs without a device too.
  EXPECT_FALSE(AttentionCachedForward(nullptr, nullptr, nullptr, 1, 1, 2, 2,
                                      512, 0, 4, nullptr, nullptr)
                   .ok());  // head_dim above 256
  EXPECT_FALSE(KvCacheAppend(nullptr, 5, 1, 2, 2, 64, 0, 4, nullptr, nullptr,
                             nullptr)
                   .ok());  // 5 positions into a cache of 4
}

}  // namespace
}  // namespace meshtune::engine::cuda
