// GELU (tanh approximation) and SwiGLU, forward and backward (CPU
// counterparts and the formulas' sources: engine/cpu/activation.cc).
// Elementwise in fp32 on bf16 storage; tanhf/expf, not the fast intrinsics,
// so the only difference from the CPU op is the bf16 rounding of the result.
#include "engine/cuda/kernels/kernel_util.cuh"
#include "engine/cuda/kernels/ops.h"

namespace meshtune::engine::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kGeluCoeff = 0.044715f;
constexpr float kSqrt2OverPi = 0.7978845608028654f;

__device__ __forceinline__ float Sigmoid(float a) {
  return 1.0f / (1.0f + expf(-a));
}

__global__ void GeluForwardKernel(const Bf16* x, Bf16* out, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = Load(x, i);
    const float inner = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
    Store(out, i, 0.5f * v * (1.0f + tanhf(inner)));
  }
}

__global__ void GeluBackwardKernel(const Bf16* dout, const Bf16* x, Bf16* dx,
                                   int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = Load(x, i);
    const float t = tanhf(kSqrt2OverPi * (v + kGeluCoeff * v * v * v));
    const float dinner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * v * v);
    const float grad = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dinner;
    Store(dx, i, Load(dout, i) * grad);
  }
}

// Element (row i, column j) of the [n, f] output; gate at in[i, j], up at
// in[i, f + j].
__global__ void SwigluForwardKernel(const Bf16* in, Bf16* out, int64_t n,
                                    int64_t f) {
  const int64_t count = n * f;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < count;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = e / f, j = e % f;
    const float gate = Load(in, i * 2 * f + j);
    const float up = Load(in, i * 2 * f + f + j);
    Store(out, e, gate * Sigmoid(gate) * up);
  }
}

__global__ void SwigluBackwardKernel(const Bf16* dout, const Bf16* in,
                                     Bf16* din, int64_t n, int64_t f) {
  const int64_t count = n * f;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < count;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = e / f, j = e % f;
    const float a = Load(in, i * 2 * f + j);
    const float up = Load(in, i * 2 * f + f + j);
    const float d = Load(dout, e);
    const float sig = Sigmoid(a);
    Store(din, i * 2 * f + j, d * up * sig * (1.0f + a * (1.0f - sig)));
    Store(din, i * 2 * f + f + j, d * a * sig);
  }
}

}  // namespace

Status GeluForward(const Bf16* x, Bf16* out, int64_t count, Stream stream) {
  if (count == 0) return Status::Ok();
  GeluForwardKernel<<<GridFor(count, kThreads), kThreads, 0, ToCuda(stream)>>>(
      x, out, count);
  return LastError("gelu_forward");
}

Status GeluBackward(const Bf16* dout, const Bf16* x, Bf16* dx, int64_t count,
                    Stream stream) {
  if (count == 0) return Status::Ok();
  GeluBackwardKernel<<<GridFor(count, kThreads), kThreads, 0, ToCuda(stream)>>>(
      dout, x, dx, count);
  return LastError("gelu_backward");
}

Status SwigluForward(const Bf16* in, Bf16* out, int64_t n, int64_t f,
                     Stream stream) {
  if (n * f == 0) return Status::Ok();
  SwigluForwardKernel<<<GridFor(n * f, kThreads), kThreads, 0,
                        ToCuda(stream)>>>(in, out, n, f);
  return LastError("swiglu_forward");
}

Status SwigluBackward(const Bf16* dout, const Bf16* in, Bf16* din, int64_t n,
                      int64_t f, Stream stream) {
  if (n * f == 0) return Status::Ok();
  SwigluBackwardKernel<<<GridFor(n * f, kThreads), kThreads, 0,
                         ToCuda(stream)>>>(dout, in, din, n, f);
  return LastError("swiglu_backward");
}

}  // namespace meshtune::engine::cuda
