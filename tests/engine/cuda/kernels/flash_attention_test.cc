// The fused flash-style attention (engine/cuda/kernels/flash_attention.h)
// against the CPU reference (engine/cpu/ops.h AttentionForward/Backward) on
// bf16-rounded qkv, for MHA, GQA and MQA shapes, head_dim 32, 64 and 128,
// sequence lengths that leave partial tiles, with and without attention
// dropout; the saved log-sum-exp against a double-precision reference; and both
// outputs against the unfused cuda::Attention. Every element is compared.
//
// Tolerances (tests/engine/cuda/cuda_test_util.h): out at the bf16 bound
// (P is rounded to bf16 before P·V, then out once), twice that with dropout
// (the kept P is scaled by 1/(1 − p) before its rounding, as the unfused
// path); dqkv at twice the bf16 bound (P and dS enter the MMAs in bf16), as
// the unfused test; L at the fp32 bound (fp32 sums in another order). Flash
// against unfused adds the two paths' errors: twice, and four times for the
// gradients.
#include "engine/cuda/kernels/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "engine/cpu/ops.h"
#include "engine/cuda/gpt_model.h"
#include "engine/cuda/kernels/attention.h"
#include "engine/cuda/kernels/linear.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "gtest/gtest.h"
#include "tests/engine/cuda/cuda_test_util.h"

namespace meshtune::engine::cuda {
namespace {

using testing::Close;
using testing::CloseFp32;
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

template <typename T>
std::vector<T> Get(const DeviceBuffer& buffer, size_t count) {
  auto host = Download<T>(buffer, count);
  EXPECT_TRUE(host.ok()) << host.status().message();
  return host.ok() ? std::move(host).value() : std::vector<T>(count);
}

// (s, b, heads, groups, head_dim)
using Shape = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>;

// lse[(bi·heads + j)·s + t] = log Σ_{u ≤ t} exp(scale·q_t·k_u), in double.
std::vector<float> ReferenceLse(const std::vector<float>& qkv, int64_t s,
                                int64_t b, int64_t heads, int64_t groups,
                                int64_t d) {
  const int64_t width = (heads + 2 * groups) * d;
  const double scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> lse(b * heads * s);
  std::vector<double> x(s);
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t j = 0; j < heads; ++j) {
      const int64_t g = j / (heads / groups);
      for (int64_t t = 0; t < s; ++t) {
        const float* q = &qkv[(t * b + bi) * width + j * d];
        double m = -INFINITY;
        for (int64_t u = 0; u <= t; ++u) {
          const float* k = &qkv[(u * b + bi) * width + (heads + g) * d];
          double dot = 0.0;
          for (int64_t c = 0; c < d; ++c) dot += double{q[c]} * k[c];
          x[u] = scale * dot;
          m = std::max(m, x[u]);
        }
        double sum = 0.0;
        for (int64_t u = 0; u <= t; ++u) sum += std::exp(x[u] - m);
        lse[(bi * heads + j) * s + t] = static_cast<float>(m + std::log(sum));
      }
    }
  }
  return lse;
}

cpu::DropoutSpec TestDropout() {
  cpu::DropoutSpec drop;
  drop.p = 0.2f;
  drop.key = cpu::DropoutKey(7, 1, cpu::DropoutSite::kAttentionProbs);
  drop.first_sample = 5;
  drop.first_head = 2;  // as on tp rank 1 of a layout with 2 heads per rank
  return drop;
}

