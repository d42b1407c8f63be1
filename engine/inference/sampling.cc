#include "engine/inference/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "search_spaces/status.h"

namespace meshtune::engine::inference {
namespace {

int32_t Argmax(const float* row, int64_t vocab) {
  return static_cast<int32_t>(std::max_element(row, row + vocab) - row);
}

// A uniform double in [0, 1) from (seed, step, row), the same on every
// platform (std::mt19937_64 is specified; the distributions are not).
double Uniform(uint64_t seed, int64_t step, int64_t row) {
  std::seed_seq seq{static_cast<uint32_t>(seed),
                    static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(step), static_cast<uint32_t>(row)};
  std::mt19937_64 gen(seq);
  return static_cast<double>(gen() >> 11) * 0x1.0p-53;
}

int32_t SampleRow(const float* row, int64_t vocab, const SamplingOptions& o,
                  int64_t step, int64_t r) {
  std::vector<int32_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  int64_t keep = vocab;
  if (o.top_k > 0 && o.top_k < vocab) {
    keep = o.top_k;
    // Largest first; ties by id, so the kept set does not depend on the
    // sort's implementation.
    std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(),
                      [&](int32_t a, int32_t b) {
                        return row[a] > row[b] || (row[a] == row[b] && a < b);
                      });
    ids.resize(keep);
    std::sort(ids.begin(), ids.end());
  }
  double max_logit = -INFINITY;
  for (int32_t id : ids) max_logit = std::max<double>(max_logit, row[id]);
  std::vector<double> weights(keep);
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) {
    weights[i] = std::exp((row[ids[i]] - max_logit) / o.temperature);
    total += weights[i];
  }
  const double u = Uniform(o.seed, step, r) * total;
  double acc = 0;
  for (int64_t i = 0; i < keep; ++i) {
    acc += weights[i];
    if (u < acc) return ids[i];
  }
  return ids[keep - 1];
}

}  // namespace

std::vector<int32_t> SampleTokens(const std::vector<float>& logits,
                                  int64_t rows, int64_t vocab,
                                  const SamplingOptions& options,
                                  int64_t step) {
  MESHTUNE_CHECK(vocab > 0 &&
                 static_cast<int64_t>(logits.size()) == rows * vocab);
  MESHTUNE_CHECK(options.temperature >= 0);
  const int64_t choose =
      options.vocab_limit > 0 ? std::min(options.vocab_limit, vocab) : vocab;
  std::vector<int32_t> out(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits.data() + r * vocab;
    out[r] = options.temperature == 0
                 ? Argmax(row, choose)
                 : SampleRow(row, choose, options, step, r);
  }
  return out;
}

}  // namespace meshtune::engine::inference
