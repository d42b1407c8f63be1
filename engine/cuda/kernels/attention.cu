// Unfused causal attention on cuBLASLt (engine/cuda/kernels/attention.h).
#include <cmath>
#include <string>

#include "engine/cpu/dropout_mask.h"
#include "engine/cuda/kernels/attention.h"
#include "engine/cuda/kernels/kernel_util.cuh"

namespace meshtune::engine::cuda {
namespace {

constexpr int kThreads = 256;

// q/k/v[(bi·heads + j)·s + si, t] from qkv[si·b + bi, ...]; query head j
// reads kv group j / (heads / groups).
__global__ void SplitQkvKernel(const Bf16* qkv, Bf16* q, Bf16* k, Bf16* v,
                               int64_t s, int64_t b, int64_t heads,
                               int64_t groups, int64_t d) {
  const int64_t width = (heads + 2 * groups) * d;
  const int64_t total = b * heads * s * d;
  const int64_t per_group = heads / groups;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = e % d;
    const int64_t si = (e / d) % s;
    const int64_t j = (e / (d * s)) % heads;
    const int64_t bi = e / (d * s * heads);
    const int64_t g = j / per_group;
    const Bf16* row = qkv + (si * b + bi) * width;
    q[e] = row[j * d + t];
    k[e] = row[(heads + g) * d + t];
    v[e] = row[(heads + groups + g) * d + t];
  }
}

// Offset in the merged [s·b, heads·d] layout of element e of the head
// layout [b·heads, s, d].
__device__ __forceinline__ int64_t MergedOffset(int64_t e, int64_t s, int64_t b,
                                                int64_t heads, int64_t d) {
  const int64_t t = e % d;
  const int64_t si = (e / d) % s;
  const int64_t j = (e / (d * s)) % heads;
  const int64_t bi = e / (d * s * heads);
  return (si * b + bi) * heads * d + j * d + t;
}

// merged[si·b + bi, j·d + t] = split_heads[(bi·heads + j)·s + si, t].
__global__ void MergeHeadsKernel(const Bf16* split_heads, Bf16* merged,
                                 int64_t s, int64_t b, int64_t heads,
                                 int64_t d) {
  const int64_t total = b * heads * s * d;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    merged[MergedOffset(e, s, b, heads, d)] = split_heads[e];
  }
}

// The reverse: the output gradient into the head layout.
__global__ void SplitHeadsKernel(const Bf16* merged, Bf16* split_heads,
                                 int64_t s, int64_t b, int64_t heads,
                                 int64_t d) {
  const int64_t total = b * heads * s * d;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    split_heads[e] = merged[MergedOffset(e, s, b, heads, d)];
  }
}

// Whether attention-dropout keeps element u of score row `row` (= bh·s +
// t, bh = bi·heads + j): the CPU op's mask (engine/cpu/attention.cc).
__device__ __forceinline__ bool Keep(const cpu::DropoutSpec& d, int64_t row,
                                     int64_t u, int64_t s, int64_t heads) {
  const int64_t t = row % s, bh = row / s;
  const int64_t bi = bh / heads, j = bh % heads;
  const uint64_t seed = cpu::DropoutRowSeed(d.key, d.first_sample + bi,
                                            (d.first_head + j) * s + t);
  return cpu::DropoutUniform(seed, u) >= d.p;
}