class CudaFlashAttentionTest : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override {
    if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }

  // Runs the flash forward and backward on bf16(qkv), bf16(dout).
  struct Result {
    std::vector<float> out, lse, dqkv;
  };
  Result RunFlash(const std::vector<float>& qkv, const std::vector<float>& dout,
                  const cpu::DropoutSpec* drop) {
    const auto [s, b, heads, groups, d] = GetParam();
    const int64_t n = s * b, width = (heads + 2 * groups) * d;
    Result r;
    auto flash = FlashAttention::Create(s, b, heads, groups, d);
    EXPECT_TRUE(flash.ok()) << flash.status().message();
    if (!flash.ok()) return r;
    EXPECT_EQ((*flash)->lse_elements(), b * heads * s);
    DeviceBuffer d_qkv = Put(ToBf16(qkv));
    DeviceBuffer d_dout = Put(ToBf16(dout));
    // Filled with NaN-free garbage so an element the kernels miss shows.
    DeviceBuffer d_out = Put(ToBf16(std::vector<float>(n * heads * d, 7.0f)));
    DeviceBuffer d_lse = Put(std::vector<float>(b * heads * s, 7.0f));
    DeviceBuffer d_dqkv = Put(ToBf16(std::vector<float>(n * width, 7.0f)));
    Status st = (*flash)->Forward(d_qkv.as<Bf16>(), d_out.as<Bf16>(),
                                  d_lse.as<float>(), nullptr, drop);
    EXPECT_TRUE(st.ok()) << st.message();
    st = (*flash)->Backward(d_dout.as<Bf16>(), d_qkv.as<Bf16>(),
                            d_out.as<Bf16>(), d_lse.as<float>(),
                            d_dqkv.as<Bf16>(), nullptr, drop);
    EXPECT_TRUE(st.ok()) << st.message();
    st = Synchronize("flash attention test");
    EXPECT_TRUE(st.ok()) << st.message();
    r.out = ToFloat(Get<Bf16>(d_out, n * heads * d));
    r.lse = Get<float>(d_lse, b * heads * s);
    r.dqkv = ToFloat(Get<Bf16>(d_dqkv, n * width));
    return r;
  }
};

TEST_P(CudaFlashAttentionTest, ForwardAndBackwardMatchCpu) {
  const auto [s, b, heads, groups, d] = GetParam();
  const CpuAttentionCase cpu_case =
      MakeCpuAttentionCase(s, b, heads, groups, d, 1);
  const std::vector<float>& qkv = cpu_case.qkv;
  const std::vector<float>& dout = cpu_case.dout;
  const std::vector<float>& out = cpu_case.out;
  const std::vector<float>& dqkv = cpu_case.dqkv;
  const Result r = RunFlash(qkv, dout, nullptr);
  EXPECT_TRUE(Close(r.out, out, kBf16Rtol, kBf16Atol));
  EXPECT_TRUE(CloseFp32(r.lse, ReferenceLse(qkv, s, b, heads, groups, d)));
  EXPECT_TRUE(Close(r.dqkv, dqkv, 2 * kBf16Rtol, 2 * kBf16Atol));
}

// Attention dropout: the CPU op's mask at the same element indices
// (sample, head and query row offsets included).
TEST_P(CudaFlashAttentionTest, DropoutMatchesCpu) {
  const auto [s, b, heads, groups, d] = GetParam();
  const cpu::DropoutSpec drop = TestDropout();
  const CpuAttentionCase cpu_case =
      MakeCpuAttentionCase(s, b, heads, groups, d, 3, &drop);
  const std::vector<float>& qkv = cpu_case.qkv;
  const std::vector<float>& dout = cpu_case.dout;
  const std::vector<float>& out = cpu_case.out;
  const std::vector<float>& dqkv = cpu_case.dqkv;
  const Result r = RunFlash(qkv, dout, &drop);
  EXPECT_TRUE(Close(r.out, out, 2 * kBf16Rtol, 2 * kBf16Atol));
  // The log-sum-exp is of the undropped scores.
  EXPECT_TRUE(CloseFp32(r.lse, ReferenceLse(qkv, s, b, heads, groups, d)));
  EXPECT_TRUE(Close(r.dqkv, dqkv, 2 * kBf16Rtol, 2 * kBf16Atol));
}

