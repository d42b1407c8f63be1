// Causal self-attention on the GPU (CPU counterpart: AttentionForward /
// AttentionBackward in engine/cpu/ops.h, same qkv layout, GQA and scale).
//
// The unfused path, kept beside the fused FlashAttention
// (engine/cuda/kernels/flash_attention.h) that the model runs by default: the
// CUDA model uses this one only under MESHTUNE_CUDA_ATTENTION=unfused, and the
// flash tests compare against it. The heads are split into contiguous
// [b·heads, s, d] tensors (k and v repeated per query head of their group),
// QKᵀ and P·V run as strided-batched cuBLASLt GEMMs on the tensor cores, and
// a causal softmax kernel sits between them. The probabilities P [b·heads,
// s, s] (bf16) are the saved activation, as in Megatron without flash
// attention; memory is O(s²) per head.
//
// Numerics: scores and their gradient dP in fp32 (the GEMMs write fp32), P
// and dS stored in bf16, softmax statistics in fp32.
// Attention dropout (when `dropout` is given and active) drops the
// probabilities with the CPU op's mask (engine/cpu/dropout_mask.h): O =
// D(P)·V, P saved undropped, the mask regenerated in the backward.
#ifndef MESHTUNE_ENGINE_CUDA_KERNELS_ATTENTION_H_
#define MESHTUNE_ENGINE_CUDA_KERNELS_ATTENTION_H_

#include <cstdint>
#include <memory>

#include "engine/cpu/dropout_mask.h"
#include "engine/cuda/kernels/linear.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

class Attention {
 public:
  // Scratch for one shape (s, b, heads, groups, head_dim per tp rank) on
  // the current device: 8 head-split [b·heads, s, d] bf16 tensors, one fp32
  // and one bf16 [b·heads, s, s] score buffer. `gemm` is not owned.
  static StatusOr<std::unique_ptr<Attention>> Create(GemmContext* gemm,
                                                     int64_t s, int64_t b,
                                                     int64_t heads,
                                                     int64_t groups,
                                                     int64_t head_dim);

  // Elements of the saved probabilities: b·heads·s·s.
  int64_t probs_elements() const { return b_ * heads_ * s_ * s_; }

  // qkv[n, (heads + 2·groups)·d] (after RoPE) -> out[n, heads·d];
  // probs[b·heads, s, s] (caller-owned, row (bi·heads + j)·s + t, zero above
  // the diagonal) is written for the backward.
  Status Forward(const Bf16* qkv, Bf16* out, Bf16* probs, Stream stream,
                 const cpu::DropoutSpec* dropout = nullptr);
  // dout[n, heads·d] -> dqkv[n, (heads + 2·groups)·d] (overwritten); k and v
  // gradients summed over the query heads of each group.
  Status Backward(const Bf16* dout, const Bf16* qkv, const Bf16* probs,
                  Bf16* dqkv, Stream stream,
                  const cpu::DropoutSpec* dropout = nullptr);

 private:
  Attention() = default;
  Status SplitQkv(const Bf16* qkv, Stream stream);

  GemmContext* gemm_ = nullptr;
  int64_t s_ = 0, b_ = 0, heads_ = 0, groups_ = 0, d_ = 0;
  DeviceBuffer q_, k_, v_, o_;      // [b·heads, s, d] bf16
  DeviceBuffer dq_, dk_, dv_, do_;  // [b·heads, s, d] bf16
  DeviceBuffer scores_;             // [b·heads, s, s] fp32: S, then dP
  DeviceBuffer dscores_;            // [b·heads, s, s] bf16: D(P), then dS
};

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_KERNELS_ATTENTION_H_
