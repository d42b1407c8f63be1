// Cached attention against the full causal attention: a sequence of 9
// (b = 2, GQA 4 heads over 2 groups) run as a prefill of 4 positions and
// then steps of 1 and 4, each against the cache, gives AttentionForward's
// rows for those positions; the cache holds exactly the k and v parts.
#include "engine/cpu/attention_cached.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/cpu/ops.h"
#include "tests/engine/cpu/test_util.h"

namespace meshtune::engine::cpu {
namespace {

constexpr int64_t kS = 9, kB = 2, kHeads = 4, kGroups = 2, kD = 3;
constexpr int64_t kCapacity = 12;
constexpr int64_t kWidth = (kHeads + 2 * kGroups) * kD;
const AttentionChunkShape kShape{kB, kHeads, kGroups, kD};

TEST(AttentionCached, StepsAgainstTheCacheEqualFullAttention) {
  const std::vector<float> qkv = test_util::RandomFloats(kS * kB * kWidth, 3);
  std::vector<float> full(kS * kB * kHeads * kD);
  AttentionForward(qkv.data(), full.data(), nullptr, kS, kB, kHeads, kGroups,
                   kD);
  std::vector<float> keys(kB * kGroups * kCapacity * kD, NAN);
  std::vector<float> values(keys.size(), NAN);
  int64_t past = 0;
  for (int64_t t : {4, 1, 4}) {
    const float* rows = qkv.data() + past * kB * kWidth;
    KvCacheAppend(rows, t, past, kCapacity, kShape, keys.data(), values.data());
    std::vector<float> out(t * kB * kHeads * kD);
    AttentionCachedForward(rows, keys.data(), values.data(), t, past, kCapacity,
                           kShape, out.data());
    for (size_t i = 0; i < out.size(); ++i) {
      const float expected = full[past * kB * kHeads * kD + i];
      EXPECT_NEAR(out[i], expected, 1e-6f + 1e-5f * std::fabs(expected))
          << "past " << past << " element " << i;
    }
    past += t;
  }
  // Key of group 1, sequence 1, position 5 is qkv row 5·b + 1's k part.
  const int64_t at = ((1 * kGroups + 1) * kCapacity + 5) * kD;
  const float* row = qkv.data() + (5 * kB + 1) * kWidth;
  for (int64_t j = 0; j < kD; ++j) {
    EXPECT_EQ(keys[at + j], row[(kHeads + 1) * kD + j]);
    EXPECT_EQ(values[at + j], row[(kHeads + kGroups + 1) * kD + j]);
  }
}

}  // namespace
}  // namespace meshtune::engine::cpu
