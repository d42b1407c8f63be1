// MoE token rows on the GPU (ops.h "MoE token rows"): the gathers and
// weighted sums of Megatron-Core's moe_utils.permute / unpermute, over
// index arrays the host-side router built. Memory-bound: one pass over the
// rows; the weighted sums accumulate in fp32 and round once.
#include "engine/cuda/kernels/kernel_util.cuh"
#include "engine/cuda/kernels/ops.h"

namespace meshtune::engine::cuda {
namespace {

constexpr int kThreads = 256;

// One block per output row (grid-strided over rows), threads over h.
__global__ void GatherRowsKernel(const Bf16* x, const int32_t* token, Bf16* out,
                                 int64_t m, int64_t h) {
  for (int64_t r = blockIdx.x; r < m; r += gridDim.x) {
    const Bf16* src = x + int64_t{token[r]} * h;
    Bf16* dst = out + r * h;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
      dst[j] = src[j];
    }
  }
}

__global__ void CombineRowsKernel(const Bf16* rows, const int32_t* row_of,
                                  const float* w, Bf16* out, int64_t n,
                                  int64_t k, int64_t h) {
  for (int64_t t = blockIdx.x; t < n; t += gridDim.x) {
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
      float acc = 0.0f;
      for (int64_t c = t * k; c < (t + 1) * k; ++c) {
        const int32_t r = row_of[c];
        if (r < 0) continue;
        const float weight = w != nullptr ? w[c] : 1.0f;
        acc += weight * Load(rows, int64_t{r} * h + j);
      }
      Store(out, t * h + j, acc);
    }
  }
}

__global__ void CombineRowsBackwardKernel(const Bf16* dout, const Bf16* rows,
                                          const int32_t* choice, const float* w,
                                          Bf16* drows, float* dw, int64_t m,
                                          int64_t k, int64_t h) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < m; r += gridDim.x) {
    const int64_t c = choice[r];
    const int64_t t = c / k;
    const float weight = w[c];
    float dot = 0.0f;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
      const float g = Load(dout, t * h + j);
      dot += g * Load(rows, r * h + j);
      Store(drows, r * h + j, weight * g);
    }
    dot = BlockSum(dot, scratch);
    if (threadIdx.x == 0) dw[c] = dot;
  }
}

unsigned RowBlocks(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(rows, 65535LL * 8));
}

}  // namespace

Status GatherRows(const Bf16* x, const int32_t* token, Bf16* out, int64_t m,
                  int64_t h, Stream stream) {
  if (m == 0 || h == 0) return Status::Ok();
  GatherRowsKernel<<<RowBlocks(m), kThreads, 0, ToCuda(stream)>>>(x, token, out,
                                                                  m, h);
  return LastError("gather_rows");
}

Status CombineRows(const Bf16* rows, const int32_t* row_of, const float* w,
                   Bf16* out, int64_t n, int64_t k, int64_t h, Stream stream) {
  if (n == 0 || h == 0) return Status::Ok();
  CombineRowsKernel<<<RowBlocks(n), kThreads, 0, ToCuda(stream)>>>(
      rows, row_of, w, out, n, k, h);
  return LastError("combine_rows");
}

Status CombineRowsBackward(const Bf16* dout, const Bf16* rows,
                           const int32_t* choice, const float* w, Bf16* drows,
                           float* dw, int64_t m, int64_t k, int64_t h,
                           Stream stream) {
  if (m == 0) return Status::Ok();
  CombineRowsBackwardKernel<<<RowBlocks(m), kThreads, 0, ToCuda(stream)>>>(
      dout, rows, choice, w, drows, dw, m, k, h);
  return LastError("combine_rows_backward");
}

}  // namespace meshtune::engine::cuda
