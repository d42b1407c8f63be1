// Rotary position embedding, rotate-half form, in place on the q heads and k
// groups of the packed qkv buffer (formula, layout and sources:
// engine/cpu/rope.cc). One thread per rotated pair; the angle p·θ_j is formed
// in fp64 like the CPU op (positions reach 10^5 with long contexts, where an
// fp32 product loses the phase), the rotation runs in fp32.
#include <string>

#include "engine/cuda/kernels/kernel_util.cuh"
#include "engine/cuda/kernels/ops.h"

namespace meshtune::engine::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void RopeKernel(Bf16* qkv, int64_t s, int64_t b, int64_t heads,
                           int64_t groups, int64_t head_dim, float base,
                           int64_t pos_offset, float direction) {
  const int64_t half = head_dim / 2;
  const int64_t vectors = heads + groups;  // q heads, then k groups
  const int64_t row_width = (heads + 2 * groups) * head_dim;
  const int64_t pairs = s * b * vectors * half;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < pairs;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t j = e % half;
    const int64_t v = (e / half) % vectors;
    const int64_t r = e / (half * vectors);  // row si·b + bi
    const double pos = static_cast<double>(r / b + pos_offset);
    const double theta =
        pow(static_cast<double>(base),
            -2.0 * static_cast<double>(j) / static_cast<double>(head_dim));
    double sin_d, cos_d;
    sincos(pos * theta, &sin_d, &cos_d);
    const float c = static_cast<float>(cos_d);
    const float sn = direction * static_cast<float>(sin_d);
    const int64_t i1 = r * row_width + v * head_dim + j, i2 = i1 + half;
    const float a = Load(qkv, i1), bb = Load(qkv, i2);
    Store(qkv, i1, a * c - bb * sn);
    Store(qkv, i2, bb * c + a * sn);
  }
}

Status Rotate(Bf16* qkv, int64_t s, int64_t b, int64_t heads, int64_t groups,
              int64_t head_dim, float base, int64_t pos_offset, float direction,
              Stream stream, const char* name) {
  if (heads <= 0 || groups <= 0 || heads % groups != 0 || head_dim <= 0 ||
      head_dim % 2 != 0 || pos_offset < 0) {
    return Status::InvalidArgument(
        std::string(name) + ": heads must be a positive multiple of groups " +
        "and head_dim even");
  }
  const int64_t pairs = s * b * (heads + groups) * (head_dim / 2);
  if (pairs == 0) return Status::Ok();
  RopeKernel<<<GridFor(pairs, kThreads), kThreads, 0, ToCuda(stream)>>>(
      qkv, s, b, heads, groups, head_dim, base, pos_offset, direction);
  return LastError(name);
}

}  // namespace

Status RopeForward(Bf16* qkv, int64_t s, int64_t b, int64_t heads,
                   int64_t groups, int64_t head_dim, float base,
                   int64_t pos_offset, Stream stream) {
  return Rotate(qkv, s, b, heads, groups, head_dim, base, pos_offset, 1.0f,
                stream, "rope_forward");
}

Status RopeBackward(Bf16* dqkv, int64_t s, int64_t b, int64_t heads,
                    int64_t groups, int64_t head_dim, float base,
                    int64_t pos_offset, Stream stream) {
  return Rotate(dqkv, s, b, heads, groups, head_dim, base, pos_offset, -1.0f,
                stream, "rope_backward");
}

}  // namespace meshtune::engine::cuda
