// Local pieces of the vocab-parallel softmax cross-entropy
// (engine/cpu/ops.h).
//
// Megatron's VocabParallelCrossEntropy
// (megatron/core/tensor_parallel/cross_entropy.py) computes, per rank
// holding columns [vocab_start, vocab_start + vocab_local): the local row
// max (all-reduced with MAX), the local Σ exp(logit − max) and the target
// logit when the rank owns the target (both all-reduced with SUM); the loss
// is log Σexp + max − target_logit and the gradient is
// softmax − onehot(target). Unlike Megatron, columns at or past vocab_size
// (the padding that makes the vocabulary divisible by tp) are excluded, so
// the loss is independent of the padding.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "engine/cpu/ops.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cpu {
namespace {

using ConstRow = Eigen::Map<const Eigen::ArrayXf>;

// The n·vocab exponentials per step use Eigen's vectorized exp. Eigen
// computes the elements before the first aligned destination address with
// scalar exp, so they are always written into an Eigen-aligned per-thread
// buffer first: each element's rounding then depends only on its column,
// and backward sees the same exponentials as the sums.

// How many leading local columns are real vocabulary entries.
int64_t ValidColumns(int64_t vocab_local, int64_t vocab_start,
                     int64_t vocab_size) {
  return std::clamp<int64_t>(vocab_size - vocab_start, 0, vocab_local);
}

void CheckShapes(int64_t n, int64_t vocab_local, int64_t vocab_start,
                 int64_t vocab_size) {
  MESHTUNE_CHECK(n >= 0 && vocab_local >= 0 && vocab_start >= 0);
  MESHTUNE_CHECK(vocab_size > 0);
}

}  // namespace

void CrossEntropyLocalMax(const float* logits, float* row_max, int64_t n,
                          int64_t vocab_local, int64_t vocab_start,
                          int64_t vocab_size) {
  CheckShapes(n, vocab_local, vocab_start, vocab_size);
  const int64_t valid = ValidColumns(vocab_local, vocab_start, vocab_size);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * vocab_local;  // [vocab_local]
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < valid; ++j) m = std::max(m, row[j]);
    row_max[i] = m;
  }
}

void CrossEntropyLocalSums(const float* logits, const int32_t* targets,
                           const float* row_max, float* sum_exp,
                           float* target_logit, int64_t n, int64_t vocab_local,
                           int64_t vocab_start, int64_t vocab_size) {
  CheckShapes(n, vocab_local, vocab_start, vocab_size);
  const int64_t valid = ValidColumns(vocab_local, vocab_start, vocab_size);
#pragma omp parallel
  {
    Eigen::ArrayXf exps(valid);  // [valid]
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const float* row = logits + i * vocab_local;  // [vocab_local]
      // A target outside the real vocabulary would make the loss of this
      // row meaningless on every rank: an invariant of the data pipeline.
      MESHTUNE_CHECK(targets[i] >= 0 && targets[i] < vocab_size);
      exps = (ConstRow(row, valid) - row_max[i]).exp();  // summed in order
      double sum = 0.0;
      for (int64_t j = 0; j < valid; ++j) sum += exps[j];
      sum_exp[i] = static_cast<float>(sum);
      const int64_t local = targets[i] - vocab_start;
      target_logit[i] = (local >= 0 && local < valid) ? row[local] : 0.0f;
    }
  }
}

void CrossEntropyBackward(const float* logits, const int32_t* targets,
                          const float* row_max, const float* sum_exp,
                          const float* scale, float* dlogits, int64_t n,
                          int64_t vocab_local, int64_t vocab_start,
                          int64_t vocab_size) {
  CheckShapes(n, vocab_local, vocab_start, vocab_size);
  const int64_t valid = ValidColumns(vocab_local, vocab_start, vocab_size);
#pragma omp parallel
  {
    Eigen::ArrayXf exps(valid);  // [valid]
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const float* row = logits + i * vocab_local;     // [vocab_local]
      float* drow = dlogits + i * vocab_local;         // [vocab_local]
      const int64_t local = targets[i] - vocab_start;  // may be off-shard
      // dlogits = scale·(softmax − onehot), softmax = exp(logit − max)/sum.
      exps = (ConstRow(row, valid) - row_max[i]).exp() * (1.0f / sum_exp[i]);
      if (local >= 0 && local < valid) exps[local] -= 1.0f;
      Eigen::Map<Eigen::ArrayXf>(drow, valid) = exps * scale[i];
      for (int64_t j = valid; j < vocab_local; ++j) drow[j] = 0.0f;
    }
  }
}

}  // namespace meshtune::engine::cpu
