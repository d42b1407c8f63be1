// bfloat16 on the host: the storage type the CUDA backend's public headers
// use for bf16 device buffers (CUDA headers never appear in public headers,
// so __nv_bfloat16 stays inside the .cu files; both are 16 bits with the same
// layout: the upper half of an IEEE float32).
//
// Conversion rounds to nearest, ties to even (what __float2bfloat16_rn and
// PyTorch do); NaN stays a quiet NaN; overflow rounds to ±inf like IEEE.
#ifndef MESHTUNE_ENGINE_CUDA_RUNTIME_BF16_H_
#define MESHTUNE_ENGINE_CUDA_RUNTIME_BF16_H_

#include <cstdint>
#include <cstring>
#include <vector>

namespace meshtune::engine::cuda {

struct Bf16 {
  uint16_t bits = 0;
};
static_assert(sizeof(Bf16) == 2, "Bf16 must be 16 bits, like __nv_bfloat16");

inline Bf16 FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it quiet, keep sign
    return Bf16{static_cast<uint16_t>((u >> 16) | 0x0040u)};
  }
  // Round to nearest even: add 0x7fff plus the lowest kept bit.
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return Bf16{static_cast<uint16_t>((u + rounding) >> 16)};
}

inline float Bf16ToFloat(Bf16 b) {
  const uint32_t u = static_cast<uint32_t>(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// x rounded to the nearest bf16 value, as a float.
inline float RoundToBf16(float x) { return Bf16ToFloat(FloatToBf16(x)); }

inline std::vector<Bf16> ToBf16(const std::vector<float>& x) {
  std::vector<Bf16> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = FloatToBf16(x[i]);
  return out;
}

inline std::vector<float> ToFloat(const std::vector<Bf16>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = Bf16ToFloat(x[i]);
  return out;
}

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_RUNTIME_BF16_H_
