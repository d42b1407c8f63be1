// CPU causal GQA attention: forward and saved probabilities against a naive
// float64 implementation for groups = heads, 1 < groups < heads and MQA,
// backward against finite differences, attention dropout, causality,
// several row blocks, and bit-identical reruns.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/cpu/ops.h"
#include "tests/engine/cpu/test_util.h"

namespace meshtune::engine::cpu {
namespace {

using test_util::BitIdentical;
using test_util::ExpectAllNear;
using test_util::NumericGrad;
using test_util::RandomFloats;
using test_util::ToDouble;
using test_util::WeightedSum;

struct Shape {
  int64_t s, b, heads, groups, d;
  int64_t width() const { return (heads + 2 * groups) * d; }
  int64_t qkv_size() const { return s * b * width(); }
  int64_t out_size() const { return s * b * heads * d; }
  int64_t probs_size() const { return b * heads * s * s; }
};

// Plain-loop causal attention over qkv[s·b, (heads + 2·groups)·d] (row
// si·b + bi); returns out[s·b, heads·d]. With `drop`, probability (bi, hd,
// t, j) is kept and scaled by 1/(1 − p) per the documented mask function.
std::vector<double> NaiveAttention(const std::vector<double>& qkv,
                                   const Shape& sh,
                                   const DropoutSpec* drop = nullptr) {
  const int64_t w = sh.width(), d = sh.d;
  std::vector<double> out(sh.out_size(), 0.0);
  for (int64_t bi = 0; bi < sh.b; ++bi) {
    for (int64_t hd = 0; hd < sh.heads; ++hd) {
      const int64_t g = hd / (sh.heads / sh.groups);
      for (int64_t t = 0; t < sh.s; ++t) {
        const double* q = &qkv[(t * sh.b + bi) * w + hd * d];
        std::vector<double> score(t + 1);
        double mx = -1e300;
        for (int64_t j = 0; j <= t; ++j) {
          const double* k = &qkv[(j * sh.b + bi) * w + (sh.heads + g) * d];
          double dot = 0.0;
          for (int64_t c = 0; c < d; ++c) dot += q[c] * k[c];
          score[j] = dot / std::sqrt(static_cast<double>(d));
          mx = std::max(mx, score[j]);
        }
        double sum = 0.0;
        for (double& x : score) sum += (x = std::exp(x - mx));
        double* o = &out[(t * sh.b + bi) * sh.heads * d + hd * d];
        for (int64_t j = 0; j <= t; ++j) {
          const double* v =
              &qkv[(j * sh.b + bi) * w + (sh.heads + sh.groups + g) * d];
          double keep = 1.0;
          if (drop != nullptr) {
            const uint64_t seed =
                DropoutRowSeed(drop->key, drop->first_sample + bi,
                               (drop->first_head + hd) * sh.s + t);
            keep = DropoutUniform(seed, j) >= drop->p ? 1.0 / (1.0 - drop->p)
                                                      : 0.0;
          }
          for (int64_t c = 0; c < d; ++c) o[c] += keep * score[j] / sum * v[c];
        }
      }
    }
  }
  return out;
}

void CheckForwardAndBackward(const Shape& sh, uint32_t seed) {
  SCOPED_TRACE(::testing::Message()
               << "s=" << sh.s << " b=" << sh.b << " heads=" << sh.heads
               << " groups=" << sh.groups);
  const auto qkv = RandomFloats(sh.qkv_size(), seed, -1.5f, 1.5f);
  const auto w_loss = RandomFloats(sh.out_size(), seed + 1);
  std::vector<float> out(sh.out_size()), probs(sh.probs_size(), 5.0f);
  AttentionForward(qkv.data(), out.data(), probs.data(), sh.s, sh.b, sh.heads,
                   sh.groups, sh.d);
  ExpectAllNear(out, NaiveAttention(ToDouble(qkv), sh), 1e-5, 1e-6, "out");

  // Saved probabilities: rows sum to 1, the strictly upper triangle is 0.
  for (int64_t r = 0; r < sh.b * sh.heads * sh.s; ++r) {
    const int64_t t = r % sh.s;
    double sum = 0.0;
    for (int64_t j = 0; j < sh.s; ++j) {
      const float p = probs[r * sh.s + j];
      if (j > t) {
        ASSERT_EQ(p, 0.0f) << "row " << r << " col " << j;
      }
      sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r;
  }

  // Without probs the output is the same.
  std::vector<float> out_no_probs(sh.out_size());
  AttentionForward(qkv.data(), out_no_probs.data(), nullptr, sh.s, sh.b,
                   sh.heads, sh.groups, sh.d);
  EXPECT_TRUE(BitIdentical(out, out_no_probs));

  std::vector<float> dqkv(sh.qkv_size(), 3.0f);  // must be overwritten
  AttentionBackward(w_loss.data(), qkv.data(), probs.data(), dqkv.data(), sh.s,
                    sh.b, sh.heads, sh.groups, sh.d);
  ExpectAllNear(dqkv,
                NumericGrad(
                    [&](const auto& x) {
                      return WeightedSum(NaiveAttention(x, sh), w_loss);
                    },
                    ToDouble(qkv)),
                1e-3, 1e-5, "dqkv");
}

TEST(CpuAttentionTest, MultiHeadGroupsEqualHeads) {
  CheckForwardAndBackward({5, 2, 4, 4, 4}, 51);
}

TEST(CpuAttentionTest, GroupedQueryTwoGroups) {
  CheckForwardAndBackward({5, 2, 4, 2, 4}, 53);
}

TEST(CpuAttentionTest, MultiQueryOneGroup) {
  CheckForwardAndBackward({5, 2, 4, 1, 4}, 55);
}

TEST(CpuAttentionTest, SeveralRowBlocks) {
  // s = 70 spans two 64-row blocks, so the second block's GEMMs cover keys
  // of the first; b = 1 with one group runs the backward as a single task.
  CheckForwardAndBackward({70, 1, 2, 1, 4}, 57);
}

// Attention dropout: the forward applies the documented mask (the naive
// reference draws it independently), the saved probabilities stay
// undropped, and the backward matches finite differences of the dropped
// forward (the mask is a fixed function of coordinates, so it is
// differentiable piecewise like the op itself).
void CheckDropout(const Shape& sh, uint32_t seed, float p) {
  SCOPED_TRACE(::testing::Message() << "s=" << sh.s << " heads=" << sh.heads
                                    << " groups=" << sh.groups << " p=" << p);
  DropoutSpec drop;
  drop.p = p;
  drop.key = DropoutKey(99, 5, DropoutSite::kAttentionProbs);
  drop.first_sample = 17;
  drop.first_head = 4;  // as on tp rank 1 of 2 with 4 local heads
  const auto qkv = RandomFloats(sh.qkv_size(), seed, -1.5f, 1.5f);
  const auto w_loss = RandomFloats(sh.out_size(), seed + 1);
  std::vector<float> out(sh.out_size()), probs(sh.probs_size());
  AttentionForward(qkv.data(), out.data(), probs.data(), sh.s, sh.b, sh.heads,
                   sh.groups, sh.d, &drop);
  const auto expected = NaiveAttention(ToDouble(qkv), sh, &drop);
  ExpectAllNear(out, expected, 1e-5, 1e-6, "out");
  // The mask matters: the undropped output differs.
  std::vector<float> plain(sh.out_size());
  AttentionForward(qkv.data(), plain.data(), nullptr, sh.s, sh.b, sh.heads,
                   sh.groups, sh.d);
  EXPECT_FALSE(BitIdentical(plain, out));
  for (int64_t r = 0; r < sh.b * sh.heads * sh.s; ++r) {
    double sum = 0.0;
    for (int64_t j = 0; j < sh.s; ++j) sum += probs[r * sh.s + j];
    EXPECT_NEAR(sum, 1.0, 1e-5) << "saved probs row " << r;
  }
  // Selective recompute does not keep probs: the same output.
  std::vector<float> out_no_probs(sh.out_size());
  AttentionForward(qkv.data(), out_no_probs.data(), nullptr, sh.s, sh.b,
                   sh.heads, sh.groups, sh.d, &drop);
  EXPECT_TRUE(BitIdentical(out, out_no_probs));

  std::vector<float> dqkv(sh.qkv_size(), 3.0f);
  AttentionBackward(w_loss.data(), qkv.data(), probs.data(), dqkv.data(), sh.s,
                    sh.b, sh.heads, sh.groups, sh.d, &drop);
  ExpectAllNear(dqkv,
                NumericGrad(
                    [&](const auto& x) {
                      return WeightedSum(NaiveAttention(x, sh, &drop), w_loss);
                    },
                    ToDouble(qkv)),
                1e-3, 1e-5, "dqkv");
}

TEST(CpuAttentionTest, DropoutGroupedQuery) {
  CheckDropout({6, 2, 4, 2, 4}, 71, 0.3f);
}

TEST(CpuAttentionTest, DropoutSeveralRowBlocks) {
  CheckDropout({70, 1, 2, 1, 4}, 73, 0.1f);
}

TEST(CpuAttentionTest, OutputRowsIgnoreLaterTokens) {
  const Shape sh{9, 2, 4, 2, 4};
  const auto qkv = RandomFloats(sh.qkv_size(), 61);
  std::vector<float> out(sh.out_size());
  AttentionForward(qkv.data(), out.data(), nullptr, sh.s, sh.b, sh.heads,
                   sh.groups, sh.d);
  const int64_t t_changed = 6;
  for (int64_t bi = 0; bi < sh.b; ++bi) {
    auto perturbed = qkv;
    // Change the k and v (all groups) of position t_changed, batch bi.
    float* row = perturbed.data() + (t_changed * sh.b + bi) * sh.width();
    for (int64_t c = sh.heads * sh.d; c < sh.width(); ++c) row[c] += 0.5f;
    std::vector<float> out2(sh.out_size());
    AttentionForward(perturbed.data(), out2.data(), nullptr, sh.s, sh.b,
                     sh.heads, sh.groups, sh.d);
    const int64_t row_width = sh.heads * sh.d;
    for (int64_t t = 0; t < sh.s; ++t) {
      for (int64_t bj = 0; bj < sh.b; ++bj) {
        const float* a = out.data() + (t * sh.b + bj) * row_width;
        const float* c = out2.data() + (t * sh.b + bj) * row_width;
        const bool same = std::equal(a, a + row_width, c);
        // Earlier positions and the other sequence must not change; the
        // perturbed position itself must.
        if (t < t_changed || bj != bi) {
          EXPECT_TRUE(same) << "t=" << t << " b=" << bj;
        } else if (t == t_changed) {
          EXPECT_FALSE(same) << "t=" << t << " b=" << bj;
        }
      }
    }
  }
}

TEST(CpuAttentionTest, ForwardAndBackwardAreBitIdenticalAcrossRuns) {
  const Shape sh{100, 2, 4, 2, 8};
  const auto qkv = RandomFloats(sh.qkv_size(), 63);
  const auto dout = RandomFloats(sh.out_size(), 64);
  std::vector<float> out[2], probs[2], dqkv[2];
  for (int r = 0; r < 2; ++r) {
    out[r].resize(sh.out_size());
    probs[r].resize(sh.probs_size());
    dqkv[r].resize(sh.qkv_size());
    AttentionForward(qkv.data(), out[r].data(), probs[r].data(), sh.s, sh.b,
                     sh.heads, sh.groups, sh.d);
    AttentionBackward(dout.data(), qkv.data(), probs[r].data(), dqkv[r].data(),
                      sh.s, sh.b, sh.heads, sh.groups, sh.d);
  }
  EXPECT_TRUE(BitIdentical(out[0], out[1]));
  EXPECT_TRUE(BitIdentical(probs[0], probs[1]));
  EXPECT_TRUE(BitIdentical(dqkv[0], dqkv[1]));
}

}  // namespace
}  // namespace meshtune::engine::cpu
