// The chunk pieces of ring attention (attention_chunk.h) as Eigen GEMMs per
// (sample, head): S = scale·Q·Kᵀ [sq, sk] with the causal limit of each row
// (the keys at positions <= the query's), the softmax in fp32 with fp64
// row sums, O = D(P)·V; the backward's dP = dO·Vᵀ, dQ = scale·dS·K,
// dK = scale·dSᵀ·Q, dV = D(P)ᵀ·dO. OpenMP over (sample, head), or (sample,
// kv group) in the backward so the group's heads add into dK and dV in one
// order: results are identical run to run.
#include "engine/cpu/attention_chunk.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace meshtune::engine::cpu {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Offsets of one (bi, head) inside the packed rows (ops.h layout).
struct Layout {
  int64_t width;      // floats per qkv row
  int64_t out_width;  // floats per out row
  int64_t q;          // q of this head within a row
  int64_t k;          // k of its group
  int64_t v;          // v of its group
};

Layout LayoutOf(int64_t head, const AttentionChunkShape& s) {
  const int64_t d = s.head_dim;
  const int64_t g = head / (s.heads / s.groups);
  Layout l;
  l.width = (s.heads + 2 * s.groups) * d;
  l.out_width = s.heads * d;
  l.q = head * d;
  l.k = s.heads * d + g * d;
  l.v = (s.heads + s.groups) * d + g * d;
  return l;
}

using RowMajorMatrix =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Stride = Eigen::OuterStride<>;
using ConstStrided = Eigen::Map<const RowMajorMatrix, 0, Stride>;
using Strided = Eigen::Map<RowMajorMatrix, 0, Stride>;

// One (bi, head)'s Q [sq, d] and its group's K, V [sk, d] inside the packed
// rows: consecutive positions are b rows apart.
struct Operands {
  ConstStrided q, k, v;
};

Operands OperandsOf(const float* q_qkv, const float* kv_qkv, int64_t sq,
                    int64_t sk, int64_t bi, const Layout& l,
                    const AttentionChunkShape& s) {
  const Stride stride(s.b * l.width);
  const int64_t d = s.head_dim;
  return {ConstStrided(q_qkv + bi * l.width + l.q, sq, d, stride),
          ConstStrided(kv_qkv + bi * l.width + l.k, sk, d, stride),
          ConstStrided(kv_qkv + bi * l.width + l.v, sk, d, stride)};
}

// How many leading keys of the chunk query t sees (key u iff its position
// k_pos0 + u <= q_pos0 + t): 0 .. sk.
int64_t Seen(int64_t t, int64_t q_pos0, int64_t sk, int64_t k_pos0) {
  return std::clamp<int64_t>(q_pos0 + t - k_pos0 + 1, 0, sk);
}

// The dropout factor of (bi, head, query position t, key position u): 0
// (dropped) or 1/(1 − p) (kept), AttentionForward's masks; 1 without
// dropout.
class DropoutFactor {
 public:
  DropoutFactor(const DropoutSpec* d, int64_t seq)
      : d_(d != nullptr && d->active() ? d : nullptr), seq_(seq) {}
  // Selects the mask row of query position t (global) of (bi, head).
  void Row(int64_t bi, int64_t head, int64_t t) {
    if (d_ != nullptr) {
      seed_ = DropoutRowSeed(d_->key, d_->first_sample + bi,
                             (d_->first_head + head) * seq_ + t);
    }
  }
  double At(int64_t u) const {
    if (d_ == nullptr) return 1.0;
    return DropoutUniform(seed_, u) >= d_->p ? d_->scale() : 0.0;
  }

 private:
  const DropoutSpec* d_;
  int64_t seq_;
  uint64_t seed_ = 0;
};

}  // namespace

void AttentionChunkForward(const float* q_qkv, const float* kv_qkv, int64_t sq,
                           int64_t q_pos0, int64_t sk, int64_t k_pos0,
                           const AttentionChunkShape& s, float* out, float* lse,
                           const DropoutSpec* dropout, int64_t seq) {
  const int64_t d = s.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t bi = 0; bi < s.b; ++bi) {
    for (int64_t head = 0; head < s.heads; ++head) {
      const Layout l = LayoutOf(head, s);
      const Operands x = OperandsOf(q_qkv, kv_qkv, sq, sk, bi, l, s);
      DropoutFactor factor(dropout, seq);
      // S = scale·Q·Kᵀ, then each row's causal softmax, unnormalised, and
      // its dropped copy for the output.
      RowMajorMatrix p = scale * (x.q * x.k.transpose());
      RowMajorMatrix pd(sq, sk);
      std::vector<double> sum(sq, 0.0);
      for (int64_t t = 0; t < sq; ++t) {
        const int64_t seen = Seen(t, q_pos0, sk, k_pos0);
        float* row_lse = lse + (bi * s.heads + head) * sq + t;
        auto row = p.row(t);
        if (seen == 0) {
          row.setZero();
          pd.row(t).setZero();
          *row_lse = -std::numeric_limits<float>::infinity();
          continue;
        }
        const float max = row.head(seen).maxCoeff();
        row.head(seen) = (row.head(seen).array() - max).exp().matrix();
        row.tail(sk - seen).setZero();
        for (int64_t u = 0; u < seen; ++u) sum[t] += row[u];
        factor.Row(bi, head, q_pos0 + t);
        for (int64_t u = 0; u < sk; ++u) {
          pd(t, u) = static_cast<float>(row[u] * factor.At(k_pos0 + u));
        }
        *row_lse = static_cast<float>(max + std::log(sum[t]));
      }
      // O = D(P)·V normalised by the undropped sum (0 rows see nothing).
      Strided o(out + bi * l.out_width + head * d, sq, d,
                Stride(s.b * l.out_width));
      o.noalias() = pd * x.v;
      for (int64_t t = 0; t < sq; ++t) {
        if (sum[t] > 0) o.row(t) *= static_cast<float>(1.0 / sum[t]);
      }
    }
  }
}

