// GPU ops of the training engine (CUDA backend): the counterparts of the CPU
// reference ops in engine/cpu/ops.h, one op per .cu file, each tested against
// its CPU op in tests/engine/cuda/kernels/ops_test.cc within a bf16 tolerance.
//
// Conventions (as in engine/cpu/ops.h, plus mixed precision):
// - Every pointer is device memory. Row-major; activations of a micro-batch
//   are [s, b, h] flattened to n = s·b rows (row = si·b + bi).
// - Precision, Megatron's bf16 recipe: activations, the model's weight copy
//   and activation gradients are bf16 (Bf16); parameter gradients are the
//   fp32 main-grad buffer; optimizer state and master weights are fp32;
//   normalization statistics and every loss term are fp32. Every reduction
//   (norm statistics, softmax sums, gradient sums over rows) accumulates in
//   fp32; the gradient-norm sum in fp64.
// - Backward ops OVERWRITE activation gradients and ACCUMULATE (+=) into the
//   fp32 parameter gradients, like the CPU ops.
// - Ops are asynchronous on `stream` (nullptr = default stream). The Status
//   says whether the launch was accepted (cudaGetLastError); a fault inside
//   the kernel surfaces at the next Synchronize().
// - Sizes are element counts; no aliasing unless documented ("may alias").
// - Atomic accumulation (embedding and norm weight gradients) adds fp32
//   partial sums in an unspecified order: results agree with the CPU op
//   within fp32 rounding but are not bitwise reproducible run to run.
#ifndef MESHTUNE_ENGINE_CUDA_KERNELS_OPS_H_
#define MESHTUNE_ENGINE_CUDA_KERNELS_OPS_H_

#include <cstdint>
#include <vector>

#include "engine/cpu/dropout_mask.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

// ---- Embeddings (embedding.cu) ----
// Vocab-parallel lookup: table[vocab_local, h] holds global rows
// [vocab_start, vocab_start + vocab_local); out[n, h] = that row of
// tokens[i], or zeros when the token is outside the range.
Status EmbeddingForward(const int32_t* tokens, const Bf16* table, Bf16* out,
                        int64_t n, int64_t h, int64_t vocab_start,
                        int64_t vocab_local, Stream stream);
// dtable[vocab_local, h] += dout rows of the in-range tokens (fp32 atomics).
Status EmbeddingBackward(const int32_t* tokens, const Bf16* dout, float* dtable,
                         int64_t n, int64_t h, int64_t vocab_start,
                         int64_t vocab_local, Stream stream);
// x[n, h] += pos_table[si + pos_offset] for row si·b + bi.
Status PositionEmbeddingForward(const Bf16* pos_table, Bf16* x, int64_t s,
                                int64_t b, int64_t h, int64_t pos_offset,
                                Stream stream);
// dpos_table[si + pos_offset] += Σ_bi dout[si·b + bi] (no atomics: one
// thread per (position, column) sums the b rows in order).
Status PositionEmbeddingBackward(const Bf16* dout, float* dpos_table, int64_t s,
                                 int64_t b, int64_t h, int64_t pos_offset,
                                 Stream stream);

// ---- Normalization over the last dim h, fused with the residual add
// (norm.cu) ----
// With `residual` non-null: sum_out[n, h] = x + residual (rounded to bf16),
// and sum_out is what gets normalized (Megatron's pre-norm layer adds the
// residual stream and normalizes it in one pass). With `residual` null, x is
// normalized and sum_out is ignored (may be null).
// LayerNorm: out = (y − mean)·rstd·weight + bias; mean[n], rstd[n] fp32.
Status LayerNormForward(const Bf16* x, const Bf16* residual, Bf16* sum_out,
                        const Bf16* weight, const Bf16* bias, Bf16* out,
                        float* mean, float* rstd, int64_t n, int64_t h,
                        float eps, Stream stream);
// dx[n, h] = ∂L/∂y (+ dresidual when non-null: the residual branch's
// gradient, so the caller gets the residual stream's gradient in one pass);
// dweight[h] += Σ dout·ŷ, dbias[h] += Σ dout. `y` is the normalized input
// (sum_out when the forward fused a residual).
Status LayerNormBackward(const Bf16* dout, const Bf16* y, const Bf16* weight,
                         const float* mean, const float* rstd,
                         const Bf16* dresidual, Bf16* dx, float* dweight,
                         float* dbias, int64_t n, int64_t h, Stream stream);
// RMSNorm (LLaMA): out = y·rstd·weight, rstd = 1/sqrt(mean(y²) + eps).
Status RmsNormForward(const Bf16* x, const Bf16* residual, Bf16* sum_out,
                      const Bf16* weight, Bf16* out, float* rstd, int64_t n,
                      int64_t h, float eps, Stream stream);
