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

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_KERNELS_FLASH_ATTENTION_H_
