// Linear layers on cuBLASLt (CPU counterparts: LinearForward/LinearBackward
// in engine/cpu/ops.h, PyTorch/Megatron layout: weight [out, in]).
//
// Precision: bf16 inputs, weights and outputs, fp32 accumulation
// (CUBLAS_COMPUTE_32F); the weight gradient is accumulated straight into the
// fp32 main-grad buffer (bf16 A and B, fp32 C = D, beta = 1), as Megatron's
// gradient_accumulation_fusion does.
//
// Layout: our buffers are row-major, cuBLASLt's are column-major, so a
// row-major X[n, k] is handed over as the column-major Xᵀ[k, n] and every
// product is computed transposed: out = in·Wᵀ runs as outᵀ = W·inᵀ ("TN",
// the layout cuBLASLt is fastest at for bf16), din = dout·W as dinᵀ =
// Wᵀ·doutᵀ ("NN") and dW += doutᵀ·in as dWᵀ += inᵀ·dout ("NT").
//
// Epilogues: bias (CUBLASLT_EPILOGUE_BIAS) and bias + GELU with the
// pre-activation saved for the backward (CUBLASLT_EPILOGUE_GELU_AUX_BIAS)
// are fused into the GEMM; the bias gradient is a column-sum kernel.
//
// Algorithms: the heuristic's first choice for a (layout, shape, epilogue)
// is cached, so the per-call cost after the first is descriptor setup only.
#ifndef MESHTUNE_ENGINE_CUDA_KERNELS_LINEAR_H_
#define MESHTUNE_ENGINE_CUDA_KERNELS_LINEAR_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

// cuBLAS's recommendation for Hopper (cuBLAS docs, cublasSetWorkspace:
// 32 MiB); Ampere needs 4 MiB, so one size serves both.
inline constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;

class GemmContext {
 public:
  // Creates the cuBLASLt handle and the workspace on the current device.
  static StatusOr<std::unique_ptr<GemmContext>> Create(
      size_t workspace_bytes = kGemmWorkspaceBytes);
  ~GemmContext();
  GemmContext(const GemmContext&) = delete;
  GemmContext& operator=(const GemmContext&) = delete;

  // out[n, m] = in[n, k]·weight[m, k]ᵀ + bias[m] (bias may be null).
  Status LinearForward(const Bf16* in, const Bf16* weight, const Bf16* bias,
                       Bf16* out, int64_t n, int64_t k, int64_t m,
                       Stream stream);
  // pre_gelu[n, m] = in·weightᵀ + bias; out[n, m] = gelu(pre_gelu) (the
  // GELU of cuBLASLt's epilogue, the tanh approximation). Fused into the
  // GEMM when m is a multiple of 8 (cuBLASLt's alignment for the auxiliary
  // output), else a bias GEMM followed by the GELU kernel.
  Status LinearGeluForward(const Bf16* in, const Bf16* weight, const Bf16* bias,
                           Bf16* pre_gelu, Bf16* out, int64_t n, int64_t k,
                           int64_t m, Stream stream);
  // din[n, k] = dout[n, m]·weight[m, k] (skipped when din is null);
  // dweight[m, k] += dout[n, m]ᵀ·in[n, k] (fp32);
  // dbias[m] += Σ_rows dout (skipped when dbias is null).
  Status LinearBackward(const Bf16* dout, const Bf16* in, const Bf16* weight,
                        Bf16* din, float* dweight, float* dbias, int64_t n,
                        int64_t k, int64_t m, Stream stream);

  // Strided-batched row-major products, C[i] = alpha·op(A[i])·op(B[i]) for
  // i < batch: op(A) is [M, K] (A stored [K, M] when trans_a), op(B) is
  // [K, N] (B stored [N, K] when trans_b), C is [M, N]; every matrix is
  // dense (leading dimension = its stored column count) and matrix i starts
  // i·stride elements after the first. bf16 inputs, fp32 accumulation; C in
  // bf16 or fp32 (overwritten: beta = 0). Attention's QKᵀ, P·V and their
  // gradients (engine/cuda/kernels/attention.h).
  Status BatchedMatmul(bool trans_a, bool trans_b, int64_t m, int64_t n,
                       int64_t k, const Bf16* a, int64_t stride_a,
                       const Bf16* b, int64_t stride_b, Bf16* c,
                       int64_t stride_c, int64_t batch, float alpha,
                       Stream stream);
  Status BatchedMatmul(bool trans_a, bool trans_b, int64_t m, int64_t n,
                       int64_t k, const Bf16* a, int64_t stride_a,
                       const Bf16* b, int64_t stride_b, float* c,
                       int64_t stride_c, int64_t batch, float alpha,
                       Stream stream);

  // Distinct GEMM configurations whose algorithm is cached.
  int64_t cached_algorithms() const;

 private:
  struct Impl;
  explicit GemmContext(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_KERNELS_LINEAR_H_
