// Device-side helpers shared by the CUDA backend's kernels (internal: only
// .cu files include this; it pulls in CUDA headers).
#ifndef MESHTUNE_ENGINE_CUDA_KERNELS_KERNEL_UTIL_CUH_
#define MESHTUNE_ENGINE_CUDA_KERNELS_KERNEL_UTIL_CUH_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/cuda/kernels/ops.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"

namespace meshtune::engine::cuda {

inline constexpr int kWarpSize = 32;

// Bf16 (host layout) <-> __nv_bfloat16 (device type): same 16 bits.
__device__ __forceinline__ float Load(const Bf16* p, int64_t i) {
  return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(p)[i]);
}
__device__ __forceinline__ void Store(Bf16* p, int64_t i, float x) {
  reinterpret_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(x);
}
// x rounded to bf16 and back (what a store followed by a load gives).
__device__ __forceinline__ float Round(float x) {
  return __bfloat162float(__float2bfloat16_rn(x));
}

__device__ __forceinline__ float WarpSum(float x) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    x += __shfl_xor_sync(0xffffffffu, x, offset);
  }
  return x;
}
__device__ __forceinline__ float WarpMax(float x) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  }
  return x;
}

// Sum / max over the whole block (blockDim.x a multiple of 32, at most
// 1024); every thread gets the result. `scratch` holds 32 floats in shared
// memory; the call ends with a barrier so it can be reused right away.
__device__ __forceinline__ float BlockSum(float x, float* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  x = WarpSum(x);
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  float total = lane < warps ? scratch[lane] : 0.0f;
  total = WarpSum(total);
  __syncthreads();
  return total;
}
__device__ __forceinline__ float BlockMax(float x, float* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  x = WarpMax(x);
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  float total = lane < warps ? scratch[lane] : -INFINITY;
  total = WarpMax(total);
  __syncthreads();
  return total;
}

inline cudaStream_t ToCuda(Stream stream) {
  return static_cast<cudaStream_t>(stream);
}

// CUDA's limit on gridDim.y (and z); kernels whose y-blocks cover rows
// stride over them by gridDim.y when there are more chunks than this.
constexpr int64_t kMaxGridY = 65535;

// Blocks of `threads` covering `count` elements, capped for grid-stride
// loops (a large grid adds nothing once every SM is busy).
inline unsigned GridFor(int64_t count, int threads) {
  const int64_t blocks = (count + threads - 1) / threads;
  const int64_t cap = 65535LL * 8;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > cap ? cap : blocks));
}

// Multi-tensor launches (apex's multi_tensor_apply): the segments go to the
// kernel by value in an Args struct of kMaxSegmentsPerLaunch, group by
// group. For each non-empty group, `launch(args, grid)` is called with
// args.segments filled and grid = (blocks for the longest segment, capped
// at max_blocks; one y-block per segment). Segment has an int64_t count.
template <typename Args, typename Segment, typename Launch>
Status ForEachSegmentGroup(const std::vector<Segment>& segments, int threads,
                           int64_t max_blocks, const char* op, Launch launch) {
  for (size_t first = 0; first < segments.size();
       first += kMaxSegmentsPerLaunch) {
    const size_t count =
        std::min<size_t>(kMaxSegmentsPerLaunch, segments.size() - first);
    Args args;
    int64_t longest = 0;
    for (size_t k = 0; k < count; ++k) {
      args.segments[k] = segments[first + k];
      longest = std::max(longest, segments[first + k].count);
    }
    if (longest == 0) continue;
    const int64_t blocks =
        std::min<int64_t>(max_blocks, (longest + threads - 1) / threads);
    launch(args,
           dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(count)));
    MESHTUNE_RETURN_IF_ERROR(LastError(op));
  }
  return Status::Ok();
}

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_KERNELS_KERNEL_UTIL_CUH_
