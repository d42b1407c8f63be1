// Σ grad² over every gradient tensor for global-norm clipping (CPU
// counterpart: SumSquares in engine/cpu/elementwise.cc, fp64). Multi-tensor
// like adamw.cu: descriptors by value, blockIdx.y = tensor. Each thread sums
// its elements in fp32 (a few hundred at most per thread per tensor), the
// block total is formed in fp32 and added to the fp64 result with one
// atomicAdd per block, so the fp32 partials stay short and the long sum is
// fp64 as on the CPU.
#include <algorithm>

#include "engine/cuda/kernels/kernel_util.cuh"
#include "engine/cuda/kernels/ops.h"

namespace meshtune::engine::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocksPerSegment = 1024;

struct GradArgs {
  GradSegment segments[kMaxSegmentsPerLaunch];
};

__global__ void SumSquaresKernel(GradArgs args, double* sum_squares) {
  __shared__ float scratch[kWarpSize];
  const GradSegment& seg = args.segments[blockIdx.y];
  float partial = 0.0f;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
       i < seg.count; i += int64_t{gridDim.x} * blockDim.x) {
    partial += seg.grad[i] * seg.grad[i];
  }
  const float block_total = BlockSum(partial, scratch);
  if (threadIdx.x == 0)
    atomicAdd(sum_squares, static_cast<double>(block_total));
}

}  // namespace

Status SumSquares(const std::vector<GradSegment>& segments, double* sum_squares,
                  Stream stream) {
  return ForEachSegmentGroup<GradArgs>(
      segments, kThreads, kMaxBlocksPerSegment, "sum_squares",
      [&](const GradArgs& args, dim3 grid) {
        SumSquaresKernel<<<grid, kThreads, 0, ToCuda(stream)>>>(args,
                                                                sum_squares);
      });
}

}  // namespace meshtune::engine::cuda
