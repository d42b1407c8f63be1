// Ring attention over the context-parallel group: causal self-attention of
// a sequence whose positions are spread over cp ranks (sequence_chunks.h),
// with Transformer Engine's P2P algorithm (transformer_engine/pytorch/
// attention.py, AttnFuncWithCPAndKVP2P; Megatron-Core uses it through
// TEDotProductAttention when context_parallel_size > 1). CPU reference over
// the chunk pieces of engine/cpu/attention_chunk.h.
//
// Forward. Each rank starts from the q, k and v of its own 2 chunks. For
// step i = 0 .. cp−1 it holds the K/V of rank (r − i) mod cp: before
// computing it sends them on to rank r+1 (buffered Send, engine/comm/
// communicator.h) and after computing it receives the next ones from rank
// r−1, so K/V travel cp−1 hops. Each (query chunk, key chunk) pair that the
// causal mask does not hide entirely runs cpu::AttentionChunkForward with
// the chunks' GLOBAL positions (the mask inside a pair is position-based),
// and the partial results are merged by log-sum-exp (cpu::AttentionMerge).
// The result is the full causal attention of the local queries.
//
// Backward. Same ring: at step i the rank holds K/V of rank (r − i) mod cp
// and the partial dK/dV of those keys accumulated by the ranks they already
// visited. It sends the K/V on before computing (steps < cp−1), adds its
// queries' contributions with cpu::AttentionChunkBackward (given the FINAL
// out and lse of its queries), then sends the partial dK/dV on after them;
// after step cp−1 the dK/dV reach their owner (one more hop, cp hops in
// all). dQ stays local.
//
// Messages (all on `cp`, recorded in the CommLog under its name, "cp"):
//   K/V   [s_local·b, 2·groups·d]  k then v of each local row
//   dK/dV [s_local·b, 2·groups·d]  same layout
// Forward: cp−1 K/V sends and receives per rank; backward: cp−1 K/V and cp
// dK/dV sends and receives.
//
// Shapes (per tensor-parallel rank; d = head_dim, width = (heads +
// 2·groups)·d, c = chunk_len() = s/(2·cp), s_local = 2·c; rows
// sequence-major, local chunk 0's c·b rows first):
//   qkv  [s_local·b, width]       packed q|k|v after RoPE (engine/cpu/ops.h)
//   out  [s_local·b, heads·d]     attention output
//   lse  [2, b, heads, c]         natural-log Σ exp(scaled scores) per query
//                                 row, local chunk 0 then chunk 1
//   dout [s_local·b, heads·d], dqkv [s_local·b, width] (overwritten)
// Scale 1/√d; GQA (heads % groups == 0). Attention dropout (optional
// `dropout`): every pair draws cpu::AttentionForward's masks of the whole
// sequence at the pair's global positions (attention_chunk.h), so the ring
// drops exactly what one rank drops; the backward regenerates them.
#ifndef MESHTUNE_ENGINE_CONTEXT_PARALLEL_RING_ATTENTION_H_
#define MESHTUNE_ENGINE_CONTEXT_PARALLEL_RING_ATTENTION_H_

#include <cstdint>

#include "engine/comm/communicator.h"
#include "engine/context_parallel/sequence_chunks.h"
#include "engine/cpu/attention_chunk.h"

namespace meshtune::engine::context_parallel {

// Floats of one rank's lse buffer: 2·b·heads·c.
int64_t RingLseCount(const SequenceChunks& chunks,
                     const cpu::AttentionChunkShape& shape);

// out and lse of the local queries against every key of the sequence.
// REQUIRES: cp->size() == chunks.cp() > 1, cp->rank() == chunks.rank(); every
// rank of `cp` calls it for the same micro-batch (collective).
void RingAttentionForward(const float* qkv, const SequenceChunks& chunks,
                          const cpu::AttentionChunkShape& shape,
                          Communicator* cp, float* out, float* lse,
                          const cpu::DropoutSpec* dropout = nullptr);

// dqkv of the local rows given dout and the forward's out and lse (and its
// dropout spec). Collective like the forward.
void RingAttentionBackward(const float* dout, const float* qkv,
                           const float* out, const float* lse,
                           const SequenceChunks& chunks,
                           const cpu::AttentionChunkShape& shape,
                           Communicator* cp, float* dqkv,
                           const cpu::DropoutSpec* dropout = nullptr);

}  // namespace meshtune::engine::context_parallel

#endif  // MESHTUNE_ENGINE_CONTEXT_PARALLEL_RING_ATTENTION_H_
