// Causal attention of one query chunk against one key/value chunk, with its
// log-sum-exp, and the merge of such partial results: the pieces of context
// parallelism's ring attention (Megatron-Core / Transformer Engine
// AttnFuncWithCPAndKVP2P: each rank holds 2 of 2·cp sequence chunks, K/V
// travel around the ring, partial softmax results are merged by their
// log-sum-exp). CPU reference, conventions and packed qkv layout of
// engine/cpu/ops.h (AttentionForward); GQA; scale 1/√head_dim.
//
// Attention dropout (optional, `dropout` non-null and active): the masks of
// AttentionForward over the whole sequence of length `seq`, element (bi,
// head j, query position t, key position u) kept iff keep(key, first_sample
// + bi, (first_head + j)·seq + t, u) with GLOBAL positions t, u. A chunk's
// out is D(P)·V with P normalised within the chunk and lse undropped, so
// the log-sum-exp merge of the chunks' outs is the full dropped output; the
// backward regenerates the mask.
//
// A chunk covers the positions [pos0, pos0 + len) of every sequence of the
// micro-batch: rows [pos0·b, (pos0 + len)·b) of the full [s·b, ...] buffers,
// so a chunk is a contiguous block of rows.
//   q_qkv[sq·b, width]    packed rows of the query chunk (its q is read)
//   kv_qkv[sk·b, width]   packed rows of the key/value chunk (k and v)
//   out[sq·b, heads·d]    attention output of the query rows
//   lse[b, heads, sq]     log Σ_u exp(S[t, u]) over the keys the causal mask
//                         lets each query see (-inf when it sees none)
#ifndef MESHTUNE_ENGINE_CPU_ATTENTION_CHUNK_H_
#define MESHTUNE_ENGINE_CPU_ATTENTION_CHUNK_H_

#include <cstdint>

#include "engine/cpu/dropout_mask.h"

namespace meshtune::engine::cpu {

struct AttentionChunkShape {
  int64_t b = 1;  // micro-batch
  int64_t heads = 1;
  int64_t groups = 1;  // kv heads (GQA)
  int64_t head_dim = 1;
};

// out and lse (overwritten) of the query chunk [q_pos0, q_pos0 + sq)
// against the keys [k_pos0, k_pos0 + sk): query t sees key u iff
// u <= t (positions). out is normalised within this chunk (0 rows where
// nothing is seen).
void AttentionChunkForward(const float* q_qkv, const float* kv_qkv, int64_t sq,
                           int64_t q_pos0, int64_t sk, int64_t k_pos0,
                           const AttentionChunkShape& shape, float* out,
                           float* lse, const DropoutSpec* dropout = nullptr,
                           int64_t seq = 0);

// (out, lse) <- the attention over the union of both key sets: lse =
// log(e^lse + e^lse2), out = e^(lse_old - lse)·out + e^(lse2 - lse)·out2.
void AttentionMerge(float* out, float* lse, const float* out2,
                    const float* lse2, int64_t sq,
                    const AttentionChunkShape& shape);

// The backward of one (query chunk, key chunk) pair given the query rows'
// FINAL out and lse (after every merge) and dout: with P = exp(S - lse) and
// D = rowsum(dout ∘ out), dS = P ∘ (dout·Vᵀ - D); then (accumulated, +=)
//   dq_qkv's q part += scale·dS·K, dkv_qkv's k part += scale·dSᵀ·Q,
//   dkv_qkv's v part += Pᵀ·dout,
// summed over the heads of a kv group. Summing every pair's contributions
// gives AttentionBackward's dqkv. With dropout (same spec and seq as the
// forward) dout·Vᵀ and P in dV are masked and scaled, D stays
// rowsum(dout ∘ out).
void AttentionChunkBackward(
    const float* dout, const float* out, const float* lse, const float* q_qkv,
    const float* kv_qkv, int64_t sq, int64_t q_pos0, int64_t sk, int64_t k_pos0,
    const AttentionChunkShape& shape, float* dq_qkv, float* dkv_qkv,
    const DropoutSpec* dropout = nullptr, int64_t seq = 0);

}  // namespace meshtune::engine::cpu

#endif  // MESHTUNE_ENGINE_CPU_ATTENTION_CHUNK_H_
