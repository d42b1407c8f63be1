// Fused causal self-attention on the GPU, FlashAttention-2 style (Dao 2023,
// "FlashAttention-2"): the attention the CUDA model uses. Same contract as
// the unfused Attention (engine/cuda/kernels/attention.h) and the CPU op
// (AttentionForward / AttentionBackward in engine/cpu/ops.h): qkv after
// RoPE, GQA (query head j reads kv group j / (heads/groups)), scale
// 1/sqrt(d), causal; but the saved activation is the log-sum-exp of each
// score row, O(s) memory, instead of the probabilities P (O(s²)).
//
// Numerics:
// - bf16: q, k, v, dO and the outputs out and dqkv (storage); the MMA
//   operands P (unnormalized, exp(S − running max)) and dS, rounded to bf16
//   right before the tensor cores read them (as P and dS are stored in
//   bf16 by the unfused path).
// - fp32: every MMA accumulation (nvcuda::wmma bf16 16x16x16, fp32
//   accumulate), the scores S and their gradient dP, the running max and
//   sum of the online softmax, the output accumulator O (rescaled in fp32,
//   divided by the sum once at the end), the saved log-sum-exp L, the
//   pre-pass D = rowsum(dO ∘ O), the dK/dV accumulators and the dQ
//   accumulator (fp32 atomics across key tiles, scaled and rounded once).
//
// Determinism: out, L, dK and dV are written by one block each in a fixed
// order (bit-identical run to run); dQ sums the key tiles' contributions
// with fp32 atomicAdd, so its last bits can vary between runs.
//
// Attention dropout (when `dropout` is given and active) draws the CPU op's
// mask (engine/cpu/dropout_mask.h) for element (sample first_sample + bi,
// row (first_head + j)·s + t, column u), the indexing of the CPU op and the
// unfused kernel: O = D(P)·V with the softmax sum taken over the undropped
// P; the backward regenerates the mask.
//
// Limits: head_dim a multiple of 16 up to 128 (the wmma tile and the shared
// memory budget); any s (tail tiles masked); sm_80 or newer (bf16 wmma).
#ifndef MESHTUNE_ENGINE_CUDA_KERNELS_FLASH_ATTENTION_H_
#define MESHTUNE_ENGINE_CUDA_KERNELS_FLASH_ATTENTION_H_

#include <cstdint>
#include <memory>

#include "engine/cpu/dropout_mask.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

class FlashAttention {
 public:
  // Largest head_dim the kernels take (their shared-memory tiles are sized
  // for it: 160 KiB per backward block at 128).
  static constexpr int64_t kMaxHeadDim = 128;

  // Whether the kernels take the shape (s, b, heads, groups, head_dim per
  // tp rank): positive sizes, heads a multiple of groups, head_dim a
  // multiple of 16 up to kMaxHeadDim, b·heads ≤ 65535 (the grid). Needs no
  // device.
  static Status CheckShape(int64_t s, int64_t b, int64_t heads, int64_t groups,
                           int64_t head_dim);

  // Checks the shape (CheckShape) and the
  // current device (shared memory per block), and allocates the backward's
  // scratch: the fp32 dQ accumulator [b·heads, s, d] and D [b·heads, s].
  // Shape errors come back before the device is touched.
  static StatusOr<std::unique_ptr<FlashAttention>> Create(int64_t s, int64_t b,
                                                          int64_t heads,
                                                          int64_t groups,
                                                          int64_t head_dim);

  // Elements of the saved log-sum-exp (fp32): b·heads·s.
  int64_t lse_elements() const { return b_ * heads_ * s_; }

  // qkv[n, (heads + 2·groups)·d] bf16 (n = s·b, row si·b + bi) -> out[n,
  // heads·d] bf16 (head j in columns j·d ..); lse[b·heads, s] fp32 (row
  // bi·heads + j, column t: log Σ_{u ≤ t} exp(scale·q_t·k_u)) is written for
  // the backward. All pointers 16-byte aligned (device allocations are).
  Status Forward(const Bf16* qkv, Bf16* out, float* lse, Stream stream,
                 const cpu::DropoutSpec* dropout = nullptr);
  // dout[n, heads·d], with qkv, out and lse of the forward -> dqkv[n,
  // (heads + 2·groups)·d] (overwritten); k and v gradients summed over the
  // query heads of each group. `dropout` must be the forward's.
  Status Backward(const Bf16* dout, const Bf16* qkv, const Bf16* out,
                  const float* lse, Bf16* dqkv, Stream stream,
                  const cpu::DropoutSpec* dropout = nullptr);

 private:
  FlashAttention() = default;

  int64_t s_ = 0, b_ = 0, heads_ = 0, groups_ = 0, d_ = 0;
  DeviceBuffer dq_;    // [b·heads, s, d] fp32: dQ accumulator (unscaled)
  DeviceBuffer drow_;  // [b·heads, s] fp32: D = rowsum(dO ∘ O)
};