void AttentionMerge(float* out, float* lse, const float* out2,
                    const float* lse2, int64_t sq,
                    const AttentionChunkShape& s) {
  const int64_t d = s.head_dim;
  const int64_t out_width = s.heads * d;
  for (int64_t bi = 0; bi < s.b; ++bi) {
    for (int64_t head = 0; head < s.heads; ++head) {
      for (int64_t t = 0; t < sq; ++t) {
        const int64_t li = (bi * s.heads + head) * sq + t;
        const double a = lse[li], c = lse2[li];
        if (c == kNegInf) continue;  // the second part saw nothing
        const double m = std::max(a, c);
        const double merged = m + std::log(std::exp(a - m) + std::exp(c - m));
        const double wa = a == kNegInf ? 0.0 : std::exp(a - merged);
        const double wc = std::exp(c - merged);
        float* o = out + (t * s.b + bi) * out_width + head * d;
        const float* o2 = out2 + (t * s.b + bi) * out_width + head * d;
        for (int64_t x = 0; x < d; ++x) {
          o[x] = static_cast<float>(wa * o[x] + wc * o2[x]);
        }
        lse[li] = static_cast<float>(merged);
      }
    }
  }
}

void AttentionChunkBackward(const float* dout, const float* out,
                            const float* lse, const float* q_qkv,
                            const float* kv_qkv, int64_t sq, int64_t q_pos0,
                            int64_t sk, int64_t k_pos0,
                            const AttentionChunkShape& s, float* dq_qkv,
                            float* dkv_qkv, const DropoutSpec* dropout,
                            int64_t seq) {
  const int64_t d = s.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t per_group = s.heads / s.groups;
  // One task per (bi, kv group): its heads add into the group's dK and dV
  // in a fixed order, so every element has one writer and one order.
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t bi = 0; bi < s.b; ++bi) {
    for (int64_t g = 0; g < s.groups; ++g) {
      DropoutFactor factor(dropout, seq);
      for (int64_t head = g * per_group; head < (g + 1) * per_group; ++head) {
        const Layout l = LayoutOf(head, s);
        const Operands x = OperandsOf(q_qkv, kv_qkv, sq, sk, bi, l, s);
        const Stride row_stride(s.b * l.width), out_stride(s.b * l.out_width);
        ConstStrided o(out + bi * l.out_width + head * d, sq, d, out_stride);
        ConstStrided d_o(dout + bi * l.out_width + head * d, sq, d, out_stride);
        // P = exp(S − lse) on the keys each row sees; the dropout factors.
        RowMajorMatrix p = scale * (x.q * x.k.transpose());
        RowMajorMatrix m = RowMajorMatrix::Ones(sq, sk);
        for (int64_t t = 0; t < sq; ++t) {
          const int64_t seen = Seen(t, q_pos0, sk, k_pos0);
          const float row_lse = lse[(bi * s.heads + head) * sq + t];
          auto row = p.row(t);
          row.head(seen) = (row.head(seen).array() - row_lse).exp().matrix();
          row.tail(sk - seen).setZero();
          factor.Row(bi, head, q_pos0 + t);
          for (int64_t u = 0; u < seen; ++u) {
            m(t, u) = static_cast<float>(factor.At(k_pos0 + u));
          }
        }
        // dS = P ∘ (M ∘ (dO·Vᵀ) − D), D = rowsum(dO ∘ O).
        const Eigen::VectorXf delta = (d_o.array() * o.array()).rowwise().sum();
        RowMajorMatrix ds = (d_o * x.v.transpose()).cwiseProduct(m);
        ds.colwise() -= delta;
        ds = ds.cwiseProduct(p);
        Strided dq(dq_qkv + bi * l.width + l.q, sq, d, row_stride);
        Strided dk(dkv_qkv + bi * l.width + l.k, sk, d, row_stride);
        Strided dv(dkv_qkv + bi * l.width + l.v, sk, d, row_stride);
        dq.noalias() += scale * (ds * x.k);
        dk.noalias() += scale * (ds.transpose() * x.q);
        dv.noalias() += p.cwiseProduct(m).transpose() * d_o;
      }
    }
  }
}

}  // namespace meshtune::engine::cpu