// P[row, u] = softmax over u ≤ t of S[row, u] (row = bh·s + t), 0 above
// the diagonal. One block per row. With dropout, dropped[row, u] = D(P).
__global__ void CausalSoftmaxKernel(const float* scores, Bf16* probs,
                                    Bf16* dropped, int64_t s, int64_t heads,
                                    cpu::DropoutSpec d) {
  __shared__ float scratch[kWarpSize];
  const int64_t row = blockIdx.x;
  const int64_t t = row % s;
  const float* srow = scores + row * s;
  float m = -INFINITY;
  for (int64_t u = threadIdx.x; u <= t; u += blockDim.x) m = fmaxf(m, srow[u]);
  m = BlockMax(m, scratch);
  float sum = 0.0f;
  for (int64_t u = threadIdx.x; u <= t; u += blockDim.x) {
    sum += expf(srow[u] - m);
  }
  sum = BlockSum(sum, scratch);
  const float inv = 1.0f / sum;
  const float keep_scale = 1.0f / (1.0f - d.p);
  for (int64_t u = threadIdx.x; u < s; u += blockDim.x) {
    const float p = u <= t ? expf(srow[u] - m) * inv : 0.0f;
    Store(probs, row * s + u, p);
    if (dropped != nullptr) {
      // D(P) from the rounded P, as the backward regenerates it.
      const float stored = Round(p);
      Store(dropped, row * s + u,
            u <= t && Keep(d, row, u, s, heads) ? stored * keep_scale : 0.0f);
    }
  }
}

// dropped = D(P) from the saved P (the backward's dV = D(P)ᵀ·dO).
__global__ void DropProbsKernel(const Bf16* probs, Bf16* dropped, int64_t s,
                                int64_t heads, cpu::DropoutSpec d) {
  const int64_t row = blockIdx.x;
  const int64_t t = row % s;
  const float keep_scale = 1.0f / (1.0f - d.p);
  for (int64_t u = threadIdx.x; u < s; u += blockDim.x) {
    const float p = Load(probs, row * s + u);
    Store(dropped, row * s + u,
          u <= t && Keep(d, row, u, s, heads) ? p * keep_scale : 0.0f);
  }
}

// dS = P ∘ (dP' − Σ_u P·dP'), row by row (softmax backward), with dP' =
// D'(dP) the gradient through the dropout when it is active; 0 above the
// diagonal because P is.
__global__ void SoftmaxBackwardKernel(const Bf16* probs, const float* dprobs,
                                      Bf16* dscores, int64_t s, int64_t heads,
                                      cpu::DropoutSpec d) {
  __shared__ float scratch[kWarpSize];
  const int64_t row = blockIdx.x;
  const int64_t t = row % s;
  const float keep_scale = 1.0f / (1.0f - d.p);
  auto grad = [&](int64_t u) {
    const float g = dprobs[row * s + u];
    if (!(d.p > 0.0f)) return g;
    return Keep(d, row, u, s, heads) ? g * keep_scale : 0.0f;
  };
  float dot = 0.0f;
  for (int64_t u = threadIdx.x; u <= t; u += blockDim.x) {
    dot += Load(probs, row * s + u) * grad(u);
  }
  dot = BlockSum(dot, scratch);
  for (int64_t u = threadIdx.x; u < s; u += blockDim.x) {
    const float p = Load(probs, row * s + u);
    Store(dscores, row * s + u, u <= t ? p * (grad(u) - dot) : 0.0f);
  }
}

// dqkv[si·b + bi, column]: q columns copy dq; k and v columns of group g sum
// dk/dv over the group's query heads (in head order: deterministic).
__global__ void MergeQkvGradKernel(const Bf16* dq, const Bf16* dk,
                                   const Bf16* dv, Bf16* dqkv, int64_t s,
                                   int64_t b, int64_t heads, int64_t groups,
                                   int64_t d) {
  const int64_t width = (heads + 2 * groups) * d;
  const int64_t total = s * b * width;
  const int64_t per_group = heads / groups;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t col = e % width;
    const int64_t row = e / width;  // si·b + bi
    const int64_t si = row / b, bi = row % b;
    const int64_t t = col % d;
    const int64_t slot = col / d;  // q head, then k group, then v group
    auto at = [&](int64_t j) { return ((bi * heads + j) * s + si) * d + t; };
    if (slot < heads) {
      dqkv[e] = dq[at(slot)];
      continue;
    }
    const bool is_k = slot < heads + groups;
    const int64_t g = is_k ? slot - heads : slot - heads - groups;
    const Bf16* src = is_k ? dk : dv;
    float sum = 0.0f;
    for (int64_t j = g * per_group; j < (g + 1) * per_group; ++j) {
      sum += Load(src, at(j));
    }
    Store(dqkv, e, sum);
  }
}

}  // namespace

