// Cached causal attention (engine/cpu/attention_cached.h). One task per
// (sequence, query head): its scores over the visible keys are one Eigen
// GEMM [t, d]·[d, past + t], masked causally, soft-maxed row by row, and
// multiplied by the values; tasks write disjoint output columns, so the
// result does not depend on the thread count.
#include "engine/cpu/attention_cached.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

#include "search_spaces/status.h"

namespace meshtune::engine::cpu {
namespace {

using RowMajorMatrix =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstStrided = Eigen::Map<const RowMajorMatrix, 0, Eigen::OuterStride<>>;
using Strided = Eigen::Map<RowMajorMatrix, 0, Eigen::OuterStride<>>;
using ConstMatrix = Eigen::Map<const RowMajorMatrix>;

void CheckShape(int64_t t, int64_t past, int64_t capacity,
                const AttentionChunkShape& s) {
  MESHTUNE_CHECK(t >= 0 && past >= 0 && past + t <= capacity);
  MESHTUNE_CHECK(s.b >= 0 && s.head_dim > 0 && s.groups > 0 &&
                 s.heads % s.groups == 0);
}

}  // namespace

void KvCacheAppend(const float* qkv, int64_t t, int64_t past, int64_t capacity,
                   const AttentionChunkShape& s, float* k_cache,
                   float* v_cache) {
  CheckShape(t, past, capacity, s);
  const int64_t d = s.head_dim, width = (s.heads + 2 * s.groups) * d;
  for (int64_t ti = 0; ti < t; ++ti) {
    for (int64_t bi = 0; bi < s.b; ++bi) {
      const float* row = qkv + (ti * s.b + bi) * width;
      for (int64_t g = 0; g < s.groups; ++g) {
        const int64_t at = ((bi * s.groups + g) * capacity + past + ti) * d;
        const float* k = row + (s.heads + g) * d;
        const float* v = row + (s.heads + s.groups + g) * d;
        std::copy(k, k + d, k_cache + at);
        std::copy(v, v + d, v_cache + at);
      }
    }
  }
}

void AttentionCachedForward(const float* qkv, const float* k_cache,
                            const float* v_cache, int64_t t, int64_t past,
                            int64_t capacity, const AttentionChunkShape& s,
                            float* out) {
  CheckShape(t, past, capacity, s);
  const int64_t d = s.head_dim, width = (s.heads + 2 * s.groups) * d;
  const int64_t keys = past + t, per_group = s.heads / s.groups;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t bi = 0; bi < s.b; ++bi) {
    for (int64_t j = 0; j < s.heads; ++j) {
      const int64_t g = j / per_group;
      const int64_t cache_at = (bi * s.groups + g) * capacity * d;
      ConstStrided q(qkv + bi * width + j * d, t, d,
                     Eigen::OuterStride<>(s.b * width));
      ConstMatrix k(k_cache + cache_at, keys, d);
      ConstMatrix v(v_cache + cache_at, keys, d);
      RowMajorMatrix p = (q * k.transpose()) * scale;  // [t, keys]
      for (int64_t ti = 0; ti < t; ++ti) {
        const int64_t seen = past + ti + 1;  // keys 0 .. past + ti
        auto row = p.row(ti);
        const float row_max = row.head(seen).maxCoeff();
        float sum = 0.0f;
        for (int64_t u = 0; u < seen; ++u) {
          row(u) = std::exp(row(u) - row_max);
          sum += row(u);
        }
        row.head(seen) /= sum;
        row.tail(keys - seen).setZero();
      }
      Strided o(out + bi * s.heads * d + j * d, t, d,
                Eigen::OuterStride<>(s.b * s.heads * d));
      o.noalias() = p * v;
    }
  }
}

}  // namespace meshtune::engine::cpu
