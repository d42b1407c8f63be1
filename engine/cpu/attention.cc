// Causal core attention with grouped-query heads (engine/cpu/ops.h).
//
// Per (batch bi, query head j) with kv group g = j / (heads/groups) (Ainslie
// et al. 2023, "GQA"; Megatron core/transformer/dot_product_attention.py):
//   S = scale·Q·Kᵀ [s, s], P = softmax(S + causal mask), O = P·V [s, d].
// The work is split into row blocks of kBlockRows queries: block [r0, r1)
// only needs keys [0, r1), so the GEMMs skip the masked upper triangle
// (about half the FLOPs at s = 1024) while staying Eigen GEMMs.
//
// Backward (same blocks, Megatron/PyTorch's softmax backward):
//   dP = dO·Vᵀ, dS = P ∘ (dP − rowsum(dP ∘ P)),
//   dQ = scale·dS·K, dK += scale·dSᵀ·Q, dV += Pᵀ·dO,
// where dK and dV of a group sum over the group's heads. With attention
// dropout the forward uses D = P ∘ M (M = mask/(1 − p), regenerated from
// its counter-based key in the backward, dropout_mask.h): O = D·V, and the
// backward takes dP = M ∘ (dO·Vᵀ) and dV += Dᵀ·dO. One task owns one
// (bi, g) pair and visits its heads and blocks in a fixed order, so every
// element of dqkv is written by one thread in one order: results are
// bit-identical from run to run.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/cpu/ops.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cpu {
namespace {

using RowMajorMatrix =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Stride = Eigen::OuterStride<>;
using ConstStrided = Eigen::Map<const RowMajorMatrix, 0, Stride>;
using Strided = Eigen::Map<RowMajorMatrix, 0, Stride>;

// Query rows per block: large enough for efficient GEMMs, small enough that
// the causal waste on the diagonal blocks stays small (s/64 blocks).
constexpr int64_t kBlockRows = 64;

// Where one (bi, head) finds its operands inside qkv[s·b, width] and
// out[s·b, heads·d]: consecutive positions si are b rows apart.
struct HeadView {
  int64_t qkv_stride;  // floats between positions si and si + 1 in qkv
  int64_t out_stride;  // ... in out / dout
  int64_t q_offset;    // first float of Q (position 0) in qkv
  int64_t k_offset;
  int64_t v_offset;
  int64_t out_offset;  // first float of this head's output in out
  int64_t probs_offset;
};

HeadView MakeView(int64_t bi, int64_t head, int64_t s, int64_t b, int64_t heads,
                  int64_t groups, int64_t d) {
  const int64_t width = (heads + 2 * groups) * d;
  const int64_t g = head / (heads / groups);
  HeadView v;
  v.qkv_stride = b * width;
  v.out_stride = b * heads * d;
  v.q_offset = bi * width + head * d;
  v.k_offset = bi * width + (heads + g) * d;
  v.v_offset = bi * width + (heads + groups + g) * d;
  v.out_offset = bi * heads * d + head * d;
  v.probs_offset = (bi * heads + head) * s * s;
  return v;
}

void CheckShapes(int64_t s, int64_t b, int64_t heads, int64_t groups,
                 int64_t head_dim) {
  MESHTUNE_CHECK(s >= 0 && b >= 0 && head_dim > 0);
  MESHTUNE_CHECK(heads > 0 && groups > 0 && heads % groups == 0);
}

// Causal softmax of rows [r0, r1) of a score block held as p[r1 − r0, ld]
// (row t − r0 covers keys 0 .. ld − 1): keys > t are set to 0, the rest to
// exp(score − max)/Σ. `cols` is how many leading columns must be valid
// afterwards (r1 for scratch, s for the saved probs). The exponentials use
// Eigen's vectorized exp (the s²/2 of them per head would otherwise cost as
// much as the GEMMs) into `exps` (>= r1 floats, Eigen-aligned): Eigen
// computes the elements before the first aligned address with scalar exp,
// so writing into a buffer that always starts aligned makes each element's
// rounding independent of where the caller's rows live.
void CausalSoftmaxRows(float* p, int64_t ld, int64_t r0, int64_t r1,
                       int64_t cols, Eigen::ArrayXf& exps) {
  for (int64_t t = r0; t < r1; ++t) {
    float* row = p + (t - r0) * ld;
    Eigen::Map<Eigen::ArrayXf> keys(row, t + 1);  // keys 0..t
    const float row_max = keys.maxCoeff();
    exps.head(t + 1) = (keys - row_max).exp();
    double sum = 0.0;
    for (int64_t j = 0; j <= t; ++j) sum += exps[j];
    keys = exps.head(t + 1) * static_cast<float>(1.0 / sum);
    std::fill(row + t + 1, row + cols, 0.0f);
  }
}

// The dropout mask row of query t of (sample, global head): keys u <= t.
uint64_t MaskRowSeed(const DropoutSpec& d, int64_t bi, int64_t head, int64_t s,
                     int64_t t) {
  return DropoutRowSeed(d.key, d.first_sample + bi,
                        (d.first_head + head) * s + t);
}

}  // namespace

