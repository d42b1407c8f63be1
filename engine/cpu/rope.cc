// Rotary position embedding on the packed qkv buffer (engine/cpu/ops.h).
//
// Rotate-half (non-interleaved) form, Megatron's default
// (megatron/core/models/common/embeddings/rope_utils.py, _rotate_half with
// rotary_interleaved=False; Su et al. 2021, "RoFormer"): a head vector x of
// head_dim d is split into halves x₁ = x[0, d/2), x₂ = x[d/2, d), and pair j
// (x₁[j], x₂[j]) is rotated by angle p·θ_j, θ_j = base^(−2j/d):
//   y₁ = x₁·cos − x₂·sin,  y₂ = x₂·cos + x₁·sin.
// Backward applies the transpose (the inverse rotation, sin → −sin).
// Angles are formed in float64 so long positions keep their precision; the
// rotation itself runs in float.
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/cpu/ops.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cpu {
namespace {

// Rotates the q heads and k groups of every row of qkv[s·b, (heads +
// 2·groups)·head_dim] in place; direction = +1 forward, −1 inverse.
void RotateQk(float* qkv, int64_t s, int64_t b, int64_t heads, int64_t groups,
              int64_t head_dim, float base, int64_t pos_offset,
              float direction) {
  MESHTUNE_CHECK(s >= 0 && b >= 0 && heads > 0 && groups > 0);
  MESHTUNE_CHECK(heads % groups == 0);
  MESHTUNE_CHECK(head_dim > 0 && head_dim % 2 == 0);
  MESHTUNE_CHECK(pos_offset >= 0);
  const int64_t half = head_dim / 2;
  // cos/sin tables [s, half] for positions pos_offset .. pos_offset + s − 1.
  std::vector<float> cos_table(static_cast<size_t>(s * half));
  std::vector<float> sin_table(static_cast<size_t>(s * half));
#pragma omp parallel for schedule(static)
  for (int64_t si = 0; si < s; ++si) {
    const double pos = static_cast<double>(si + pos_offset);
    for (int64_t j = 0; j < half; ++j) {
      const double theta = std::pow(
          static_cast<double>(base),
          -2.0 * static_cast<double>(j) / static_cast<double>(head_dim));
      cos_table[si * half + j] = static_cast<float>(std::cos(pos * theta));
      sin_table[si * half + j] = static_cast<float>(std::sin(pos * theta));
    }
  }
  const int64_t row_width = (heads + 2 * groups) * head_dim;
  const int64_t rotated_vectors = heads + groups;  // q heads, then k groups
  const int64_t rows = s * b;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t si = r / b;  // row = si·b + bi
    const float* cos_row = cos_table.data() + si * half;
    const float* sin_row = sin_table.data() + si * half;
    for (int64_t v = 0; v < rotated_vectors; ++v) {
      float* x1 = qkv + r * row_width + v * head_dim;  // [half]
      float* x2 = x1 + half;                           // [half]
      for (int64_t j = 0; j < half; ++j) {
        const float c = cos_row[j];
        const float sn = direction * sin_row[j];
        const float a = x1[j];
        const float bb = x2[j];
        x1[j] = a * c - bb * sn;
        x2[j] = bb * c + a * sn;
      }
    }
  }
}

}  // namespace

void RopeForward(float* qkv, int64_t s, int64_t b, int64_t heads,
                 int64_t groups, int64_t head_dim, float base,
                 int64_t pos_offset) {
  RotateQk(qkv, s, b, heads, groups, head_dim, base, pos_offset, 1.0f);
}

void RopeBackward(float* dqkv, int64_t s, int64_t b, int64_t heads,
                  int64_t groups, int64_t head_dim, float base,
                  int64_t pos_offset) {
  RotateQk(dqkv, s, b, heads, groups, head_dim, base, pos_offset, -1.0f);
}

}  // namespace meshtune::engine::cpu
