// LayerNorm and RMSNorm fused with the residual add, forward and backward
// (CPU counterparts: engine/cpu/norm.cc). One warp per row for the row
// statistics (h up to a few thousand: 32 lanes stride the row, fp32
// accumulation, two passes for the variance as the CPU op does); the weight
// and bias gradients are column sums over rows, done by a second kernel in
// which each thread owns one column of a chunk of rows (coalesced reads, one
// fp32 atomic per column per chunk).
#include <algorithm>
#include <cstdint>

#include "engine/cuda/kernels/kernel_util.cuh"
#include "engine/cuda/kernels/ops.h"

namespace meshtune::engine::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // warps per block in the row kernels
constexpr int kColumnThreads = 256;
constexpr int64_t kRowsPerChunk = 128;

// Reads row element j of the normalized input, forming and storing the
// residual sum when fused. Returns the (bf16-rounded) value normalized.
__device__ __forceinline__ float LoadInput(const Bf16* x, const Bf16* residual,
                                           Bf16* sum_out, int64_t i) {
  if (residual == nullptr) return Load(x, i);
  const float y = Round(Load(x, i) + Load(residual, i));
  Store(sum_out, i, y);
  return y;
}

// Source of the normalized input on the passes after the first one.
__device__ __forceinline__ const Bf16* InputOf(const Bf16* x,
                                               const Bf16* residual,
                                               const Bf16* sum_out) {
  return residual == nullptr ? x : sum_out;
}

__global__ void LayerNormForwardKernel(const Bf16* x, const Bf16* residual,
                                       Bf16* sum_out, const Bf16* weight,
                                       const Bf16* bias, Bf16* out,
                                       float* mean_out, float* rstd_out,
                                       int64_t n, int64_t h, float eps) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row =
      blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / kWarpSize;
  if (row >= n) return;
  const int64_t base = row * h;
  float sum = 0.0f;
  for (int64_t j = lane; j < h; j += kWarpSize) {
    sum += LoadInput(x, residual, sum_out, base + j);
  }
  const float mean = WarpSum(sum) / static_cast<float>(h);
  const Bf16* y = InputOf(x, residual, sum_out);
  float sq = 0.0f;
  for (int64_t j = lane; j < h; j += kWarpSize) {
    const float d = Load(y, base + j) - mean;
    sq += d * d;
  }
  const float rstd = rsqrtf(WarpSum(sq) / static_cast<float>(h) + eps);
  for (int64_t j = lane; j < h; j += kWarpSize) {
    const float xhat = (Load(y, base + j) - mean) * rstd;
    Store(out, base + j, xhat * Load(weight, j) + Load(bias, j));
  }
  if (lane == 0) {
    mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

__global__ void RmsNormForwardKernel(const Bf16* x, const Bf16* residual,
                                     Bf16* sum_out, const Bf16* weight,
                                     Bf16* out, float* rstd_out, int64_t n,
                                     int64_t h, float eps) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row =
      blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / kWarpSize;
  if (row >= n) return;
  const int64_t base = row * h;
  float sq = 0.0f;
  for (int64_t j = lane; j < h; j += kWarpSize) {
    const float v = LoadInput(x, residual, sum_out, base + j);
    sq += v * v;
  }
  const float rstd = rsqrtf(WarpSum(sq) / static_cast<float>(h) + eps);
  const Bf16* y = InputOf(x, residual, sum_out);
  for (int64_t j = lane; j < h; j += kWarpSize) {
    Store(out, base + j, Load(y, base + j) * rstd * Load(weight, j));
  }
  if (lane == 0) rstd_out[row] = rstd;
}

// dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) with g = dout·weight (LayerNorm);
// RMSNorm drops the mean(g) term and has mean = 0.
template <bool kLayerNorm>
__global__ void NormBackwardRowsKernel(const Bf16* dout, const Bf16* y,
                                       const Bf16* weight, const float* mean,
                                       const float* rstd, const Bf16* dresidual,
                                       Bf16* dx, int64_t n, int64_t h) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row =
      blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / kWarpSize;
  if (row >= n) return;
  const int64_t base = row * h;
  const float mu = kLayerNorm ? mean[row] : 0.0f;
  const float r = rstd[row];
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int64_t j = lane; j < h; j += kWarpSize) {
    const float g = Load(dout, base + j) * Load(weight, j);
    sum_g += g;
    sum_gx += g * (Load(y, base + j) - mu) * r;
  }
  const float inv_h = 1.0f / static_cast<float>(h);
  const float mean_g = kLayerNorm ? WarpSum(sum_g) * inv_h : 0.0f;
  const float mean_gx = WarpSum(sum_gx) * inv_h;
  for (int64_t j = lane; j < h; j += kWarpSize) {
    const float g = Load(dout, base + j) * Load(weight, j);
    const float xhat = (Load(y, base + j) - mu) * r;
    float d = r * (g - mean_g - xhat * mean_gx);
    if (dresidual != nullptr) d += Load(dresidual, base + j);
    Store(dx, base + j, d);
  }
}