// The fused kernel against the unfused cuBLASLt path, without and with
// dropout.
TEST_P(CudaFlashAttentionTest, MatchesUnfusedAttention) {
  const auto [s, b, heads, groups, d] = GetParam();
  const int64_t n = s * b, width = (heads + 2 * groups) * d;
  const auto qkv = RandomBf16Values(n * width, 5, 2.0f);
  const auto dout = RandomBf16Values(n * heads * d, 6, 1.0f);
  auto gemm = GemmContext::Create();
  ASSERT_TRUE(gemm.ok()) << gemm.status().message();
  auto unfused = Attention::Create(gemm->get(), s, b, heads, groups, d);
  ASSERT_TRUE(unfused.ok()) << unfused.status().message();
  const cpu::DropoutSpec drop = TestDropout();
  for (const cpu::DropoutSpec* spec :
       {static_cast<const cpu::DropoutSpec*>(nullptr), &drop}) {
    SCOPED_TRACE(spec != nullptr ? "with dropout" : "without dropout");
    DeviceBuffer d_qkv = Put(ToBf16(qkv));
    DeviceBuffer d_dout = Put(ToBf16(dout));
    DeviceBuffer d_out = Put(std::vector<Bf16>(n * heads * d));
    DeviceBuffer d_probs = Put(std::vector<Bf16>(b * heads * s * s));
    DeviceBuffer d_dqkv = Put(std::vector<Bf16>(n * width));
    ASSERT_TRUE((*unfused)
                    ->Forward(d_qkv.as<Bf16>(), d_out.as<Bf16>(),
                              d_probs.as<Bf16>(), nullptr, spec)
                    .ok());
    ASSERT_TRUE((*unfused)
                    ->Backward(d_dout.as<Bf16>(), d_qkv.as<Bf16>(),
                               d_probs.as<Bf16>(), d_dqkv.as<Bf16>(), nullptr,
                               spec)
                    .ok());
    ASSERT_TRUE(Synchronize("unfused attention").ok());
    const auto out = ToFloat(Get<Bf16>(d_out, n * heads * d));
    const auto dqkv = ToFloat(Get<Bf16>(d_dqkv, n * width));
    const Result r = RunFlash(qkv, dout, spec);
    const float widen = spec != nullptr ? 4.0f : 2.0f;
    EXPECT_TRUE(Close(r.out, out, widen * kBf16Rtol, widen * kBf16Atol));
    EXPECT_TRUE(Close(r.dqkv, dqkv, 4 * kBf16Rtol, 4 * kBf16Atol));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaFlashAttentionTest,
    ::testing::Values(Shape{100, 2, 4, 4, 64},     // GPT (heads = groups), tail
                      Shape{200, 1, 8, 2, 128},    // GQA, 4 heads per group
                      Shape{130, 2, 4, 1, 64},     // MQA, 2-row tail tile
                      Shape{37, 3, 6, 3, 32},      // under one tile, odd b
                      Shape{256, 1, 2, 2, 128}));  // whole tiles only

TEST(CudaFlashAttentionArgsTest, BadShapesAreAStatus) {
  auto a = FlashAttention::Create(64, 1, 6, 4, 64);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(),
            "flash attention: sizes must be positive and heads a multiple of "
            "groups");
  auto zero = FlashAttention::Create(0, 1, 4, 4, 64);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().message(), a.status().message());
}

TEST(CudaFlashAttentionArgsTest, HeadDimOutsideTheKernelIsAStatus) {
  for (int64_t d : {72, 144, 8}) {
    auto a = FlashAttention::Create(64, 1, 4, 4, d);
    ASSERT_FALSE(a.ok()) << d;
    EXPECT_EQ(a.status().message(), "flash attention: head_dim " +
                                        std::to_string(d) +
                                        " is not a multiple of 16 up to 128");
    EXPECT_EQ(a.status().hint(),
              "choose hidden_size / num_attention_heads in 16, 32, ..., 128, "
              "or set MESHTUNE_CUDA_ATTENTION=unfused");
  }
}