void AttentionForward(const float* qkv, float* out, float* probs, int64_t s,
                      int64_t b, int64_t heads, int64_t groups,
                      int64_t head_dim, const DropoutSpec* dropout) {
  CheckShapes(s, b, heads, groups, head_dim);
  const int64_t d = head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t blocks = (s + kBlockRows - 1) / kBlockRows;
  const int64_t tasks = b * heads * blocks;
  const bool drop = dropout != nullptr && dropout->active();
#pragma omp parallel
  {
    // Score scratch [kBlockRows, s] when the caller does not keep probs.
    std::vector<float> scratch;
    if (probs == nullptr) scratch.resize(static_cast<size_t>(kBlockRows * s));
    // Dropped probabilities D [kBlockRows, s] of the current block.
    std::vector<float> dropped;
    if (drop) dropped.resize(static_cast<size_t>(kBlockRows * s));
    Eigen::ArrayXf exps(s);  // softmax exponentials of one row
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      // Largest blocks first for a better dynamic balance.
      const int64_t blk = blocks - 1 - task % blocks;
      const int64_t head = (task / blocks) % heads;
      const int64_t bi = task / (blocks * heads);
      const HeadView v = MakeView(bi, head, s, b, heads, groups, d);
      const int64_t r0 = blk * kBlockRows;
      const int64_t r1 = std::min(s, r0 + kBlockRows);
      const int64_t rows = r1 - r0;
      ConstStrided q(qkv + v.q_offset + r0 * v.qkv_stride, rows, d,
                     Stride(v.qkv_stride));  // [rows, d]
      ConstStrided k(qkv + v.k_offset, r1, d, Stride(v.qkv_stride));  // [r1, d]
      ConstStrided val(qkv + v.v_offset, r1, d, Stride(v.qkv_stride));
      float* p_ptr =
          probs != nullptr ? probs + v.probs_offset + r0 * s : scratch.data();
      Strided p(p_ptr, rows, r1, Stride(s));  // [rows, r1] of [rows, s]
      p.noalias() = scale * (q * k.transpose());
      CausalSoftmaxRows(p_ptr, s, r0, r1, probs != nullptr ? s : r1, exps);
      Strided o(out + v.out_offset + r0 * v.out_stride, rows, d,
                Stride(v.out_stride));  // [rows, d]
      if (drop) {
        const float keep_scale = dropout->scale();
        for (int64_t t = r0; t < r1; ++t) {
          const uint64_t seed = MaskRowSeed(*dropout, bi, head, s, t);
          const float* p_row = p_ptr + (t - r0) * s;
          float* d_row = dropped.data() + (t - r0) * s;
          for (int64_t u = 0; u <= t; ++u) {
            d_row[u] = DropoutUniform(seed, u) >= dropout->p
                           ? p_row[u] * keep_scale
                           : 0.0f;
          }
          std::fill(d_row + t + 1, d_row + r1, 0.0f);
        }
        o.noalias() = Strided(dropped.data(), rows, r1, Stride(s)) * val;
      } else {
        o.noalias() = p * val;
      }
    }
  }
}

