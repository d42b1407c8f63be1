// engine/cuda/runtime/bf16.h: the host-side bf16 conversions the CUDA backend's
// tests and weight uploads use. Pure C++, so it runs in every build.
#include "engine/cuda/runtime/bf16.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "gtest/gtest.h"

namespace meshtune::engine::cuda {
namespace {

TEST(Bf16Test, ExactValuesRoundTrip) {
  for (float x : {0.0f, 1.0f, -2.0f, 0.5f, 3.140625f, -65280.0f, 1e-20f}) {
    const float r = RoundToBf16(x);
    EXPECT_EQ(RoundToBf16(r), r) << x;  // idempotent
  }
  EXPECT_EQ(RoundToBf16(1.0f), 1.0f);
  EXPECT_EQ(RoundToBf16(3.140625f), 3.140625f);  // 8 significant bits
  EXPECT_EQ(FloatToBf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(FloatToBf16(-2.0f).bits, 0xc000);
}

TEST(Bf16Test, RoundsToNearestTiesToEven) {
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even (1).
  EXPECT_EQ(RoundToBf16(1.0f + std::ldexp(1.0f, -8)), 1.0f);
  // 1 + 3·2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to 1 + 2^-6.
  EXPECT_EQ(RoundToBf16(1.0f + 3 * std::ldexp(1.0f, -8)),
            1.0f + std::ldexp(1.0f, -6));
  // Just above the halfway point rounds up.
  EXPECT_EQ(RoundToBf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)),
            1.0f + std::ldexp(1.0f, -7));
  // bf16 keeps 8 significant bits: unit roundoff 2^-8.
  for (float x = 0.001f; x < 1000.0f; x *= 1.37f) {
    EXPECT_LE(std::fabs(RoundToBf16(x) - x), std::ldexp(x, -8)) << x;
  }
}

TEST(Bf16Test, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(RoundToBf16(inf), inf);
  EXPECT_EQ(RoundToBf16(-inf), -inf);
  EXPECT_TRUE(std::isnan(RoundToBf16(std::nanf(""))));
  // A NaN whose payload lives only in the low 16 bits must stay a NaN
  // (truncation would turn it into inf).
  const uint32_t low_payload_nan = 0x7f800001u;
  float nan_value;
  std::memcpy(&nan_value, &low_payload_nan, sizeof(nan_value));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(nan_value))));
  // The largest float rounds up to inf, as IEEE round-to-nearest does.
  EXPECT_EQ(RoundToBf16(std::numeric_limits<float>::max()), inf);
  EXPECT_EQ(FloatToBf16(-0.0f).bits, 0x8000);
}

TEST(Bf16Test, VectorConversions) {
  const std::vector<float> x = {1.0f, 1.00390625f, -7.5f};
  EXPECT_EQ(ToFloat(ToBf16(x)), (std::vector<float>{1.0f, 1.0f, -7.5f}));
}

}  // namespace
}  // namespace meshtune::engine::cuda
