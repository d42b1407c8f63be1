// Multi-tensor AdamW (formula: engine/cpu/adamw.cc, Megatron/apex FusedAdam
// in adam_w_mode): every parameter tensor updated by one launch per group of
// kMaxSegmentsPerLaunch tensors. The segment descriptors are passed by value
// as kernel arguments (apex's multi_tensor_apply), so no descriptor buffer
// is allocated or copied per step; blockIdx.y picks the segment and the
// blocks along x stride through it. The fp32 master weights are updated and
// the bf16 model copy is rewritten in the same pass (one read, two writes).
#include <algorithm>
#include <cmath>
#include <string>

#include "engine/cuda/kernels/kernel_util.cuh"
#include "engine/cuda/kernels/ops.h"

namespace meshtune::engine::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocksPerSegment = 1024;

struct AdamWArgs {
  AdamWSegment segments[kMaxSegmentsPerLaunch];
};
static_assert(sizeof(AdamWArgs) <= 4000,
              "kernel parameters are limited to 4 KB");

__global__ void AdamWKernel(AdamWArgs args, float lr, float beta1, float beta2,
                            float eps, float bc1, float bc2) {
  const AdamWSegment& seg = args.segments[blockIdx.y];
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
       i < seg.count; i += int64_t{gridDim.x} * blockDim.x) {
    const float g = seg.grad[i];
    const float m = beta1 * seg.m[i] + (1.0f - beta1) * g;
    const float v = beta2 * seg.v[i] + (1.0f - beta2) * g * g;
    seg.m[i] = m;
    seg.v[i] = v;
    const float m_hat = m / bc1;
    const float v_hat = v / bc2;
    const float p = seg.param[i];
    const float updated =
        p - lr * (m_hat / (sqrtf(v_hat) + eps) + seg.weight_decay * p);
    seg.param[i] = updated;
    if (seg.param_bf16 != nullptr) Store(seg.param_bf16, i, updated);
  }
}

}  // namespace

Status AdamWUpdate(const std::vector<AdamWSegment>& segments, float lr,
                   float beta1, float beta2, float eps, int64_t step,
                   Stream stream) {
  if (step < 1) {
    return Status::InvalidArgument("adamw: step counts from 1 (got " +
                                   std::to_string(step) + ")");
  }
  // Bias corrections as the CPU op forms them: in fp64, then rounded.
  const float bc1 = static_cast<float>(
      1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step)));
  const float bc2 = static_cast<float>(
      1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step)));
  return ForEachSegmentGroup<AdamWArgs>(
      segments, kThreads, kMaxBlocksPerSegment, "adamw",
      [&](const AdamWArgs& args, dim3 grid) {
        AdamWKernel<<<grid, kThreads, 0, ToCuda(stream)>>>(
            args, lr, beta1, beta2, eps, bc1, bc2);
      });
}

}  // namespace meshtune::engine::cuda