// The flash kernels' siblings on one (query chunk, key chunk) pair: the pieces
// of context parallelism's ring attention (Transformer Engine
// AttnFuncWithCPAndKVP2P; Megatron-Core's TEDotProductAttention with
// context_parallel_size > 1), with exactly the contract of
// cpu::AttentionChunkForward / AttentionMerge / AttentionChunkBackward
// (engine/cpu/attention_chunk.h) in this file's numerics: bf16 q, k, v,
// dout and the final out; fp32 chunk outputs, lse and every accumulator.
//
// A chunk covers positions [pos0, pos0 + len) of every sequence of the
// micro-batch: rows t·b + bi (t < len) of its buffers; query t (global
// pos0 + t) sees key u iff kv.pos0 + u <= q.pos0 + t. The buffers may have
// any row stride (a multiple of 8 elements; pointers 16-byte aligned): q
// inside packed qkv rows, k and v inside the [rows, 2·groups·d] K/V blocks
// the ring passes on. Attention dropout draws the whole sequence's masks
// (length `seq`) at global positions, as the CPU chunk op does.
class FlashChunkAttention {
 public:
  // Query rows: head j's q of row t·b + bi at q + (t·b + bi)·ld + j·d.
  struct QueryChunk {
    const Bf16* q = nullptr;
    int64_t ld = 0;  // elements per row
    int64_t len = 0, pos0 = 0;
  };
  // Key/value rows: group g's k (v) of row u·b + bi at k (v) + (u·b + bi)·ld
  // + g·d.
  struct KvChunk {
    const Bf16* k = nullptr;
    const Bf16* v = nullptr;
    int64_t ld = 0;
    int64_t len = 0, pos0 = 0;
  };

  // Chunks of at most max_len positions of a sequence of `seq` positions,
  // per tp rank (b, heads, groups, head_dim as FlashAttention::CheckShape
  // takes them). Allocates the backward's D [b·heads, max_len] (fp32).
  static StatusOr<std::unique_ptr<FlashChunkAttention>> Create(
      int64_t seq, int64_t max_len, int64_t b, int64_t heads, int64_t groups,
      int64_t head_dim);

  // out [q.len·b, heads·d] fp32 and lse [b·heads, q.len] fp32 (overwritten):
  // the attention of the query chunk over the key chunk only, normalised
  // within it; a row that sees no key gets 0 and −inf.
  Status Forward(const QueryChunk& q, const KvChunk& kv, float* out, float* lse,
                 Stream stream,
                 const cpu::DropoutSpec* dropout = nullptr) const;
  // cpu::AttentionMerge: (out, lse) <- the attention over both key sets, all
  // fp32: out [sq·b, heads·d], lse [b·heads, sq].
  static Status Merge(float* out, float* lse, const float* out2,
                      const float* lse2, int64_t sq, int64_t b, int64_t heads,
                      int64_t head_dim, Stream stream);
  // The pair's gradients given the query rows' FINAL dout and out ([q.len·b,
  // heads·d] bf16) and lse ([b·heads, q.len] fp32), accumulated (+=) in
  // fp32: dq [q.len·b, heads·d] += scale·dS·K; dk, dv (group g of key row u
  // at + (u·b + bi)·dkv_ld + g·d) += scale·dSᵀ·Q and D(P)ᵀ·dout, summed over
  // the group's heads. `dropout` must be the forward's.
  Status Backward(const Bf16* dout, const Bf16* out, const float* lse,
                  const QueryChunk& q, const KvChunk& kv, float* dq, float* dk,
                  float* dv, int64_t dkv_ld, Stream stream,
                  const cpu::DropoutSpec* dropout = nullptr);

 private:
  FlashChunkAttention() = default;
  Status CheckChunks(const QueryChunk& q, const KvChunk& kv) const;

  int64_t seq_ = 0, max_len_ = 0, b_ = 0, heads_ = 0, groups_ = 0, d_ = 0;
  DeviceBuffer drow_;  // [b·heads, max_len] fp32: D = rowsum(dO ∘ O)
};

// Row-block helpers of the ring (device buffers, ordered on `stream`):
// dst[r·dst_ld + c] = bf16(src[r·src_ld + c]) for r < rows, c < cols.
Status CastRowsToBf16(const float* src, int64_t src_ld, Bf16* dst,
                      int64_t dst_ld, int64_t rows, int64_t cols,
                      Stream stream);
// dst[r·dst_ld + c] = src[r·src_ld + c] (bf16, e.g. the k|v columns of qkv).
Status CopyRows(const Bf16* src, int64_t src_ld, Bf16* dst, int64_t dst_ld,
                int64_t rows, int64_t cols, Stream stream);
// data[count] = 0.
Status ZeroFloats(float* data, int64_t count, Stream stream);

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_KERNELS_FLASH_ATTENTION_H_
