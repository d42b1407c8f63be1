// Vocab-parallel softmax cross-entropy, local pieces (formula and sources:
// engine/cpu/cross_entropy.cc, after Megatron's cross_entropy.py; padding
// columns at or past vocab_size are excluded). One block per row, threads
// strided over the row's columns (coalesced), block reductions in fp32.
// The backward recomputes exp(logit − max) instead of reading stored
// probabilities, and may write the gradient over the logits in place: no
// [n, vocab] probability buffer exists (llm.c's fused classifier).
#include <algorithm>
#include <string>

#include "engine/cuda/kernels/kernel_util.cuh"
#include "engine/cuda/kernels/ops.h"

namespace meshtune::engine::cuda {
namespace {

constexpr int kThreads = 512;

__host__ __device__ __forceinline__ int64_t ValidColumns(int64_t vocab_local,
                                                         int64_t vocab_start,
                                                         int64_t vocab_size) {
  const int64_t valid = vocab_size - vocab_start;
  return valid < 0 ? 0 : (valid > vocab_local ? vocab_local : valid);
}

__global__ void LocalMaxKernel(const Bf16* logits, float* row_max,
                               int64_t vocab_local, int64_t valid) {
  __shared__ float scratch[kWarpSize];
  const int64_t row = blockIdx.x;
  const Bf16* logit_row = logits + row * vocab_local;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) {
    m = fmaxf(m, Load(logit_row, j));
  }
  m = BlockMax(m, scratch);
  if (threadIdx.x == 0) row_max[row] = m;
}

__global__ void LocalSumsKernel(const Bf16* logits, const int32_t* targets,
                                const float* row_max, float* sum_exp,
                                float* target_logit, int64_t vocab_local,
                                int64_t vocab_start, int64_t valid) {
  __shared__ float scratch[kWarpSize];
  const int64_t row = blockIdx.x;
  const Bf16* logit_row = logits + row * vocab_local;
  const float m = row_max[row];
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) {
    sum += expf(Load(logit_row, j) - m);
  }
  sum = BlockSum(sum, scratch);
  if (threadIdx.x == 0) {
    sum_exp[row] = sum;
    const int64_t local = static_cast<int64_t>(targets[row]) - vocab_start;
    target_logit[row] =
        (local >= 0 && local < valid) ? Load(logit_row, local) : 0.0f;
  }
}

__global__ void LossKernel(const float* row_max, const float* sum_exp,
                           const float* target_logit, float* loss, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) loss[i] = logf(sum_exp[i]) + row_max[i] - target_logit[i];
}

// Each element is read and then written by the same thread, so dlogits may
// alias logits.
__global__ void BackwardKernel(const Bf16* logits, const int32_t* targets,
                               const float* row_max, const float* sum_exp,
                               const float* scale, Bf16* dlogits,
                               int64_t vocab_local, int64_t vocab_start,
                               int64_t valid) {
  const int64_t row = blockIdx.x;
  const Bf16* logit_row = logits + row * vocab_local;
  Bf16* drow = dlogits + row * vocab_local;
  const float m = row_max[row];
  const float inv_sum = 1.0f / sum_exp[row];
  const float s = scale[row];
  const int64_t target = static_cast<int64_t>(targets[row]) - vocab_start;
  for (int64_t j = threadIdx.x; j < vocab_local; j += blockDim.x) {
    float d = 0.0f;
    if (j < valid) {
      d = expf(Load(logit_row, j) - m) * inv_sum;
      if (j == target) d -= 1.0f;
      d *= s;
    }
    Store(drow, j, d);
  }
}

Status CheckShapes(int64_t n, int64_t vocab_local, int64_t vocab_start,
                   int64_t vocab_size, const char* op) {
  if (n < 0 || vocab_local < 0 || vocab_start < 0 || vocab_size <= 0) {
    return Status::InvalidArgument(std::string(op) +
                                   ": negative size or empty vocabulary");
  }
  return Status::Ok();
}

__global__ void LossSumKernel(const float* loss, int64_t n, double* sum) {
  __shared__ float scratch[kWarpSize];
  float partial = 0.0f;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    partial += loss[i];
  }
  const float block_total = BlockSum(partial, scratch);
  if (threadIdx.x == 0) atomicAdd(sum, static_cast<double>(block_total));
}

}  // namespace

Status CrossEntropyLocalMax(const Bf16* logits, float* row_max, int64_t n,
                            int64_t vocab_local, int64_t vocab_start,
                            int64_t vocab_size, Stream stream) {
  MESHTUNE_RETURN_IF_ERROR(CheckShapes(n, vocab_local, vocab_start, vocab_size,
                                       "cross_entropy_local_max"));
  if (n == 0) return Status::Ok();
  LocalMaxKernel<<<static_cast<unsigned>(n), kThreads, 0, ToCuda(stream)>>>(
      logits, row_max, vocab_local,
      ValidColumns(vocab_local, vocab_start, vocab_size));
  return LastError("cross_entropy_local_max");
}

Status CrossEntropyLocalSums(const Bf16* logits, const int32_t* targets,
                             const float* row_max, float* sum_exp,
                             float* target_logit, int64_t n,
                             int64_t vocab_local, int64_t vocab_start,
                             int64_t vocab_size, Stream stream) {
  MESHTUNE_RETURN_IF_ERROR(CheckShapes(n, vocab_local, vocab_start, vocab_size,
                                       "cross_entropy_local_sums"));
  if (n == 0) return Status::Ok();
  LocalSumsKernel<<<static_cast<unsigned>(n), kThreads, 0, ToCuda(stream)>>>(
      logits, targets, row_max, sum_exp, target_logit, vocab_local, vocab_start,
      ValidColumns(vocab_local, vocab_start, vocab_size));
  return LastError("cross_entropy_local_sums");
}

Status CrossEntropyLoss(const float* row_max, const float* sum_exp,
                        const float* target_logit, float* loss, int64_t n,
                        Stream stream) {
  if (n == 0) return Status::Ok();
  LossKernel<<<GridFor(n, 256), 256, 0, ToCuda(stream)>>>(
      row_max, sum_exp, target_logit, loss, n);
  return LastError("cross_entropy_loss");
}

Status CrossEntropyLossSum(const float* loss, int64_t n, double* loss_sum,
                           Stream stream) {
  if (n == 0) return Status::Ok();
  // At most 256 blocks: a few rows per thread keep the fp32 partials short.
  const unsigned blocks =
      static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 256));
  LossSumKernel<<<blocks, 256, 0, ToCuda(stream)>>>(loss, n, loss_sum);
  return LastError("cross_entropy_loss_sum");
}

Status CrossEntropyBackward(const Bf16* logits, const int32_t* targets,
                            const float* row_max, const float* sum_exp,
                            const float* scale, Bf16* dlogits, int64_t n,
                            int64_t vocab_local, int64_t vocab_start,
                            int64_t vocab_size, Stream stream) {
  MESHTUNE_RETURN_IF_ERROR(CheckShapes(n, vocab_local, vocab_start, vocab_size,
                                       "cross_entropy_backward"));
  if (n == 0) return Status::Ok();
  BackwardKernel<<<static_cast<unsigned>(n), kThreads, 0, ToCuda(stream)>>>(
      logits, targets, row_max, sum_exp, scale, dlogits, vocab_local,
      vocab_start, ValidColumns(vocab_local, vocab_start, vocab_size));
  return LastError("cross_entropy_backward");
}

}  // namespace meshtune::engine::cuda
