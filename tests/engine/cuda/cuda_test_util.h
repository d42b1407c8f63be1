// Shared by the CUDA engine's op tests: bf16-rounded random inputs and the
// tolerance comparison against the CPU reference ops.
//
// Tolerance. A bf16 result carries 8 significant bits, so one rounding is
// up to 2^-8 relative (unit roundoff); fp32 arithmetic in a different order
// adds far less. bf16 outputs: |gpu − cpu| ≤ 2^-7·|cpu| + 2^-8·max|cpu|
// (two roundings — an intermediate stored in bf16, then the result — plus
// cancellation against the row's scale). fp32 outputs (parameter
// gradients, statistics, losses): ≤ 1e-4·|cpu| + 1e-5·max|cpu| (summation
// order only).
#ifndef MESHTUNE_TESTS_ENGINE_CUDA_CUDA_TEST_UTIL_H_
#define MESHTUNE_TESTS_ENGINE_CUDA_CUDA_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/cpu/dropout_mask.h"
#include "engine/cpu/ops.h"
#include "engine/cuda/runtime/bf16.h"
#include "gtest/gtest.h"

namespace meshtune::engine::cuda::testing {

inline constexpr float kBf16Rtol = 1.0f / 128, kBf16Atol = 1.0f / 256;
inline constexpr float kFp32Rtol = 1e-4f, kFp32Atol = 1e-5f;

// Random values in [-scale, scale], rounded to bf16 (so the CPU reference
// and the GPU see identical inputs).
inline std::vector<float> RandomBf16Values(size_t count, uint32_t seed,
                                           float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> x(count);
  for (float& v : x) v = RoundToBf16(dist(gen));
  return x;
}

// |gpu − cpu| ≤ rtol·|cpu| + atol_of_max·max|cpu| for every element; the
// failure names the first element outside.
inline ::testing::AssertionResult Close(const std::vector<float>& gpu,
                                        const std::vector<float>& ref,
                                        float rtol, float atol_of_max) {
  if (gpu.size() != ref.size()) {
    return ::testing::AssertionFailure()
           << "sizes " << gpu.size() << " vs " << ref.size();
  }
  float max_ref = 0.0f;
  for (float r : ref) max_ref = std::max(max_ref, std::fabs(r));
  for (size_t i = 0; i < ref.size(); ++i) {
    const float bound = rtol * std::fabs(ref[i]) + atol_of_max * max_ref;
    if (!(std::fabs(gpu[i] - ref[i]) <= bound)) {
      return ::testing::AssertionFailure()
             << "element " << i << ": gpu " << gpu[i] << " cpu " << ref[i]
             << " (bound " << bound << ", max |cpu| " << max_ref << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult CloseBf16(const std::vector<float>& gpu,
                                            const std::vector<float>& ref) {
  return Close(gpu, ref, kBf16Rtol, kBf16Atol);
}
inline ::testing::AssertionResult CloseFp32(const std::vector<float>& gpu,
                                            const std::vector<float>& ref) {
  return Close(gpu, ref, kFp32Rtol, kFp32Atol);
}

// One causal-attention case with the CPU op's results: bf16-rounded qkv
// [s·b, (heads + 2·groups)·d] (values in ±2, seed `seed`) and dout
// [s·b, heads·d] (±1, seed + 1), the CPU forward's out and the backward's
// dqkv, with `dropout` when given; probs [b·heads, s, s] is the forward's
// saved (undropped) probabilities.
struct CpuAttentionCase {
  std::vector<float> qkv, dout, out, probs, dqkv;
};
inline CpuAttentionCase MakeCpuAttentionCase(
    int64_t s, int64_t b, int64_t heads, int64_t groups, int64_t d,
    uint32_t seed, const cpu::DropoutSpec* dropout = nullptr) {
  const int64_t n = s * b, width = (heads + 2 * groups) * d;
  CpuAttentionCase c;
  c.qkv = RandomBf16Values(n * width, seed, 2.0f);
  c.dout = RandomBf16Values(n * heads * d, seed + 1, 1.0f);
  c.out.resize(n * heads * d);
  c.dqkv.resize(n * width);
  c.probs.resize(b * heads * s * s);
  cpu::AttentionForward(c.qkv.data(), c.out.data(), c.probs.data(), s, b, heads,
                        groups, d, dropout);
  cpu::AttentionBackward(c.dout.data(), c.qkv.data(), c.probs.data(),
                         c.dqkv.data(), s, b, heads, groups, d, dropout);
  return c;
}

}  // namespace meshtune::engine::cuda::testing

#endif  // MESHTUNE_TESTS_ENGINE_CUDA_CUDA_TEST_UTIL_H_
