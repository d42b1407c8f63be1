// Hidden dropout on the GPU with the CPU engine's counter-based masks
// (engine/cpu/dropout_mask.h is compiled into this kernel), so both backends
// drop the same elements of the same samples and their runs stay
// comparable. CPU counterpart: cpu::HiddenDropout (engine/cpu/dropout.cc).
#include "engine/cpu/dropout_mask.h"
#include "engine/cuda/kernels/kernel_util.cuh"
#include "engine/cuda/kernels/ops.h"

namespace meshtune::engine::cuda {
namespace {

constexpr int kThreads = 256;

// One block per row; threads over the h columns.
__global__ void HiddenDropoutKernel(Bf16* x, int64_t h, int64_t b,
                                    cpu::DropoutSpec d) {
  const int64_t r = blockIdx.x;
  const int64_t g = d.first_row + r;  // global row si·b + bi
  const uint64_t seed =
      cpu::DropoutRowSeed(d.key, d.first_sample + g % b, g / b);
  const float scale = 1.0f / (1.0f - d.p);
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
    const int64_t i = r * h + j;
    Store(x, i,
          cpu::DropoutUniform(seed, j) >= d.p ? Load(x, i) * scale : 0.0f);
  }
}

}  // namespace

Status HiddenDropout(Bf16* x, int64_t rows, int64_t h, int64_t b,
                     const cpu::DropoutSpec& d, Stream stream) {
  if (!d.active() || rows == 0) return Status::Ok();
  if (!(d.p < 1.0f) || b <= 0 || d.first_row < 0) {
    return Status::InvalidArgument(
        "hidden dropout: p must be in [0, 1) and b positive");
  }
  HiddenDropoutKernel<<<static_cast<unsigned>(rows), kThreads, 0,
                        ToCuda(stream)>>>(x, h, b, d);
  return LastError("hidden_dropout");
}

}  // namespace meshtune::engine::cuda
