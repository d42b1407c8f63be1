// CPU reference ops of the training engine: explicit forward and backward
// functions over flat float32 buffers (llm.c style, no autograd).
//
// Conventions (every op):
// - Row-major. Activations of one micro-batch are [s, b, h] flattened to
//   n = s·b rows (row = si·b + bi, Megatron's sequence-first layout, so a
//   sequence-parallel shard is a contiguous block of rows).
// - Backward functions OVERWRITE input gradients (dx, din, dqkv, ...) and
//   ACCUMULATE (+=) parameter gradients (dweight, dbias, dtable), so
//   gradient accumulation over micro-batches needs no extra buffer.
// - Pointers may be null only where documented (bias). No aliasing between
//   inputs and outputs unless documented ("in place").
// - Numerics are deterministic for a given thread count: Eigen GEMMs and
//   fixed-order loops; reductions over rows use float64 accumulators where a
//   sum spans many rows.
#ifndef MESHTUNE_ENGINE_CPU_OPS_H_
#define MESHTUNE_ENGINE_CPU_OPS_H_

#include <cstdint>

#include "engine/cpu/dropout_mask.h"

namespace meshtune::engine::cpu {

// ---- Linear (PyTorch/Megatron layout: weight [out, in]) ----
// out[n, m] = in[n, k] · weight[m, k]ᵀ + bias[m] (bias may be null).
void LinearForward(const float* in, const float* weight, const float* bias,
                   float* out, int64_t n, int64_t k, int64_t m);
// din[n, k] = dout[n, m] · weight[m, k]      (skipped when din is null)
// dweight[m, k] += dout[n, m]ᵀ · in[n, k]
// dbias[m] += Σ_rows dout                    (skipped when dbias is null)
void LinearBackward(const float* dout, const float* in, const float* weight,
                    float* din, float* dweight, float* dbias, int64_t n,
                    int64_t k, int64_t m);

// ---- Normalization over the last dim h, eps inside the square root ----
// LayerNorm: out = (x − mean)·rstd·weight + bias; saves mean[n], rstd[n].
void LayerNormForward(const float* x, const float* weight, const float* bias,
                      float* out, float* mean, float* rstd, int64_t n,
                      int64_t h, float eps);
void LayerNormBackward(const float* dout, const float* x, const float* weight,
                       const float* mean, const float* rstd, float* dx,
                       float* dweight, float* dbias, int64_t n, int64_t h);
// RMSNorm (LLaMA): out = x·rstd·weight, rstd = 1/sqrt(mean(x²) + eps).
void RmsNormForward(const float* x, const float* weight, float* out,
                    float* rstd, int64_t n, int64_t h, float eps);
void RmsNormBackward(const float* dout, const float* x, const float* weight,
                     const float* rstd, float* dx, float* dweight, int64_t n,
                     int64_t h);

// ---- Activations ----
// GELU, tanh approximation (GPT-2; Megatron's bias-gelu fusion):
// out[count] = 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))).
void GeluForward(const float* x, float* out, int64_t count);
void GeluBackward(const float* dout, const float* x, float* dx, int64_t count);
// SwiGLU on a fused fc1 output: in[n, 2f] = [gate | up] per row (the local
// column-parallel shard is its own [gate_r | up_r]); out[n, f] =
// silu(gate)·up. Backward writes din[n, 2f].
void SwigluForward(const float* in, float* out, int64_t n, int64_t f);
void SwigluBackward(const float* dout, const float* in, float* din, int64_t n,
                    int64_t f);

// ---- Rotary position embedding (RoPE, rotate-half / non-interleaved,
// Megatron's default), applied in place to the q and k parts of a packed
// qkv buffer (layout below). Position of row si·b + bi is si + pos_offset;
// rotary dim = head_dim; θ_j = base^(−2j/head_dim).
void RopeForward(float* qkv, int64_t s, int64_t b, int64_t heads,
                 int64_t groups, int64_t head_dim, float base,
                 int64_t pos_offset);
// The inverse rotation applied to dqkv in place (RoPE is orthogonal).
void RopeBackward(float* dqkv, int64_t s, int64_t b, int64_t heads,
                  int64_t groups, int64_t head_dim, float base,
                  int64_t pos_offset);

// ---- Causal self-attention (core attention: QKᵀ, softmax, ·V) ----
// qkv[n, (heads + 2·groups)·head_dim] per row = [q (heads·d) | k (groups·d)
// | v (groups·d)]; query head j uses kv group j / (heads/groups) (GQA).
// out[n, heads·d]; probs[b, heads, s, s] (row-major; the strictly upper
// triangle is zero) is written when non-null and is what backward needs.
// Scale 1/√head_dim.
// Attention dropout (when `dropout` is non-null and active): O = D(P)·V
// with D(P) = P ∘ mask/(1 − p); probs keeps the undropped P. Element
// (bi, head j, query t, key u) is kept iff keep(key, first_sample + bi,
// (first_head + j)·s + t, u) (dropout_mask.h); the backward regenerates the
// mask from the same spec.
void AttentionForward(const float* qkv, float* out, float* probs, int64_t s,
                      int64_t b, int64_t heads, int64_t groups,
                      int64_t head_dim, const DropoutSpec* dropout = nullptr);
// dqkv[n, (heads + 2·groups)·d] is overwritten.
void AttentionBackward(const float* dout, const float* qkv, const float* probs,
                       float* dqkv, int64_t s, int64_t b, int64_t heads,
                       int64_t groups, int64_t head_dim,
                       const DropoutSpec* dropout = nullptr);

// ---- Embeddings ----
// Vocab-parallel lookup: table[vocab_local, h] holds global rows
// [vocab_start, vocab_start + vocab_local); out[n, h] = table row of
// tokens[i] − vocab_start, or zeros when the token is outside the range
// (the TP all-reduce adds the shards).
void EmbeddingForward(const int32_t* tokens, const float* table, float* out,
                      int64_t n, int64_t h, int64_t vocab_start,
                      int64_t vocab_local);
// dtable[vocab_local, h] += dout rows of the in-range tokens (in row order).
void EmbeddingBackward(const int32_t* tokens, const float* dout, float* dtable,
                       int64_t n, int64_t h, int64_t vocab_start,
                       int64_t vocab_local);
// Learned absolute positions: x[n, h] += pos_table[si + pos_offset] for row
// si·b + bi; backward dpos += the matching dout rows.
void PositionEmbeddingForward(const float* pos_table, float* x, int64_t s,
                              int64_t b, int64_t h, int64_t pos_offset);
void PositionEmbeddingBackward(const float* dout, float* dpos_table, int64_t s,
                               int64_t b, int64_t h, int64_t pos_offset);

// ---- Vocab-parallel softmax cross-entropy, local pieces (the parallel
// layer all-reduces between them; Megatron cross_entropy.py) ----
// logits[n, vocab_local] of global columns [vocab_start, +vocab_local).
// Columns >= vocab_size (padding) are excluded from the softmax (treated as
// −inf), so the loss does not depend on how much padding tp needs.
// 1) row_max[n] = max over the local valid columns (−inf if none).
void CrossEntropyLocalMax(const float* logits, float* row_max, int64_t n,
                          int64_t vocab_local, int64_t vocab_start,
                          int64_t vocab_size);
// 2) given the global row_max: sum_exp[n] = Σ_local exp(logit − max);
//    target_logit[n] = logit of the target if local, else 0.
void CrossEntropyLocalSums(const float* logits, const int32_t* targets,
                           const float* row_max, float* sum_exp,
                           float* target_logit, int64_t n, int64_t vocab_local,
                           int64_t vocab_start, int64_t vocab_size);
// 3) loss[n] = log(sum_exp) + row_max − target_logit (global values).
// 4) backward: dlogits[n, vocab_local] = scale[i]·(softmax − onehot(target))
//    with softmax = exp(logit − max)/sum_exp; padding columns get 0.
void CrossEntropyBackward(const float* logits, const int32_t* targets,
                          const float* row_max, const float* sum_exp,
                          const float* scale, float* dlogits, int64_t n,
                          int64_t vocab_local, int64_t vocab_start,
                          int64_t vocab_size);

// ---- Hidden dropout (Megatron bias-dropout-add, embedding dropout) ----
// In place on x[rows, h]: local row r is global row g = first_row + r of the
// micro-batch [s·b] (position g / b of sample first_sample + g % b); element
// (r, j) is kept (scaled by 1/(1 − p)) iff keep(key, sample, position, j)
// (dropout_mask.h), else zeroed. The backward is the same call on the
// gradient. No-op when !d.active().
void HiddenDropout(float* x, int64_t rows, int64_t h, int64_t b,
                   const DropoutSpec& d);

// ---- Elementwise helpers ----
// y[count] += x[count]
void Add(const float* x, float* y, int64_t count);

// ---- AdamW (decoupled weight decay, bias-corrected; Megatron/apex
// FusedAdam adam_w_mode) over one contiguous range ----
// For each i: m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g²;
// p −= lr·( (m/(1−β1^step)) / (√(v/(1−β2^step)) + eps) + wd_i·p ),
// wd_i = weight_decay·decay_mask[i] (decay_mask may be null = all 1).
// `step` counts from 1.
void AdamWUpdate(float* param, const float* grad, float* m, float* v,
                 const float* decay_mask, int64_t count, float lr, float beta1,
                 float beta2, float eps, float weight_decay, int64_t step);

// Σ grad[i]² over a range in float64 (gradient clipping).
double SumSquares(const float* x, int64_t count);
// x[count] *= s
void Scale(float* x, int64_t count, float s);

}  // namespace meshtune::engine::cpu

#endif  // MESHTUNE_ENGINE_CPU_OPS_H_
