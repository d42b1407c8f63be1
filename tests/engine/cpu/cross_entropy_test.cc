// CPU vocab-parallel cross-entropy pieces: the unsharded loss against a
// naive float64 log-softmax, two shards combined as the parallel layer does
// (MAX of local maxes, SUM of local sums and target logits) against the
// unsharded loss, padding columns ignored, and the gradient against finite
// differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/cpu/ops.h"
#include "tests/engine/cpu/test_util.h"

namespace meshtune::engine::cpu {
namespace {

using test_util::ExpectAllNear;
using test_util::NumericGrad;
using test_util::RandomFloats;
using test_util::ToDouble;

// Per-row −log softmax(logits[i, :vocab_size])[target] in float64; logits is
// [n, ld] with ld >= vocab_size.
std::vector<double> NaiveLoss(const std::vector<double>& logits,
                              const std::vector<int32_t>& targets, int64_t n,
                              int64_t ld, int64_t vocab_size) {
  std::vector<double> loss(n);
  for (int64_t i = 0; i < n; ++i) {
    const double* row = &logits[i * ld];
    const double mx = *std::max_element(row, row + vocab_size);
    double sum = 0.0;
    for (int64_t j = 0; j < vocab_size; ++j) sum += std::exp(row[j] - mx);
    loss[i] = std::log(sum) + mx - row[targets[i]];
  }
  return loss;
}

struct ShardedResult {
  std::vector<float> loss;     // [n]
  std::vector<float> dlogits;  // [n, shards·vocab_local], shards concatenated
};

// Runs the three local pieces on `shards` equal column shards of
// logits[n, shards·vocab_local] and combines them across shards the way the
// tensor-parallel all-reduces do; backward with the given per-row scale.
ShardedResult RunSharded(const std::vector<float>& logits,
                         const std::vector<int32_t>& targets,
                         const std::vector<float>& scale, int64_t n,
                         int64_t shards, int64_t vocab_local,
                         int64_t vocab_size) {
  const int64_t ld = shards * vocab_local;
  std::vector<std::vector<float>> local(shards);
  for (int64_t r = 0; r < shards; ++r) {
    local[r].resize(n * vocab_local);
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(&logits[i * ld + r * vocab_local], vocab_local,
                  &local[r][i * vocab_local]);
    }
  }
  std::vector<float> row_max(n, -std::numeric_limits<float>::infinity());
  for (int64_t r = 0; r < shards; ++r) {  // all-reduce MAX
    std::vector<float> m(n);
    CrossEntropyLocalMax(local[r].data(), m.data(), n, vocab_local,
                         r * vocab_local, vocab_size);
    for (int64_t i = 0; i < n; ++i) row_max[i] = std::max(row_max[i], m[i]);
  }
  std::vector<float> sum_exp(n, 0.0f), target_logit(n, 0.0f);
  for (int64_t r = 0; r < shards; ++r) {  // all-reduce SUM
    std::vector<float> se(n), tl(n);
    CrossEntropyLocalSums(local[r].data(), targets.data(), row_max.data(),
                          se.data(), tl.data(), n, vocab_local, r * vocab_local,
                          vocab_size);
    for (int64_t i = 0; i < n; ++i) {
      sum_exp[i] += se[i];
      target_logit[i] += tl[i];
    }
  }
  ShardedResult result;
  result.loss.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    result.loss[i] = std::log(sum_exp[i]) + row_max[i] - target_logit[i];
  }
  result.dlogits.assign(n * ld, 0.0f);
  for (int64_t r = 0; r < shards; ++r) {
    std::vector<float> d(n * vocab_local, 42.0f);  // must be overwritten
    CrossEntropyBackward(local[r].data(), targets.data(), row_max.data(),
                         sum_exp.data(), scale.data(), d.data(), n, vocab_local,
                         r * vocab_local, vocab_size);
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(&d[i * vocab_local], vocab_local,
                  &result.dlogits[i * ld + r * vocab_local]);
    }
  }
  return result;
}

TEST(CpuCrossEntropyTest, UniformLogitsGiveLogVocab) {
  // All logits equal: softmax is uniform, loss = log 4, dlogits = 1/4 − 1
  // at the target and 1/4 elsewhere.
  const std::vector<float> logits(4, 3.0f);
  const std::vector<int32_t> targets = {2};
  const std::vector<float> scale = {1.0f};
  const auto r = RunSharded(logits, targets, scale, 1, 1, 4, 4);
  EXPECT_NEAR(r.loss[0], std::log(4.0), 1e-6);
  EXPECT_EQ(r.dlogits, (std::vector<float>{0.25f, 0.25f, -0.75f, 0.25f}));
}

TEST(CpuCrossEntropyTest, UnshardedLossMatchesNaive) {
  const int64_t n = 5, vocab = 9;
  const auto logits = RandomFloats(n * vocab, 91, -5.0f, 5.0f);
  const std::vector<int32_t> targets = {0, 8, 3, 3, 5};
  const std::vector<float> scale(n, 1.0f);
  const auto r = RunSharded(logits, targets, scale, n, 1, vocab, vocab);
  ExpectAllNear(r.loss, NaiveLoss(ToDouble(logits), targets, n, vocab, vocab),
                1e-5, 1e-6, "loss");
}

