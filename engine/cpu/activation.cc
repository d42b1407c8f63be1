// GELU (tanh approximation) and SwiGLU (engine/cpu/ops.h).
//
// GELU follows GPT-2 and Megatron's bias_gelu fusion
// (megatron/core/fusions/fused_bias_gelu.py):
//   gelu(x)  = 0.5·x·(1 + tanh(c·(x + 0.044715·x³))), c = √(2/π)
//   gelu'(x) = 0.5·(1 + t) + 0.5·x·(1 − t²)·c·(1 + 3·0.044715·x²), t = tanh(…)
// SwiGLU follows Shazeer 2020 ("GLU Variants Improve Transformer") and
// Megatron's swiglu (megatron/core/fusions/fused_bias_swiglu.py), which
// chunks the fused fc1 output into [gate | up] along the last dimension:
//   out = silu(gate)·up, silu(a) = a·σ(a), silu'(a) = σ(a)·(1 + a·(1 − σ(a))).
#include <cmath>
#include <cstdint>

#include "engine/cpu/ops.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cpu {
namespace {

constexpr float kGeluCoeff = 0.044715f;
// √(2/π) to float precision.
constexpr float kSqrt2OverPi = 0.7978845608028654f;

float Sigmoid(float a) { return 1.0f / (1.0f + std::exp(-a)); }

}  // namespace

void GeluForward(const float* x, float* out, int64_t count) {
  MESHTUNE_CHECK(count >= 0);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) {
    const float v = x[i];
    const float inner = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
    out[i] = 0.5f * v * (1.0f + std::tanh(inner));
  }
}

void GeluBackward(const float* dout, const float* x, float* dx, int64_t count) {
  MESHTUNE_CHECK(count >= 0);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) {
    const float v = x[i];
    const float t = std::tanh(kSqrt2OverPi * (v + kGeluCoeff * v * v * v));
    const float dinner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * v * v);
    const float grad = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dinner;
    dx[i] = dout[i] * grad;
  }
}

void SwigluForward(const float* in, float* out, int64_t n, int64_t f) {
  MESHTUNE_CHECK(n >= 0 && f >= 0);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float* gate = in + i * 2 * f;  // [f]
    const float* up = gate + f;          // [f]
    float* out_row = out + i * f;        // [f]
    for (int64_t j = 0; j < f; ++j) {
      out_row[j] = gate[j] * Sigmoid(gate[j]) * up[j];
    }
  }
}

void SwigluBackward(const float* dout, const float* in, float* din, int64_t n,
                    int64_t f) {
  MESHTUNE_CHECK(n >= 0 && f >= 0);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float* gate = in + i * 2 * f;
    const float* up = gate + f;
    const float* dout_row = dout + i * f;
    float* dgate = din + i * 2 * f;  // [f]
    float* dup = dgate + f;          // [f]
    for (int64_t j = 0; j < f; ++j) {
      const float a = gate[j];
      const float sig = Sigmoid(a);
      dgate[j] = dout_row[j] * up[j] * sig * (1.0f + a * (1.0f - sig));
      dup[j] = dout_row[j] * a * sig;
    }
  }
}

}  // namespace meshtune::engine::cpu