// dweight[j] += Σ_rows dout·x̂, dbias[j] += Σ_rows dout (dbias may be null).
template <bool kLayerNorm>
__global__ void NormBackwardColumnsKernel(const Bf16* dout, const Bf16* y,
                                          const float* mean, const float* rstd,
                                          float* dweight, float* dbias,
                                          int64_t n, int64_t h) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (j >= h) return;
  // Chunks stride by gridDim.y (at most kMaxGridY): more than 8.4 M rows
  // would otherwise be an invalid launch.
  for (int64_t first = blockIdx.y * int64_t{kRowsPerChunk}; first < n;
       first += int64_t{gridDim.y} * kRowsPerChunk) {
    const int64_t last = min(n, first + kRowsPerChunk);
    float dw = 0.0f, db = 0.0f;
    for (int64_t row = first; row < last; ++row) {
      const float d = Load(dout, row * h + j);
      const float mu = kLayerNorm ? mean[row] : 0.0f;
      dw += d * (Load(y, row * h + j) - mu) * rstd[row];
      db += d;
    }
    atomicAdd(&dweight[j], dw);
    if (dbias != nullptr) atomicAdd(&dbias[j], db);
  }
}

unsigned RowBlocks(int64_t n) {
  return static_cast<unsigned>((n + kRowsPerBlock - 1) / kRowsPerBlock);
}

dim3 ColumnGrid(int64_t n, int64_t h) {
  return dim3(static_cast<unsigned>((h + kColumnThreads - 1) / kColumnThreads),
              static_cast<unsigned>(std::min<int64_t>(
                  kMaxGridY, (n + kRowsPerChunk - 1) / kRowsPerChunk)));
}

}  // namespace

Status LayerNormForward(const Bf16* x, const Bf16* residual, Bf16* sum_out,
                        const Bf16* weight, const Bf16* bias, Bf16* out,
                        float* mean, float* rstd, int64_t n, int64_t h,
                        float eps, Stream stream) {
  if (n == 0) return Status::Ok();
  LayerNormForwardKernel<<<RowBlocks(n), kRowsPerBlock * kWarpSize, 0,
                           ToCuda(stream)>>>(x, residual, sum_out, weight, bias,
                                             out, mean, rstd, n, h, eps);
  return LastError("layernorm_forward");
}

Status LayerNormBackward(const Bf16* dout, const Bf16* y, const Bf16* weight,
                         const float* mean, const float* rstd,
                         const Bf16* dresidual, Bf16* dx, float* dweight,
                         float* dbias, int64_t n, int64_t h, Stream stream) {
  if (n == 0) return Status::Ok();
  NormBackwardRowsKernel<true>
      <<<RowBlocks(n), kRowsPerBlock * kWarpSize, 0, ToCuda(stream)>>>(
          dout, y, weight, mean, rstd, dresidual, dx, n, h);
  MESHTUNE_RETURN_IF_ERROR(LastError("layernorm_backward"));
  NormBackwardColumnsKernel<true>
      <<<ColumnGrid(n, h), kColumnThreads, 0, ToCuda(stream)>>>(
          dout, y, mean, rstd, dweight, dbias, n, h);
  return LastError("layernorm_backward_weights");
}

Status RmsNormForward(const Bf16* x, const Bf16* residual, Bf16* sum_out,
                      const Bf16* weight, Bf16* out, float* rstd, int64_t n,
                      int64_t h, float eps, Stream stream) {
  if (n == 0) return Status::Ok();
  RmsNormForwardKernel<<<RowBlocks(n), kRowsPerBlock * kWarpSize, 0,
                         ToCuda(stream)>>>(x, residual, sum_out, weight, out,
                                           rstd, n, h, eps);
  return LastError("rmsnorm_forward");
}

Status RmsNormBackward(const Bf16* dout, const Bf16* y, const Bf16* weight,
                       const float* rstd, const Bf16* dresidual, Bf16* dx,
                       float* dweight, int64_t n, int64_t h, Stream stream) {
  if (n == 0) return Status::Ok();
  NormBackwardRowsKernel<false>
      <<<RowBlocks(n), kRowsPerBlock * kWarpSize, 0, ToCuda(stream)>>>(
          dout, y, weight, nullptr, rstd, dresidual, dx, n, h);
  MESHTUNE_RETURN_IF_ERROR(LastError("rmsnorm_backward"));
  NormBackwardColumnsKernel<false>
      <<<ColumnGrid(n, h), kColumnThreads, 0, ToCuda(stream)>>>(
          dout, y, nullptr, rstd, dweight, nullptr, n, h);
  return LastError("rmsnorm_backward_weights");
}

}  // namespace meshtune::engine::cuda