TEST(CpuCrossEntropyTest, TwoShardsEqualUnsharded) {
  const int64_t n = 6, vocab = 10;
  const auto logits = RandomFloats(n * vocab, 92, -4.0f, 4.0f);
  // Targets on both shards, including the shard edges 4 and 5.
  const std::vector<int32_t> targets = {0, 4, 5, 9, 2, 7};
  const auto scale = RandomFloats(n, 93, 0.1f, 1.0f);
  const auto full = RunSharded(logits, targets, scale, n, 1, vocab, vocab);
  const auto split = RunSharded(logits, targets, scale, n, 2, vocab / 2, vocab);
  ExpectAllNear(split.loss, full.loss, 1e-6, 1e-6, "loss");
  ExpectAllNear(split.dlogits, full.dlogits, 1e-6, 1e-7, "dlogits");
}

TEST(CpuCrossEntropyTest, PaddingColumnsAreIgnored) {
  // vocab_size 7 padded to 8 for tp = 2: the last column of shard 1 is
  // padding holding a huge value that would dominate an unmasked softmax.
  const int64_t n = 4, vocab = 7, padded = 8;
  const auto real = RandomFloats(n * vocab, 94, -3.0f, 3.0f);
  std::vector<float> logits(n * padded);
  for (int64_t i = 0; i < n; ++i) {
    std::copy_n(&real[i * vocab], vocab, &logits[i * padded]);
    logits[i * padded + vocab] = 100.0f;
  }
  const std::vector<int32_t> targets = {6, 0, 3, 4};
  const auto scale = RandomFloats(n, 95, 0.1f, 1.0f);
  const auto unpadded = RunSharded(real, targets, scale, n, 1, vocab, vocab);
  const auto split =
      RunSharded(logits, targets, scale, n, 2, padded / 2, vocab);
  const auto one = RunSharded(logits, targets, scale, n, 1, padded, vocab);
  ExpectAllNear(split.loss, unpadded.loss, 1e-6, 1e-6, "loss (2 shards)");
  ExpectAllNear(one.loss, unpadded.loss, 1e-6, 1e-6, "loss (padded, 1 shard)");
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(split.dlogits[i * padded + vocab], 0.0f) << "row " << i;
    for (int64_t j = 0; j < vocab; ++j) {
      EXPECT_NEAR(split.dlogits[i * padded + j],
                  unpadded.dlogits[i * vocab + j], 1e-7);
    }
  }
}

TEST(CpuCrossEntropyTest, ShardOfOnlyPaddingContributesNothing) {
  // vocab_size 5 padded to 8 for tp = 4: shard 3 (columns 6, 7) is all
  // padding.
  const int64_t n = 2, vocab_local = 2;
  const std::vector<float> logits = {50.0f, 60.0f, 70.0f, 80.0f};
  const std::vector<int32_t> targets = {4, 1};
  std::vector<float> row_max(n), sum_exp(n), target_logit(n);
  CrossEntropyLocalMax(logits.data(), row_max.data(), n, vocab_local, 6, 5);
  EXPECT_EQ(row_max[0], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(row_max[1], -std::numeric_limits<float>::infinity());
  const std::vector<float> global_max = {1.0f, 2.0f};
  CrossEntropyLocalSums(logits.data(), targets.data(), global_max.data(),
                        sum_exp.data(), target_logit.data(), n, vocab_local, 6,
                        5);
  EXPECT_EQ(sum_exp, (std::vector<float>{0.0f, 0.0f}));
  EXPECT_EQ(target_logit, (std::vector<float>{0.0f, 0.0f}));
  const std::vector<float> global_sum = {3.0f, 4.0f}, scale = {1.0f, 1.0f};
  std::vector<float> dlogits(n * vocab_local, 9.0f);
  CrossEntropyBackward(logits.data(), targets.data(), global_max.data(),
                       global_sum.data(), scale.data(), dlogits.data(), n,
                       vocab_local, 6, 5);
  EXPECT_EQ(dlogits, (std::vector<float>(4, 0.0f)));
}

TEST(CpuCrossEntropyTest, GradientMatchesFiniteDifferences) {
  // L = Σ_i scale_i·loss_i over a padded, two-shard layout.
  const int64_t n = 4, vocab = 9, padded = 10;
  auto logits = RandomFloats(n * padded, 96, -3.0f, 3.0f);
  const std::vector<int32_t> targets = {8, 1, 5, 4};
  const auto scale = RandomFloats(n, 97, 0.2f, 1.0f);
  const auto r = RunSharded(logits, targets, scale, n, 2, padded / 2, vocab);
  const auto fd = NumericGrad(
      [&](const std::vector<double>& x) {
        const auto loss = NaiveLoss(x, targets, n, padded, vocab);
        double total = 0.0;
        for (int64_t i = 0; i < n; ++i) total += scale[i] * loss[i];
        return total;
      },
      ToDouble(logits));
  ExpectAllNear(r.dlogits, fd, 1e-4, 1e-6, "dlogits");
}

}  // namespace
}  // namespace meshtune::engine::cpu