Status RmsNormBackward(const Bf16* dout, const Bf16* y, const Bf16* weight,
                       const float* rstd, const Bf16* dresidual, Bf16* dx,
                       float* dweight, int64_t n, int64_t h, Stream stream);

// ---- Activations (activation.cu) ----
// GELU, tanh approximation: out[count] = 0.5·x·(1 + tanh(√(2/π)(x +
// 0.044715x³))). Backward: dx = dout·gelu'(x).
Status GeluForward(const Bf16* x, Bf16* out, int64_t count, Stream stream);
Status GeluBackward(const Bf16* dout, const Bf16* x, Bf16* dx, int64_t count,
                    Stream stream);
// SwiGLU on a fused fc1 output in[n, 2f] = [gate | up] per row:
// out[n, f] = silu(gate)·up; backward writes din[n, 2f].
Status SwigluForward(const Bf16* in, Bf16* out, int64_t n, int64_t f,
                     Stream stream);
Status SwigluBackward(const Bf16* dout, const Bf16* in, Bf16* din, int64_t n,
                      int64_t f, Stream stream);

// ---- Rotary position embedding (rope.cu), in place on the q and k parts
// of qkv[n, (heads + 2·groups)·head_dim] (layout of engine/cpu/ops.h:
// rotate-half, position of row si·b + bi is si + pos_offset, θ_j =
// base^(−2j/head_dim)); the backward applies the inverse rotation to dqkv.
Status RopeForward(Bf16* qkv, int64_t s, int64_t b, int64_t heads,
                   int64_t groups, int64_t head_dim, float base,
                   int64_t pos_offset, Stream stream);
Status RopeBackward(Bf16* dqkv, int64_t s, int64_t b, int64_t heads,
                    int64_t groups, int64_t head_dim, float base,
                    int64_t pos_offset, Stream stream);

// ---- Cached attention for inference (attention_cached.cu; CPU:
// engine/cpu/attention_cached.h) ----
// KvCacheAppend: the k and v parts of qkv[t·b, (heads + 2·groups)·d]
// (row ti·b + bi = position past + ti of sequence bi) into the caches
// k_cache, v_cache[b, groups, capacity, d] at positions [past, past + t).
// AttentionCachedForward: out[t·b, heads·d] = softmax(scale·q·Kᵀ)·V of each
// new row's query over the cached keys [0, past + ti] of its sequence
// (appended first), scale 1/√d, fp32 softmax. head_dim at most 256.
Status KvCacheAppend(const Bf16* qkv, int64_t t, int64_t b, int64_t heads,
                     int64_t groups, int64_t head_dim, int64_t past,
                     int64_t capacity, Bf16* k_cache, Bf16* v_cache,
                     Stream stream);
Status AttentionCachedForward(const Bf16* qkv, const Bf16* k_cache,
                              const Bf16* v_cache, int64_t t, int64_t b,
                              int64_t heads, int64_t groups, int64_t head_dim,
                              int64_t past, int64_t capacity, Bf16* out,
                              Stream stream);
// ---- Vocab-parallel softmax cross-entropy (cross_entropy.cu): the local
// pieces of Megatron's cross_entropy.py; the caller all-reduces row_max
// (max) and sum_exp/target_logit (sum) over the tp group between them.
// logits[n, vocab_local] (bf16) of global columns [vocab_start,
// +vocab_local); columns >= vocab_size are padding, excluded (−inf). One
// thread block per row; statistics in fp32.
// 1) row_max[n] = max over the local valid columns (−inf if none).
Status CrossEntropyLocalMax(const Bf16* logits, float* row_max, int64_t n,
                            int64_t vocab_local, int64_t vocab_start,
                            int64_t vocab_size, Stream stream);
// 2) sum_exp[n] = Σ_local exp(logit − row_max); target_logit[n] = the
//    target's logit if it is local, else 0.
Status CrossEntropyLocalSums(const Bf16* logits, const int32_t* targets,
                             const float* row_max, float* sum_exp,
                             float* target_logit, int64_t n,
                             int64_t vocab_local, int64_t vocab_start,
                             int64_t vocab_size, Stream stream);
// 3) loss[n] = log(sum_exp) + row_max − target_logit (global values).
Status CrossEntropyLoss(const float* row_max, const float* sum_exp,
                        const float* target_logit, float* loss, int64_t n,
                        Stream stream);
// 3b) *loss_sum (one device double, ADDED to) += Σ loss[n]: the
//    micro-batches' loss sums stay on the device and the host reads them
//    once per step, so the last pipeline stage never waits on the GPU
//    between micro-batches. fp32 per-thread partials, fp64 block totals.
Status CrossEntropyLossSum(const float* loss, int64_t n, double* loss_sum,
                           Stream stream);
