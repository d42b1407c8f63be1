// cuBLASLt linear layers (engine/cuda/kernels/linear.h) against the CPU
// LinearForward/LinearBackward on bf16-rounded inputs, with the tolerances
// of cuda_test_util.h unscaled: a k-term dot product in fp32 differs from
// the CPU's summation order by O(√k) fp32 roundings, far below one bf16
// rounding.
#include "engine/cuda/kernels/linear.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "engine/cpu/ops.h"
#include "engine/cuda/kernels/ops.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "gtest/gtest.h"
#include "tests/engine/cuda/cuda_test_util.h"

namespace meshtune::engine::cuda {
namespace {

using testing::Close;
using testing::kBf16Atol;
using testing::kBf16Rtol;
using testing::RandomBf16Values;

template <typename T>
T* Keep(std::vector<DeviceBuffer>& keep, const std::vector<T>& host) {
  auto buffer = Upload(host);
  EXPECT_TRUE(buffer.ok()) << buffer.status().message();
  keep.push_back(std::move(buffer).value());
  return keep.back().as<T>();
}

template <typename T>
std::vector<T> Fetch(const std::vector<DeviceBuffer>& keep, const T* p,
                     size_t count) {
  EXPECT_TRUE(Synchronize("linear test").ok());
  for (const DeviceBuffer& b : keep) {
    if (b.data() == p) return Download<T>(b, count).value();
  }
  ADD_FAILURE() << "unknown buffer";
  return {};
}

// Shapes: a Megatron fc1 of a small model, and odd sizes that are not
// multiples of 8 (no fused GELU, unaligned leading dimensions).
class CudaLinearTest
    : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, int64_t>> {
 protected:
  void SetUp() override {
    if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    auto ctx = GemmContext::Create();
    ASSERT_TRUE(ctx.ok()) << ctx.status().message();
    ctx_ = std::move(ctx).value();
  }
  std::unique_ptr<GemmContext> ctx_;
  std::vector<DeviceBuffer> keep_;
};

TEST_P(CudaLinearTest, ForwardBackwardAndGeluMatchCpu) {
  const auto [n, k, m] = GetParam();
  const auto in = RandomBf16Values(n * k, 1);
  const auto w = RandomBf16Values(m * k, 2, 0.1f);
  const auto bias = RandomBf16Values(m, 3);
  const auto dout = RandomBf16Values(n * m, 4);
  std::vector<float> out(n * m), din(n * k), dw(m * k, 0.5f), db(m, -0.5f);
  cpu::LinearForward(in.data(), w.data(), bias.data(), out.data(), n, k, m);
  cpu::LinearBackward(dout.data(), in.data(), w.data(), din.data(), dw.data(),
                      db.data(), n, k, m);
  std::vector<float> gelu(n * m), out_rounded(n * m);
  for (int64_t i = 0; i < n * m; ++i) out_rounded[i] = RoundToBf16(out[i]);
  cpu::GeluForward(out_rounded.data(), gelu.data(), n * m);

  Bf16* d_in = Keep(keep_, ToBf16(in));
  Bf16* d_w = Keep(keep_, ToBf16(w));
  Bf16* d_bias = Keep(keep_, ToBf16(bias));
  Bf16* d_dout = Keep(keep_, ToBf16(dout));
  Bf16* d_out = Keep(keep_, std::vector<Bf16>(n * m));
  Bf16* d_pre = Keep(keep_, std::vector<Bf16>(n * m));
  Bf16* d_gelu = Keep(keep_, std::vector<Bf16>(n * m));
  Bf16* d_din = Keep(keep_, std::vector<Bf16>(n * k));
  float* d_dw = Keep(keep_, std::vector<float>(m * k, 0.5f));
  float* d_db = Keep(keep_, std::vector<float>(m, -0.5f));
  ASSERT_TRUE(
      ctx_->LinearForward(d_in, d_w, d_bias, d_out, n, k, m, nullptr).ok());
  ASSERT_TRUE(ctx_->LinearGeluForward(d_in, d_w, d_bias, d_pre, d_gelu, n, k, m,
                                      nullptr)
                  .ok());
  ASSERT_TRUE(ctx_->LinearBackward(d_dout, d_in, d_w, d_din, d_dw, d_db, n, k,
                                   m, nullptr)
                  .ok());
  EXPECT_TRUE(
      Close(ToFloat(Fetch(keep_, d_out, n * m)), out, kBf16Rtol, kBf16Atol));
  EXPECT_TRUE(
      Close(ToFloat(Fetch(keep_, d_pre, n * m)), out, kBf16Rtol, kBf16Atol));
  // cuBLASLt's GELU epilogue against the tanh GELU of the rounded
  // pre-activation: an erf GELU would differ by up to ~1e-3 of the scale.
  EXPECT_TRUE(Close(ToFloat(Fetch(keep_, d_gelu, n * m)), gelu, 2 * kBf16Rtol,
                    2 * kBf16Atol));
  EXPECT_TRUE(
      Close(ToFloat(Fetch(keep_, d_din, n * k)), din, kBf16Rtol, kBf16Atol));
  EXPECT_TRUE(Close(Fetch(keep_, d_dw, m * k), dw, 1e-4f, 1e-5f));
  EXPECT_TRUE(Close(Fetch(keep_, d_db, m), db, 1e-4f, 1e-5f));
  // Three layouts (TN, NN, NT) plus the GELU epilogue: at most four algorithms.
  EXPECT_GE(ctx_->cached_algorithms(), 3);
  EXPECT_LE(ctx_->cached_algorithms(), 4);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaLinearTest,
    ::testing::Values(
        std::make_tuple(int64_t{512}, int64_t{256}, int64_t{1024}),
        std::make_tuple(int64_t{2048}, int64_t{1024}, int64_t{3072}),
        std::make_tuple(int64_t{37}, int64_t{24}, int64_t{52})));

TEST(CudaLinearNoDeviceTest, CreateWithoutDeviceIsAStatus) {
  if (DeviceCount() > 0) GTEST_SKIP() << "a device is present";
  auto ctx = GemmContext::Create();
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.status().message(),
            "no CUDA device: cudaGetDeviceCount found none");
}

}  // namespace
}  // namespace meshtune::engine::cuda
