// CPU RoPE (rotate-half) on the packed qkv buffer: a known rotation, v left
// alone, position offset, orthogonality (backward inverts forward) and the
// adjoint identity ⟨R·x, y⟩ = ⟨x, Rᵀ·y⟩ that makes backward the gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/cpu/ops.h"
#include "tests/engine/cpu/test_util.h"

namespace meshtune::engine::cpu {
namespace {

using test_util::ExpectAllNear;
using test_util::RandomFloats;

constexpr float kBase = 10000.0f;

TEST(CpuRopeTest, KnownRotationOfOnePair) {
  // s = 2, b = 1, heads = groups = 1, head_dim = 4: row width 12 =
  // [q(4) | k(4) | v(4)]. Position 1, pair j = 0 has θ = 1 and pair j = 1
  // has θ = 10000^(−1/2) = 0.01. q = [1, 0, 0, 2] (pairs (1, 0) and (0, 2)):
  // rotated q = [cos 1, 2·(−sin 0.01), sin 1, 2·cos 0.01].
  std::vector<float> qkv(2 * 12, 0.0f);
  float* row1 = qkv.data() + 12;
  row1[0] = 1.0f;
  row1[3] = 2.0f;
  for (int c = 8; c < 12; ++c) row1[c] = static_cast<float>(c);  // v
  std::vector<float> row0_before(qkv.begin(), qkv.begin() + 12);
  RopeForward(qkv.data(), 2, 1, 1, 1, 4, kBase, 0);
  ExpectAllNear(std::vector<float>(row1, row1 + 4),
                std::vector<double>{std::cos(1.0), -2.0 * std::sin(0.01),
                                    std::sin(1.0), 2.0 * std::cos(0.01)},
                0, 1e-6, "q at position 1");
  for (int c = 8; c < 12; ++c) EXPECT_EQ(row1[c], static_cast<float>(c)) << c;
  // Position 0 is the identity rotation.
  EXPECT_EQ(std::vector<float>(qkv.begin(), qkv.begin() + 12), row0_before);
}

TEST(CpuRopeTest, RotatesQAndKGroupsButNotV) {
  const int64_t s = 3, b = 2, heads = 4, groups = 2, d = 6;
  const int64_t width = (heads + 2 * groups) * d;
  const auto qkv = RandomFloats(s * b * width, 71);
  auto rotated = qkv;
  RopeForward(rotated.data(), s, b, heads, groups, d, kBase, 1);
  for (int64_t r = 0; r < s * b; ++r) {
    for (int64_t c = 0; c < width; ++c) {
      const float before = qkv[r * width + c], after = rotated[r * width + c];
      if (c >= (heads + groups) * d) {
        EXPECT_EQ(after, before) << "v changed at row " << r << " col " << c;
      } else if (c % d == 0) {
        EXPECT_NE(after, before)
            << "q/k unrotated at row " << r << " col " << c;
      }
    }
    // Each rotated pair keeps its length.
    for (int64_t v = 0; v < heads + groups; ++v) {
      for (int64_t j = 0; j < d / 2; ++j) {
        const int64_t i1 = r * width + v * d + j, i2 = i1 + d / 2;
        EXPECT_NEAR(std::hypot(rotated[i1], rotated[i2]),
                    std::hypot(qkv[i1], qkv[i2]), 1e-6);
      }
    }
  }
}

TEST(CpuRopeTest, PositionOffsetShiftsPositions) {
  // Rows of positions 2..4 rotated with pos_offset = 2 equal rows 2..4 of a
  // 5-position rotation from 0 (what a context-parallel or pipelined chunk
  // relies on).
  const int64_t b = 2, heads = 2, groups = 1, d = 8;
  const int64_t width = (heads + 2 * groups) * d;
  const auto full = RandomFloats(5 * b * width, 72);
  auto full_rot = full;
  RopeForward(full_rot.data(), 5, b, heads, groups, d, kBase, 0);
  std::vector<float> tail(full.begin() + 2 * b * width, full.end());
  RopeForward(tail.data(), 3, b, heads, groups, d, kBase, 2);
  EXPECT_EQ(tail, std::vector<float>(full_rot.begin() + 2 * b * width,
                                     full_rot.end()));
}

TEST(CpuRopeTest, BackwardInvertsForwardAndIsItsAdjoint) {
  const int64_t s = 7, b = 2, heads = 4, groups = 2, d = 8;
  const int64_t size = s * b * (heads + 2 * groups) * d;
  const auto x = RandomFloats(size, 73);
  const auto y = RandomFloats(size, 74);
  auto round_trip = x;
  RopeForward(round_trip.data(), s, b, heads, groups, d, kBase, 3);
  RopeBackward(round_trip.data(), s, b, heads, groups, d, kBase, 3);
  ExpectAllNear(round_trip, x, 0, 1e-6, "backward(forward(x))");

  auto rx = x, rty = y;
  RopeForward(rx.data(), s, b, heads, groups, d, kBase, 3);
  RopeBackward(rty.data(), s, b, heads, groups, d, kBase, 3);
  double lhs = 0.0, rhs = 0.0;
  for (int64_t i = 0; i < size; ++i) {
    lhs += static_cast<double>(rx[i]) * y[i];
    rhs += static_cast<double>(x[i]) * rty[i];
  }
  EXPECT_NEAR(lhs, rhs, 1e-4);
}

}  // namespace
}  // namespace meshtune::engine::cpu
