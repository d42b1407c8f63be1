// Elementwise ops: residual add, gradient scaling, fp32 -> bf16 weight copy.
// Grid-stride loops: bandwidth-bound, one pass over the data.
#include "engine/cuda/kernels/kernel_util.cuh"
#include "engine/cuda/kernels/ops.h"

namespace meshtune::engine::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void AddKernel(const Bf16* x, Bf16* y, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    Store(y, i, Load(y, i) + Load(x, i));
  }
}

__global__ void ScaleKernel(float* x, int64_t count, float s) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    x[i] *= s;
  }
}

__global__ void CastKernel(const float* src, Bf16* dst, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    Store(dst, i, src[i]);
  }
}

}  // namespace

Status Add(const Bf16* x, Bf16* y, int64_t count, Stream stream) {
  if (count == 0) return Status::Ok();
  AddKernel<<<GridFor(count, kThreads), kThreads, 0, ToCuda(stream)>>>(x, y,
                                                                       count);
  return LastError("add");
}

Status Scale(float* x, int64_t count, float s, Stream stream) {
  if (count == 0) return Status::Ok();
  ScaleKernel<<<GridFor(count, kThreads), kThreads, 0, ToCuda(stream)>>>(
      x, count, s);
  return LastError("scale");
}

Status CastToBf16(const float* src, Bf16* dst, int64_t count, Stream stream) {
  if (count == 0) return Status::Ok();
  CastKernel<<<GridFor(count, kThreads), kThreads, 0, ToCuda(stream)>>>(
      src, dst, count);
  return LastError("cast_to_bf16");
}

}  // namespace meshtune::engine::cuda
