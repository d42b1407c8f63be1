// CPU AdamW against hand-computed one- and two-step values (with and
// without weight decay through the mask), and the elementwise helpers
// (Add, Scale, SumSquares).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "engine/cpu/ops.h"
#include "tests/engine/cpu/test_util.h"

namespace meshtune::engine::cpu {
namespace {

constexpr float kLr = 0.1f, kBeta1 = 0.9f, kBeta2 = 0.999f, kEps = 1e-8f,
                kWeightDecay = 0.01f;

// Tolerances on m and v cover float32 math: 1 − 0.999f is 0.00099999 in
// float (relative error 1.3e-5), as in apex's kernel.
// Two elements with p = 1, m = v = 0, gradients 0.5 then −0.25; element 0
// decays (mask 1), element 1 does not (mask 0). By hand:
// step 1: m = 0.05, v = 0.00025, m̂ = 0.5, v̂ = 0.25, m̂/(√v̂ + eps) ≈ 1,
//   p = 1 − 0.1·(1 + 0.01·1) = 0.899 (decayed) or 0.9 (not decayed).
// step 2: m = 0.9·0.05 − 0.1·0.25 = 0.02, v = 0.999·0.00025 + 0.001·0.0625
//   = 0.00031225, m̂ = 0.02/0.19, v̂ = 0.00031225/0.001999,
//   m̂/√v̂ = 0.2663363, p = 0.899 − 0.1·(0.2663363 + 0.00899) = 0.8714673
//   or 0.9 − 0.1·0.2663363 = 0.8733663.
TEST(CpuAdamWTest, OneAndTwoStepsMatchHandValuesWithDecayMask) {
  std::vector<float> param = {1.0f, 1.0f}, m = {0.0f, 0.0f}, v = {0.0f, 0.0f};
  const std::vector<float> mask = {1.0f, 0.0f};
  std::vector<float> grad = {0.5f, 0.5f};
  AdamWUpdate(param.data(), grad.data(), m.data(), v.data(), mask.data(), 2,
              kLr, kBeta1, kBeta2, kEps, kWeightDecay, 1);
  EXPECT_NEAR(param[0], 0.899, 1e-6);
  EXPECT_NEAR(param[1], 0.9, 1e-6);
  EXPECT_NEAR(m[0], 0.05, 1e-7);
  EXPECT_NEAR(v[0], 0.00025, 1e-8);

  grad = {-0.25f, -0.25f};
  AdamWUpdate(param.data(), grad.data(), m.data(), v.data(), mask.data(), 2,
              kLr, kBeta1, kBeta2, kEps, kWeightDecay, 2);
  EXPECT_NEAR(param[0], 0.8714673, 1e-6);
  EXPECT_NEAR(param[1], 0.8733663, 1e-6);
  EXPECT_NEAR(m[1], 0.02, 1e-7);
  EXPECT_NEAR(v[1], 0.00031225, 1e-8);
}

TEST(CpuAdamWTest, NullMaskDecaysEveryElement) {
  std::vector<float> param = {1.0f, 2.0f}, m(2, 0.0f), v(2, 0.0f);
  const std::vector<float> grad = {0.5f, -0.5f};
  AdamWUpdate(param.data(), grad.data(), m.data(), v.data(), nullptr, 2, kLr,
              kBeta1, kBeta2, kEps, kWeightDecay, 1);
  // p −= 0.1·(±1 + 0.01·p).
  EXPECT_NEAR(param[0], 1.0 - 0.1 * (1.0 + 0.01), 1e-6);
  EXPECT_NEAR(param[1], 2.0 - 0.1 * (-1.0 + 0.02), 1e-6);
}

TEST(CpuElementwiseTest, AddAndScale) {
  const std::vector<float> x = {1.0f, -2.0f, 0.5f};
  std::vector<float> y = {10.0f, 20.0f, 30.0f};
  Add(x.data(), y.data(), 3);
  EXPECT_EQ(y, (std::vector<float>{11.0f, 18.0f, 30.5f}));
  Scale(y.data(), 3, 0.5f);
  EXPECT_EQ(y, (std::vector<float>{5.5f, 9.0f, 15.25f}));
}

TEST(CpuElementwiseTest, SumSquaresInFloat64OverSeveralChunks) {
  // 3·2¹⁶ + 5 elements of 0.1f span several chunks; the chunked float64
  // sum matches a plain double loop to float64 rounding (a float32 running
  // sum would be off by ~1e-4 relative).
  const int64_t count = 3 * 65536 + 5;
  const std::vector<float> x(count, 0.1f);
  double expected = 0.0;
  for (float e : x) expected += static_cast<double>(e) * e;
  EXPECT_NEAR(SumSquares(x.data(), count), expected, 1e-10 * expected);
  EXPECT_EQ(SumSquares(x.data(), 0), 0.0);
  const std::vector<float> small = {3.0f, -4.0f};
  EXPECT_EQ(SumSquares(small.data(), 2), 25.0);
}

}  // namespace
}  // namespace meshtune::engine::cpu
