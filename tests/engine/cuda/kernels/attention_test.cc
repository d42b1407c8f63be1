// GPU causal attention (engine/cuda/kernels/attention.h) against the CPU
// reference (engine/cpu/ops.h AttentionForward/Backward) on bf16-rounded qkv,
// with grouped-query attention and several shapes. Tolerances as ops_test.cc's
// bf16 bound; the gradients get twice that (P and dS are stored in bf16, two
// roundings more than the CPU's fp32 path).
#include "engine/cuda/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "engine/cpu/ops.h"
#include "engine/cuda/kernels/linear.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "gtest/gtest.h"
#include "tests/engine/cuda/cuda_test_util.h"

namespace meshtune::engine::cuda {
namespace {

using testing::Close;
using testing::CpuAttentionCase;
using testing::kBf16Atol;
using testing::kBf16Rtol;
using testing::MakeCpuAttentionCase;
using testing::RandomBf16Values;

template <typename T>
DeviceBuffer Put(const std::vector<T>& host) {
  auto buffer = Upload(host);
  EXPECT_TRUE(buffer.ok()) << buffer.status().message();
  return std::move(buffer).value();
}

// (s, b, heads, groups, head_dim)
using Shape = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>;

class CudaAttentionTest : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override {
    if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(CudaAttentionTest, ForwardAndBackwardMatchCpu) {
  const auto [s, b, heads, groups, d] = GetParam();
  const int64_t n = s * b, width = (heads + 2 * groups) * d;
  const CpuAttentionCase cpu_case =
      MakeCpuAttentionCase(s, b, heads, groups, d, 1);
  const std::vector<float>& qkv = cpu_case.qkv;
  const std::vector<float>& dout = cpu_case.dout;
  const std::vector<float>& out = cpu_case.out;
  const std::vector<float>& probs = cpu_case.probs;
  const std::vector<float>& dqkv = cpu_case.dqkv;

  auto gemm = GemmContext::Create();
  ASSERT_TRUE(gemm.ok()) << gemm.status().message();
  auto attention = Attention::Create(gemm->get(), s, b, heads, groups, d);
  ASSERT_TRUE(attention.ok()) << attention.status().message();
  ASSERT_EQ((*attention)->probs_elements(), b * heads * s * s);
  DeviceBuffer d_qkv = Put(ToBf16(qkv));
  DeviceBuffer d_dout = Put(ToBf16(dout));
  DeviceBuffer d_out = Put(std::vector<Bf16>(n * heads * d));
  DeviceBuffer d_probs = Put(std::vector<Bf16>(b * heads * s * s));
  DeviceBuffer d_dqkv = Put(std::vector<Bf16>(n * width));
  ASSERT_TRUE((*attention)
                  ->Forward(d_qkv.as<Bf16>(), d_out.as<Bf16>(),
                            d_probs.as<Bf16>(), nullptr)
                  .ok());
  ASSERT_TRUE((*attention)
                  ->Backward(d_dout.as<Bf16>(), d_qkv.as<Bf16>(),
                             d_probs.as<Bf16>(), d_dqkv.as<Bf16>(), nullptr)
                  .ok());
  ASSERT_TRUE(Synchronize("attention test").ok());
  EXPECT_TRUE(Close(ToFloat(Download<Bf16>(d_probs, probs.size()).value()),
                    probs, kBf16Rtol, kBf16Atol));
  EXPECT_TRUE(Close(ToFloat(Download<Bf16>(d_out, out.size()).value()), out,
                    kBf16Rtol, kBf16Atol));
  EXPECT_TRUE(Close(ToFloat(Download<Bf16>(d_dqkv, dqkv.size()).value()), dqkv,
                    2 * kBf16Rtol, 2 * kBf16Atol));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaAttentionTest,
    ::testing::Values(Shape{64, 2, 4, 4, 32},      // MHA
                      Shape{128, 1, 8, 2, 64},     // GQA, 4 heads per group
                      Shape{37, 3, 6, 3, 16},      // odd s and b
                      Shape{512, 1, 2, 1, 128}));  // long rows, MQA

// Attention dropout: the CPU op's mask, P saved undropped.
TEST_P(CudaAttentionTest, DropoutMatchesCpu) {
  const auto [s, b, heads, groups, d] = GetParam();
  cpu::DropoutSpec drop;
  drop.p = 0.2f;
  drop.key = cpu::DropoutKey(7, 1, cpu::DropoutSite::kAttentionProbs);
  drop.first_sample = 5;
  const int64_t n = s * b, width = (heads + 2 * groups) * d;
  const CpuAttentionCase cpu_case =
      MakeCpuAttentionCase(s, b, heads, groups, d, 3, &drop);
  const std::vector<float>& qkv = cpu_case.qkv;
  const std::vector<float>& dout = cpu_case.dout;
  const std::vector<float>& out = cpu_case.out;
  const std::vector<float>& probs = cpu_case.probs;
  const std::vector<float>& dqkv = cpu_case.dqkv;
  auto gemm = GemmContext::Create();
  ASSERT_TRUE(gemm.ok()) << gemm.status().message();
  auto attention = Attention::Create(gemm->get(), s, b, heads, groups, d);
  ASSERT_TRUE(attention.ok()) << attention.status().message();
  DeviceBuffer d_qkv = Put(ToBf16(qkv));
  DeviceBuffer d_dout = Put(ToBf16(dout));
  DeviceBuffer d_out = Put(std::vector<Bf16>(n * heads * d));
  DeviceBuffer d_probs = Put(std::vector<Bf16>(b * heads * s * s));
  DeviceBuffer d_dqkv = Put(std::vector<Bf16>(n * width));
  ASSERT_TRUE((*attention)
                  ->Forward(d_qkv.as<Bf16>(), d_out.as<Bf16>(),
                            d_probs.as<Bf16>(), nullptr, &drop)
                  .ok());
  ASSERT_TRUE((*attention)
                  ->Backward(d_dout.as<Bf16>(), d_qkv.as<Bf16>(),
                             d_probs.as<Bf16>(), d_dqkv.as<Bf16>(), nullptr,
                             &drop)
                  .ok());
  ASSERT_TRUE(Synchronize("attention dropout test").ok());
  EXPECT_TRUE(Close(ToFloat(Download<Bf16>(d_probs, probs.size()).value()),
                    probs, kBf16Rtol, kBf16Atol));
  EXPECT_TRUE(Close(ToFloat(Download<Bf16>(d_out, out.size()).value()), out,
                    2 * kBf16Rtol, 2 * kBf16Atol));
  EXPECT_TRUE(Close(ToFloat(Download<Bf16>(d_dqkv, dqkv.size()).value()), dqkv,
                    2 * kBf16Rtol, 2 * kBf16Atol));
}

TEST(CudaAttentionArgsTest, BadShapesAreAStatus) {
  auto a = Attention::Create(nullptr, 64, 1, 6, 4, 32);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(),
            "attention: sizes must be positive and heads a multiple of groups");
}

}  // namespace
}  // namespace meshtune::engine::cuda