// 4) dlogits[n, vocab_local] = scale[i]·(softmax − onehot(target)), padding
//    columns 0; softmax recomputed from the logits (fused: the probabilities
//    are never stored). dlogits may alias logits (llm.c's in-place trick
//    that saves a [n, vocab] buffer).
Status CrossEntropyBackward(const Bf16* logits, const int32_t* targets,
                            const float* row_max, const float* sum_exp,
                            const float* scale, Bf16* dlogits, int64_t n,
                            int64_t vocab_local, int64_t vocab_start,
                            int64_t vocab_size, Stream stream);

// ---- Hidden dropout (dropout.cu) ----
// In place on x[rows, h] with cpu::HiddenDropout's mask (the same elements
// of the same samples are dropped, scaled by 1/(1 − p)); the backward is the
// same call on the gradient. No-op when !d.active().
Status HiddenDropout(Bf16* x, int64_t rows, int64_t h, int64_t b,
                     const cpu::DropoutSpec& d, Stream stream);

// ---- Elementwise (elementwise.cu) ----
// y[count] += x[count] (bf16 storage, fp32 arithmetic).
Status Add(const Bf16* x, Bf16* y, int64_t count, Stream stream);
// x[count] *= s (fp32 gradients: clipping, loss scaling).
Status Scale(float* x, int64_t count, float s, Stream stream);
// dst[count] = bf16(src) (the model's weight copy from fp32 master weights).
Status CastToBf16(const float* src, Bf16* dst, int64_t count, Stream stream);

// ---- MoE token rows (moe_rows.cu): engine/cpu/moe_permute.h on the GPU,
// with the permutation as index arrays (the router runs on the host,
// engine/cuda/moe/moe_block.h). n tokens, k choices per token, m kept
// choices (rows), h hidden; bf16 rows, fp32 sums and weights. ----
// out[r, h] = x[token[r], h] for r < m (PermuteForward: token[r] =
// source[r] / k).
Status GatherRows(const Bf16* x, const int32_t* token, Bf16* out, int64_t m,
                  int64_t h, Stream stream);
// out[t, h] (overwritten) = Σ_j w[t·k + j] · rows[row_of[t·k + j], h] over
// the choices j with row_of >= 0 (dropped ones are −1; a token with none
// gets 0). w null: weight 1 (PermuteBackward's sum of a token's rows);
// else the routing probs (UnpermuteForward).
Status CombineRows(const Bf16* rows, const int32_t* row_of, const float* w,
                   Bf16* out, int64_t n, int64_t k, int64_t h, Stream stream);
// UnpermuteBackward for r < m, c = choice[r] (the flat t·k + j):
// drows[r, h] = w[c] · dout[c / k, h] and dw[c] = dout[c / k] · rows[r]
// (fp32 dot). dw entries of dropped choices are not written (zero them).
Status CombineRowsBackward(const Bf16* dout, const Bf16* rows,
                           const int32_t* choice, const float* w, Bf16* drows,
                           float* dw, int64_t m, int64_t k, int64_t h,
                           Stream stream);

// ---- Optimizer (adamw.cu): multi-tensor, one launch updates every
// parameter tensor (apex's multi_tensor_apply: segment descriptors travel
// as kernel arguments, in groups of kMaxSegmentsPerLaunch) ----
struct AdamWSegment {
  float* param = nullptr;       // fp32 master weights [count]
  const float* grad = nullptr;  // fp32 main grad [count]
  float* m = nullptr;           // first moment [count]
  float* v = nullptr;           // second moment [count]
  Bf16* param_bf16 = nullptr;   // the model's bf16 copy, rewritten; may be null
  int64_t count = 0;
  float weight_decay = 0;  // 0 for biases and norms (Megatron's no-wd set)
};
inline constexpr int kMaxSegmentsPerLaunch = 32;
// AdamW as engine/cpu/ops.h AdamWUpdate (decoupled decay, bias-corrected,
// `step` from 1), per segment with its own weight decay.
Status AdamWUpdate(const std::vector<AdamWSegment>& segments, float lr,
                   float beta1, float beta2, float eps, int64_t step,
                   Stream stream);

// ---- Global gradient norm (grad_norm.cu) ----
struct GradSegment {
  const float* grad = nullptr;
  int64_t count = 0;
};
// *sum_squares (one device double, ADDED to: zero it first) += Σ grad² over
// every segment. fp32 per-thread partials, fp64 block totals and atomics.
Status SumSquares(const std::vector<GradSegment>& segments, double* sum_squares,
                  Stream stream);

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_KERNELS_OPS_H_
