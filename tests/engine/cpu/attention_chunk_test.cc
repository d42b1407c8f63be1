// Context parallelism's attention pieces against the full causal attention:
// a sequence of 8 split into 2·cp = 4 chunks (cp = 2, Megatron's load
// balancing: rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2), every
// query chunk attending to the chunks at or before it in ring order and
// merging by log-sum-exp, gives AttentionForward's output; the pairs'
// backwards sum to AttentionBackward's dqkv. GQA, b = 2.
#include "engine/cpu/attention_chunk.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/cpu/ops.h"

namespace meshtune::engine::cpu {
namespace {

std::vector<float> Values(int64_t count, uint64_t seed) {
  std::vector<float> v(count);
  uint64_t s = seed * 2862933555777941757ULL + 3037000493ULL;
  for (auto& x : v) {
    s = s * 2862933555777941757ULL + 3037000493ULL;
    x = static_cast<float>((s >> 33) % 2000001) / 1e6f - 1.0f;
  }
  return v;
}

constexpr int64_t kS = 8, kB = 2, kHeads = 4, kGroups = 2, kD = 3;
constexpr int64_t kCp = 2, kChunk = kS / (2 * kCp);
constexpr int64_t kWidth = (kHeads + 2 * kGroups) * kD;

const AttentionChunkShape kShape{kB, kHeads, kGroups, kD};

// The chunks of each rank, in the order each rank computes them.
const std::vector<std::vector<int64_t>> kRankChunks = {{0, 3}, {1, 2}};

TEST(AttentionChunk, RingOfChunksEqualsFullCausalAttention) {
  const std::vector<float> qkv = Values(kS * kB * kWidth, 1);
  std::vector<float> full(kS * kB * kHeads * kD);
  std::vector<float> probs(kB * kHeads * kS * kS);
  AttentionForward(qkv.data(), full.data(), probs.data(), kS, kB, kHeads,
                   kGroups, kD);

  const int64_t rows = kChunk * kB;
  std::vector<float> out(full.size());
  std::vector<std::vector<float>> lse(2 * kCp);
  for (const auto& chunks : kRankChunks) {
    for (const int64_t qc : chunks) {
      float* o = out.data() + qc * rows * kHeads * kD;
      const float* q = qkv.data() + qc * rows * kWidth;
      lse[qc].assign(kB * kHeads * kChunk, 0.0f);
      // Its own chunk first, then the earlier ones as K/V come round.
      AttentionChunkForward(q, q, kChunk, qc * kChunk, kChunk, qc * kChunk,
                            kShape, o, lse[qc].data());
      for (int64_t kc = qc - 1; kc >= 0; --kc) {
        std::vector<float> part(rows * kHeads * kD), part_lse(lse[qc].size());
        AttentionChunkForward(q, qkv.data() + kc * rows * kWidth, kChunk,
                              qc * kChunk, kChunk, kc * kChunk, kShape,
                              part.data(), part_lse.data());
        AttentionMerge(o, lse[qc].data(), part.data(), part_lse.data(), kChunk,
                       kShape);
      }
    }
  }
  for (size_t i = 0; i < full.size(); ++i) {
    EXPECT_NEAR(out[i], full[i], 1e-5) << i;
  }

  // Backward: every (query chunk, earlier-or-same key chunk) pair.
  const std::vector<float> dout = Values(full.size(), 2);
  std::vector<float> want(qkv.size());
  AttentionBackward(dout.data(), qkv.data(), probs.data(), want.data(), kS, kB,
                    kHeads, kGroups, kD);
  std::vector<float> dqkv(qkv.size(), 0.0f);
  for (int64_t qc = 0; qc < 2 * kCp; ++qc) {
    for (int64_t kc = 0; kc <= qc; ++kc) {
      AttentionChunkBackward(
          dout.data() + qc * rows * kHeads * kD,
          out.data() + qc * rows * kHeads * kD, lse[qc].data(),
          qkv.data() + qc * rows * kWidth, qkv.data() + kc * rows * kWidth,
          kChunk, qc * kChunk, kChunk, kc * kChunk, kShape,
          dqkv.data() + qc * rows * kWidth, dqkv.data() + kc * rows * kWidth);
    }
  }
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(dqkv[i], want[i], 1e-5) << i;
  }
}

// A key chunk wholly after the queries is masked out: lse -inf, out 0, and
// merging it changes nothing.
TEST(AttentionChunk, FutureChunkIsMaskedAndMergesAsNothing) {
  const std::vector<float> qkv = Values(kS * kB * kWidth, 3);
  const int64_t rows = kChunk * kB;
  std::vector<float> out(rows * kHeads * kD), lse(kB * kHeads * kChunk);
  AttentionChunkForward(qkv.data(), qkv.data(), kChunk, 0, kChunk, 0, kShape,
                        out.data(), lse.data());
  const std::vector<float> before = out;
  std::vector<float> part(out.size()), part_lse(lse.size());
  AttentionChunkForward(qkv.data(), qkv.data() + 2 * rows * kWidth, kChunk, 0,
                        kChunk, 2 * kChunk, kShape, part.data(),
                        part_lse.data());
  for (const float x : part) EXPECT_EQ(x, 0.0f);
  for (const float x : part_lse) EXPECT_TRUE(std::isinf(x) && x < 0);
  AttentionMerge(out.data(), lse.data(), part.data(), part_lse.data(), kChunk,
                 kShape);
  EXPECT_EQ(out, before);
}

}  // namespace
}  // namespace meshtune::engine::cpu