void AttentionBackward(const float* dout, const float* qkv, const float* probs,
                       float* dqkv, int64_t s, int64_t b, int64_t heads,
                       int64_t groups, int64_t head_dim,
                       const DropoutSpec* dropout) {
  CheckShapes(s, b, heads, groups, head_dim);
  const int64_t d = head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t blocks = (s + kBlockRows - 1) / kBlockRows;
  const int64_t heads_per_group = heads / groups;
  const int64_t tasks = b * groups;
  const bool drop = dropout != nullptr && dropout->active();
  // With a single task (b = 1, MQA) the region is inactive and Eigen's own
  // threads parallelize each GEMM instead.
#pragma omp parallel if (tasks > 1)
  {
    std::vector<float> ds_scratch(static_cast<size_t>(kBlockRows * s));
    // D = P ∘ M of the current block (dropout only).
    std::vector<float> dropped;
    if (drop) dropped.resize(static_cast<size_t>(kBlockRows * s));
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t g = task % groups;
      const int64_t bi = task / groups;
      const HeadView first =
          MakeView(bi, g * heads_per_group, s, b, heads, groups, d);
      // dK, dV of this group [s, d]: zeroed, then summed over its heads.
      Strided dk(dqkv + first.k_offset, s, d, Stride(first.qkv_stride));
      Strided dv(dqkv + first.v_offset, s, d, Stride(first.qkv_stride));
      dk.setZero();
      dv.setZero();
      for (int64_t jh = 0; jh < heads_per_group; ++jh) {
        const int64_t head = g * heads_per_group + jh;
        const HeadView v = MakeView(bi, head, s, b, heads, groups, d);
        for (int64_t blk = 0; blk < blocks; ++blk) {
          const int64_t r0 = blk * kBlockRows;
          const int64_t r1 = std::min(s, r0 + kBlockRows);
          const int64_t rows = r1 - r0;
          ConstStrided q(qkv + v.q_offset + r0 * v.qkv_stride, rows, d,
                         Stride(v.qkv_stride));  // [rows, d]
          ConstStrided k(qkv + v.k_offset, r1, d, Stride(v.qkv_stride));
          ConstStrided val(qkv + v.v_offset, r1, d, Stride(v.qkv_stride));
          ConstStrided d_o(dout + v.out_offset + r0 * v.out_stride, rows, d,
                           Stride(v.out_stride));  // [rows, d]
          const float* p_ptr = probs + v.probs_offset + r0 * s;
          ConstStrided p(p_ptr, rows, r1, Stride(s));  // [rows, r1]
          Strided ds(ds_scratch.data(), rows, r1, Stride(s));
          ds.noalias() = d_o * val.transpose();  // dP [rows, r1]
          for (int64_t t = r0; t < r1; ++t) {
            float* ds_row = ds_scratch.data() + (t - r0) * s;
            const float* p_row = p_ptr + (t - r0) * s;
            if (drop) {
              // dP = M ∘ dD; D = M ∘ P for the dV product.
              const uint64_t seed = MaskRowSeed(*dropout, bi, head, s, t);
              const float keep_scale = dropout->scale();
              float* d_row = dropped.data() + (t - r0) * s;
              for (int64_t j = 0; j <= t; ++j) {
                const float m =
                    DropoutUniform(seed, j) >= dropout->p ? keep_scale : 0.0f;
                ds_row[j] *= m;
                d_row[j] = p_row[j] * m;
              }
              std::fill(d_row + t + 1, d_row + r1, 0.0f);
            }
            double dot = 0.0;  // Σ_j dP·P over the visible keys
            for (int64_t j = 0; j <= t; ++j) {
              dot += static_cast<double>(ds_row[j]) * p_row[j];
            }
            const float rowdot = static_cast<float>(dot);
            for (int64_t j = 0; j <= t; ++j) {
              ds_row[j] = p_row[j] * (ds_row[j] - rowdot);
            }
            for (int64_t j = t + 1; j < r1; ++j) ds_row[j] = 0.0f;
          }
          Strided dq(dqkv + v.q_offset + r0 * v.qkv_stride, rows, d,
                     Stride(v.qkv_stride));  // [rows, d], overwritten
          dq.noalias() = scale * (ds * k);
          dk.topRows(r1).noalias() += scale * (ds.transpose() * q);
          if (drop) {
            dv.topRows(r1).noalias() +=
                Strided(dropped.data(), rows, r1, Stride(s)).transpose() * d_o;
          } else {
            dv.topRows(r1).noalias() += p.transpose() * d_o;
          }
        }
      }
    }
  }
}

}  // namespace meshtune::engine::cpu