StatusOr<std::unique_ptr<Attention>> Attention::Create(GemmContext* gemm,
                                                       int64_t s, int64_t b,
                                                       int64_t heads,
                                                       int64_t groups,
                                                       int64_t head_dim) {
  if (s <= 0 || b <= 0 || heads <= 0 || groups <= 0 || head_dim <= 0 ||
      heads % groups != 0) {
    return Status::InvalidArgument(
        "attention: sizes must be positive and heads a multiple of groups");
  }
  std::unique_ptr<Attention> a(new Attention());
  a->gemm_ = gemm;
  a->s_ = s;
  a->b_ = b;
  a->heads_ = heads;
  a->groups_ = groups;
  a->d_ = head_dim;
  const size_t head_bytes = sizeof(Bf16) * b * heads * s * head_dim;
  const size_t score_elems = static_cast<size_t>(b * heads) * s * s;
  for (DeviceBuffer* buf :
       {&a->q_, &a->k_, &a->v_, &a->o_, &a->dq_, &a->dk_, &a->dv_, &a->do_}) {
    auto allocated = DeviceBuffer::Allocate(head_bytes);
    if (!allocated.ok()) return allocated.status();
    *buf = std::move(allocated).value();
  }
  auto scores = DeviceBuffer::Allocate(sizeof(float) * score_elems);
  if (!scores.ok()) return scores.status();
  a->scores_ = std::move(scores).value();
  auto dscores = DeviceBuffer::Allocate(sizeof(Bf16) * score_elems);
  if (!dscores.ok()) return dscores.status();
  a->dscores_ = std::move(dscores).value();
  return StatusOr<std::unique_ptr<Attention>>(std::move(a));
}

Status Attention::SplitQkv(const Bf16* qkv, Stream stream) {
  const int64_t total = b_ * heads_ * s_ * d_;
  SplitQkvKernel<<<GridFor(total, kThreads), kThreads, 0, ToCuda(stream)>>>(
      qkv, q_.as<Bf16>(), k_.as<Bf16>(), v_.as<Bf16>(), s_, b_, heads_, groups_,
      d_);
  return LastError("attention_split_qkv");
}

Status Attention::Forward(const Bf16* qkv, Bf16* out, Bf16* probs,
                          Stream stream, const cpu::DropoutSpec* dropout) {
  const cpu::DropoutSpec d = dropout != nullptr ? *dropout : cpu::DropoutSpec();
  // With dropout the P·V product reads D(P), kept in the dS scratch.
  Bf16* dropped = d.active() ? dscores_.as<Bf16>() : nullptr;
  const int64_t bh = b_ * heads_, sd = s_ * d_, ss = s_ * s_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_));
  MESHTUNE_RETURN_IF_ERROR(SplitQkv(qkv, stream));
  // S[bh, t, u] = scale·q[t]·k[u] (fp32).
  MESHTUNE_RETURN_IF_ERROR(gemm_->BatchedMatmul(
      false, true, s_, s_, d_, q_.as<Bf16>(), sd, k_.as<Bf16>(), sd,
      scores_.as<float>(), ss, bh, scale, stream));
  CausalSoftmaxKernel<<<static_cast<unsigned>(bh * s_), kThreads, 0,
                        ToCuda(stream)>>>(scores_.as<float>(), probs, dropped,
                                          s_, heads_, d);
  MESHTUNE_RETURN_IF_ERROR(LastError("attention_softmax"));
  // O = P·V, or D(P)·V.
  MESHTUNE_RETURN_IF_ERROR(gemm_->BatchedMatmul(
      false, false, s_, d_, s_, dropped != nullptr ? dropped : probs, ss,
      v_.as<Bf16>(), sd, o_.as<Bf16>(), sd, bh, 1.0f, stream));
  MergeHeadsKernel<<<GridFor(bh * sd, kThreads), kThreads, 0, ToCuda(stream)>>>(
      o_.as<Bf16>(), out, s_, b_, heads_, d_);
  return LastError("attention_merge_heads");
}

