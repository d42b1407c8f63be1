#include "engine/cpu/attention_chunk.h"

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

// S[t, u] = scale·q_t·k_u for the keys query t sees; kNegInf otherwise.
std::vector<double> Scores(const float* q_qkv, const float* kv_qkv, int64_t sq,
                           int64_t q_pos0, int64_t sk, int64_t k_pos0,
                           int64_t bi, const Layout& l,
                           const AttentionChunkShape& s) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  std::vector<double> scores(sq * sk, kNegInf);
  for (int64_t t = 0; t < sq; ++t) {
    const float* q = q_qkv + (t * s.b + bi) * l.width + l.q;
    for (int64_t u = 0; u < sk; ++u) {
      if (k_pos0 + u > q_pos0 + t) break;
      const float* k = kv_qkv + (u * s.b + bi) * l.width + l.k;
      double dot = 0;
      for (int64_t c = 0; c < s.head_dim; ++c) dot += double(q[c]) * k[c];
      scores[t * sk + u] = scale * dot;
    }
  }
  return scores;
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
  DropoutFactor factor(dropout, seq);
  for (int64_t bi = 0; bi < s.b; ++bi) {
    for (int64_t head = 0; head < s.heads; ++head) {
      const Layout l = LayoutOf(head, s);
      const std::vector<double> scores =
          Scores(q_qkv, kv_qkv, sq, q_pos0, sk, k_pos0, bi, l, s);
      for (int64_t t = 0; t < sq; ++t) {
        float* o = out + (t * s.b + bi) * l.out_width + head * d;
        double max = kNegInf;
        for (int64_t u = 0; u < sk; ++u)
          max = std::max(max, scores[t * sk + u]);
        float* row_lse = lse + (bi * s.heads + head) * sq + t;
        if (max == kNegInf) {
          std::fill(o, o + d, 0.0f);
          *row_lse = -std::numeric_limits<float>::infinity();
          continue;
        }
        double sum = 0;
        std::vector<double> acc(d, 0.0);
        factor.Row(bi, head, q_pos0 + t);
        for (int64_t u = 0; u < sk; ++u) {
          if (scores[t * sk + u] == kNegInf) continue;
          const double p = std::exp(scores[t * sk + u] - max);
          sum += p;  // the softmax normalises the undropped P
          const double pd = p * factor.At(k_pos0 + u);
          const float* v = kv_qkv + (u * s.b + bi) * l.width + l.v;
          for (int64_t c = 0; c < d; ++c) acc[c] += pd * v[c];
        }
        for (int64_t c = 0; c < d; ++c) o[c] = static_cast<float>(acc[c] / sum);
        *row_lse = static_cast<float>(max + std::log(sum));
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
  DropoutFactor factor(dropout, seq);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (int64_t bi = 0; bi < s.b; ++bi) {
    for (int64_t head = 0; head < s.heads; ++head) {
      const Layout l = LayoutOf(head, s);
      const std::vector<double> scores =
          Scores(q_qkv, kv_qkv, sq, q_pos0, sk, k_pos0, bi, l, s);
      for (int64_t t = 0; t < sq; ++t) {
        const int64_t row = t * s.b + bi;
        const float* o = out + row * l.out_width + head * d;
        const float* dO = dout + row * l.out_width + head * d;
        const double row_lse = lse[(bi * s.heads + head) * sq + t];
        double delta = 0;  // D = rowsum(dout ∘ out)
        for (int64_t c = 0; c < d; ++c) delta += double(dO[c]) * o[c];
        const float* q = q_qkv + row * l.width + l.q;
        float* dq = dq_qkv + row * l.width + l.q;
        factor.Row(bi, head, q_pos0 + t);
        for (int64_t u = 0; u < sk; ++u) {
          const double sc = scores[t * sk + u];
          if (sc == kNegInf) continue;
          const double p = std::exp(sc - row_lse);
          const int64_t kv_row = u * s.b + bi;
          const float* k = kv_qkv + kv_row * l.width + l.k;
          const float* v = kv_qkv + kv_row * l.width + l.v;
          float* dk = dkv_qkv + kv_row * l.width + l.k;
          float* dv = dkv_qkv + kv_row * l.width + l.v;
          const double m = factor.At(k_pos0 + u);  // dropout factor
          double dp = 0;                           // (dout·Vᵀ)[t, u], masked
          for (int64_t c = 0; c < d; ++c) dp += double(dO[c]) * v[c];
          dp *= m;
          const double ds = p * (dp - delta);
          for (int64_t c = 0; c < d; ++c) {
            dq[c] += static_cast<float>(scale * ds * k[c]);
            dk[c] += static_cast<float>(scale * ds * q[c]);
            dv[c] += static_cast<float>(p * m * dO[c]);
          }
        }
      }
    }
  }
}

}  // namespace meshtune::engine::cpu
