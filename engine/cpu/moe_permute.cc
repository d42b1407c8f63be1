#include "engine/cpu/moe_permute.h"

#include <algorithm>

namespace meshtune::engine::cpu {

Permutation PermutationOf(const int32_t* experts, int64_t n, int64_t k,
                          int64_t num_experts) {
  Permutation p;
  p.tokens_per_expert.assign(num_experts, 0);
  for (int64_t i = 0; i < n * k; ++i) {
    if (experts[i] >= 0) ++p.tokens_per_expert[experts[i]];
  }
  // Counting sort: each expert's block starts after the earlier experts'.
  std::vector<int64_t> next(num_experts, 0);
  for (int64_t e = 1; e < num_experts; ++e) {
    next[e] = next[e - 1] + p.tokens_per_expert[e - 1];
  }
  const int64_t m =
      num_experts > 0 ? next[num_experts - 1] + p.tokens_per_expert.back() : 0;
  p.source.resize(m);
  for (int64_t i = 0; i < n * k; ++i) {
    if (experts[i] >= 0) p.source[next[experts[i]]++] = i;
  }
  return p;
}

void PermuteForward(const float* x, const Permutation& p, int64_t k, int64_t h,
                    float* permuted) {
  for (size_t r = 0; r < p.source.size(); ++r) {
    const float* row = x + (p.source[r] / k) * h;
    std::copy(row, row + h, permuted + static_cast<int64_t>(r) * h);
  }
}

void PermuteBackward(const float* dpermuted, const Permutation& p, int64_t n,
                     int64_t k, int64_t h, float* dx) {
  std::fill(dx, dx + n * h, 0.0f);
  for (size_t r = 0; r < p.source.size(); ++r) {
    float* row = dx + (p.source[r] / k) * h;
    const float* d = dpermuted + static_cast<int64_t>(r) * h;
    for (int64_t c = 0; c < h; ++c) row[c] += d[c];
  }
}

void UnpermuteForward(const float* expert_out, const float* probs,
                      const Permutation& p, int64_t n, int64_t k, int64_t h,
                      float* out) {
  std::fill(out, out + n * h, 0.0f);
  for (size_t r = 0; r < p.source.size(); ++r) {
    const int64_t choice = p.source[r];
    float* row = out + (choice / k) * h;
    const float* y = expert_out + static_cast<int64_t>(r) * h;
    const float w = probs[choice];
    for (int64_t c = 0; c < h; ++c) row[c] += w * y[c];
  }
}

void UnpermuteBackward(const float* dout, const float* expert_out,
                       const float* probs, const Permutation& p, int64_t n,
                       int64_t k, int64_t h, float* dexpert_out,
                       float* dprobs) {
  std::fill(dprobs, dprobs + n * k, 0.0f);
  for (size_t r = 0; r < p.source.size(); ++r) {
    const int64_t choice = p.source[r];
    const float* d = dout + (choice / k) * h;
    const float* y = expert_out + static_cast<int64_t>(r) * h;
    float* dy = dexpert_out + static_cast<int64_t>(r) * h;
    const float w = probs[choice];
    double dot = 0;
    for (int64_t c = 0; c < h; ++c) {
      dy[c] = w * d[c];
      dot += static_cast<double>(d[c]) * y[c];
    }
    dprobs[choice] = static_cast<float>(dot);
  }
}

}  // namespace meshtune::engine::cpu