Status Attention::Backward(const Bf16* dout, const Bf16* qkv, const Bf16* probs,
                           Bf16* dqkv, Stream stream,
                           const cpu::DropoutSpec* dropout) {
  const cpu::DropoutSpec d = dropout != nullptr ? *dropout : cpu::DropoutSpec();
  const int64_t bh = b_ * heads_, sd = s_ * d_, ss = s_ * s_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_));
  MESHTUNE_RETURN_IF_ERROR(SplitQkv(qkv, stream));
  SplitHeadsKernel<<<GridFor(bh * sd, kThreads), kThreads, 0, ToCuda(stream)>>>(
      dout, do_.as<Bf16>(), s_, b_, heads_, d_);
  MESHTUNE_RETURN_IF_ERROR(LastError("attention_split_dout"));
  // dV = D(P)ᵀ·dO (D(P) regenerated into the dS scratch); dP = dO·Vᵀ (fp32).
  const Bf16* pv = probs;
  if (d.active()) {
    DropProbsKernel<<<static_cast<unsigned>(bh * s_), kThreads, 0,
                      ToCuda(stream)>>>(probs, dscores_.as<Bf16>(), s_, heads_,
                                        d);
    MESHTUNE_RETURN_IF_ERROR(LastError("attention_dropout_mask"));
    pv = dscores_.as<Bf16>();
  }
  MESHTUNE_RETURN_IF_ERROR(
      gemm_->BatchedMatmul(true, false, s_, d_, s_, pv, ss, do_.as<Bf16>(), sd,
                           dv_.as<Bf16>(), sd, bh, 1.0f, stream));
  MESHTUNE_RETURN_IF_ERROR(gemm_->BatchedMatmul(
      false, true, s_, s_, d_, do_.as<Bf16>(), sd, v_.as<Bf16>(), sd,
      scores_.as<float>(), ss, bh, 1.0f, stream));
  SoftmaxBackwardKernel<<<static_cast<unsigned>(bh * s_), kThreads, 0,
                          ToCuda(stream)>>>(probs, scores_.as<float>(),
                                            dscores_.as<Bf16>(), s_, heads_, d);
  MESHTUNE_RETURN_IF_ERROR(LastError("attention_softmax_backward"));
  // S = scale·Q·Kᵀ: dQ = scale·dS·K, dK = scale·dSᵀ·Q.
  MESHTUNE_RETURN_IF_ERROR(gemm_->BatchedMatmul(
      false, false, s_, d_, s_, dscores_.as<Bf16>(), ss, k_.as<Bf16>(), sd,
      dq_.as<Bf16>(), sd, bh, scale, stream));
  MESHTUNE_RETURN_IF_ERROR(gemm_->BatchedMatmul(
      true, false, s_, d_, s_, dscores_.as<Bf16>(), ss, q_.as<Bf16>(), sd,
      dk_.as<Bf16>(), sd, bh, scale, stream));
  const int64_t total = s_ * b_ * (heads_ + 2 * groups_) * d_;
  MergeQkvGradKernel<<<GridFor(total, kThreads), kThreads, 0, ToCuda(stream)>>>(
      dq_.as<Bf16>(), dk_.as<Bf16>(), dv_.as<Bf16>(), dqkv, s_, b_, heads_,
      groups_, d_);
  return LastError("attention_merge_qkv_grad");
}

}  // namespace meshtune::engine::cuda
