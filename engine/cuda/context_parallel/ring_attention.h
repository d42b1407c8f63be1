// Ring attention on the GPU over the context-parallel group: the CPU ring
// of engine/context_parallel/ring_attention.h (Transformer Engine's
// AttnFuncWithCPAndKVP2P, which Megatron-Core runs through
// TEDotProductAttention when context_parallel_size > 1) on the flash chunk
// kernels (engine/cuda/kernels/flash_attention.h FlashChunkAttention) and a
// DeviceCommunicator's Send/Recv.
//
// Forward. The rank holds 2 chunks of c = s/(2·cp) positions
// (engine/context_parallel/sequence_chunks.h). At step i = 0 .. cp−1 it
// holds the K/V of rank (r − i) mod cp; for i < cp−1 it sends them to rank
// r+1 and receives the next ones from rank r−1 in one group (GroupStart/
// GroupEnd: NCCL's send may wait for its receive) before computing. Each
// (query chunk, key chunk) pair the causal mask does not hide entirely
// runs FlashChunkAttention::Forward at the chunks' global positions; a
// query chunk's first pair writes the running fp32 out and lse, every
// later one is merged in by log-sum-exp (FlashChunkAttention::Merge). The
// fp32 out is rounded to bf16 once at the end.
//
// Backward. Same ring with the FINAL out and lse: at step i the rank holds
// K/V of rank (r − i) mod cp and the fp32 partial dK/dV of those keys from
// the ranks they visited before; it adds its queries' contributions
// (FlashChunkAttention::Backward; dQ accumulates locally in fp32), then
// sends the partial dK/dV to rank r+1 and receives the next from rank r−1
// (one group). After step cp−1 what arrives is this rank's own keys'
// complete dK/dV (cp hops). dQ, dK and dV are rounded to bf16 once.
//
// Messages (on `cp`, every step's send and receive in one group):
//   K/V   bf16 [s_local·b, 2·groups·d]  k then v of each local row
//   dK/dV fp32 [s_local·b, 2·groups·d]  same layout
// Forward: cp−1 K/V sends and receives per rank; backward: cp−1 K/V and cp
// dK/dV sends and receives. All work is on the legacy default stream.
//
// Shapes (per tp rank; d = head_dim, width = (heads + 2·groups)·d,
// s_local = 2·c, rows sequence-major, local chunk 0's c·b rows first):
//   qkv  bf16 [s_local·b, width]   packed q|k|v after RoPE
//   out  bf16 [s_local·b, heads·d]
//   lse  fp32 [2, b·heads, c]      local chunk 0's rows, then chunk 1's
//   dout bf16 [s_local·b, heads·d], dqkv bf16 [s_local·b, width]
//                                  (overwritten)
// Attention dropout: the whole sequence's masks at global positions
// (cpu::AttentionChunkForward's), so the ring drops what one rank drops.
#ifndef MESHTUNE_ENGINE_CUDA_CONTEXT_PARALLEL_RING_ATTENTION_H_
#define MESHTUNE_ENGINE_CUDA_CONTEXT_PARALLEL_RING_ATTENTION_H_

#include <cstdint>
#include <memory>

#include "engine/context_parallel/sequence_chunks.h"
#include "engine/cpu/dropout_mask.h"
#include "engine/cuda/comm/device_communicator.h"
#include "engine/cuda/kernels/flash_attention.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

class DeviceRingAttention {
 public:
  // Whether the ring takes the shape (no device needed): cp > 1, the flash
  // kernels' limits (FlashAttention::CheckShape) at one chunk of
  // s/(2·cp) positions, and a chunk's rows keep the K/V blocks 16-byte
  // aligned (always: head_dim is a multiple of 16).
  static Status CheckShape(const context_parallel::SequenceChunks& chunks,
                           int64_t b, int64_t heads, int64_t groups,
                           int64_t head_dim);
  // `cp` (not owned, outlives this): the device communicator of the "cp"
  // group, size chunks.cp() and rank chunks.rank(). Allocates the K/V and
  // dK/dV messages (two each), the fp32 running output, a pair's output and
  // the dQ accumulator.
  static StatusOr<std::unique_ptr<DeviceRingAttention>> Create(
      const context_parallel::SequenceChunks& chunks, int64_t b, int64_t heads,
      int64_t groups, int64_t head_dim, DeviceCommunicator* cp);

  // This rank's chunks (positions of the local rows).
  const context_parallel::SequenceChunks& chunks() const { return chunks_; }
  // Elements of the saved lse: 2·b·heads·c = b·heads·s_local.
  int64_t lse_elements() const { return 2 * b_ * heads_ * c_; }

  // Collective over cp: every rank calls it for the same micro-batch.
  Status Forward(const Bf16* qkv, Bf16* out, float* lse,
                 const cpu::DropoutSpec* dropout = nullptr);
  // dqkv from dout and the forward's qkv, out and lse. Collective.
  Status Backward(const Bf16* dout, const Bf16* qkv, const Bf16* out,
                  const float* lse, Bf16* dqkv,
                  const cpu::DropoutSpec* dropout = nullptr);

 private:
  explicit DeviceRingAttention(const context_parallel::SequenceChunks& chunks)
      : chunks_(chunks) {}
  // The K/V block `kv` [s_local·b, 2·groups·d] of rank src's chunk ki.
  FlashChunkAttention::KvChunk KvOf(const Bf16* kv, int src, int ki) const;
  FlashChunkAttention::QueryChunk QueryOf(const Bf16* qkv, int qi) const;
  // Sends `send` to rank r+1 and receives `recv` from rank r−1, grouped.
  template <typename T>
  Status Exchange(const T* send, T* recv, int64_t count);

  context_parallel::SequenceChunks chunks_;
  int64_t b_ = 0, heads_ = 0, groups_ = 0, d_ = 0, c_ = 0;
  DeviceCommunicator* cp_ = nullptr;
  std::unique_ptr<FlashChunkAttention> flash_;
  DeviceBuffer kv_[2];     // bf16 [s_local·b, 2·groups·d]: held, incoming
  DeviceBuffer dkv_[2];    // fp32 [s_local·b, 2·groups·d]: partial, incoming
  DeviceBuffer out32_;     // fp32 [s_local·b, heads·d]: running out, then dQ
  DeviceBuffer part_;      // fp32 [c·b, heads·d]: one pair's out
  DeviceBuffer part_lse_;  // fp32 [b·heads, c]: one pair's lse
};

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_CONTEXT_PARALLEL_RING_ATTENTION_H_