TEST(CudaFlashAttentionArgsTest, TooManyHeadsForTheGridIsAStatus) {
  auto a = FlashAttention::Create(64, 4096, 32, 32, 64);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(),
            "flash attention: b·heads = 131072 exceeds the grid limit 65535");
  EXPECT_EQ(a.status().hint(), "use a smaller micro-batch size");
}

// The shared-memory limit is a per-kernel setting: an instance created
// after a larger one must not break the larger one's launches.
TEST(CudaFlashAttentionSharedMemoryTest,
     SmallerHeadDimCreatedLaterKeepsLarger) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t s = 70, b = 1, heads = 2, groups = 2, d = 128;
  const int64_t width = (heads + 2 * groups) * d;
  auto large = FlashAttention::Create(s, b, heads, groups, d);
  ASSERT_TRUE(large.ok()) << large.status().message();
  auto small = FlashAttention::Create(s, b, heads, groups, 16);
  ASSERT_TRUE(small.ok()) << small.status().message();
  const auto qkv = RandomBf16Values(s * b * width, 8, 2.0f);
  std::vector<float> out(s * b * heads * d);
  cpu::AttentionForward(qkv.data(), out.data(), nullptr, s, b, heads, groups,
                        d);
  DeviceBuffer d_qkv = Put(ToBf16(qkv));
  DeviceBuffer d_out = Put(std::vector<Bf16>(out.size()));
  DeviceBuffer d_lse = Put(std::vector<float>(b * heads * s));
  Status st = (*large)->Forward(d_qkv.as<Bf16>(), d_out.as<Bf16>(),
                                d_lse.as<float>(), nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  st = Synchronize("flash attention shared memory test");
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(
      Close(ToFloat(Get<Bf16>(d_out, out.size())), out, kBf16Rtol, kBf16Atol));
}

TEST(CudaFlashAttentionArgsTest, MisalignedPointersAreAStatus) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto a = FlashAttention::Create(16, 1, 2, 2, 64);
  ASSERT_TRUE(a.ok()) << a.status().message();
  DeviceBuffer qkv = Put(std::vector<Bf16>(16 * 4 * 64 + 8));
  DeviceBuffer out = Put(std::vector<Bf16>(16 * 2 * 64));
  DeviceBuffer lse = Put(std::vector<float>(2 * 16));
  Status st = (*a)->Forward(qkv.as<Bf16>() + 1, out.as<Bf16>(), lse.as<float>(),
                            nullptr);
  EXPECT_EQ(st.message(),
            "flash attention: qkv and out must be 16-byte aligned");
  st = (*a)->Backward(out.as<Bf16>(), qkv.as<Bf16>() + 1, out.as<Bf16>(),
                      lse.as<float>(), qkv.as<Bf16>(), nullptr);
  EXPECT_EQ(st.message(),
            "flash attention: dout and qkv must be 16-byte aligned");
}

TEST(CudaFlashAttentionArgsTest, NoDeviceIsAStatus) {
  if (DeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  auto a = FlashAttention::Create(64, 1, 4, 4, 64);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(),
            "no CUDA device: cudaGetDeviceCount found none");
}

// The model's kernel switch (MESHTUNE_CUDA_ATTENTION, engine/cuda/gpt_model.h).
TEST(CudaAttentionKernelTest, ParsesTheEnvironmentValue) {
  EXPECT_EQ(ParseAttentionKernel(nullptr).value(), AttentionKernel::kFlash);
  EXPECT_EQ(ParseAttentionKernel("").value(), AttentionKernel::kFlash);
  EXPECT_EQ(ParseAttentionKernel("flash").value(), AttentionKernel::kFlash);
  EXPECT_EQ(ParseAttentionKernel("unfused").value(), AttentionKernel::kUnfused);
  auto bad = ParseAttentionKernel("fused");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "MESHTUNE_CUDA_ATTENTION=fused is not an attention kernel");
  EXPECT_EQ(bad.status().hint(), "set it to flash or unfused, or unset it");
}

}  // namespace
}  // namespace meshtune::engine::cuda
