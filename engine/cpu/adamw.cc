// AdamW over one contiguous range (engine/cpu/ops.h).
//
// Loshchilov & Hutter 2019 ("Decoupled Weight Decay Regularization") in the
// form of apex's FusedAdam with adam_w_mode (apex/optimizers/fused_adam.py,
// csrc/multi_tensor_adam.cu), which Megatron uses: float32 math per element,
//   m = β1·m + (1−β1)·g,  v = β2·v + (1−β2)·g²,
//   p −= lr·( (m/bc1) / (√(v/bc2) + eps) + wd_i·p ),
// with bias corrections bc1 = 1 − β1^step, bc2 = 1 − β2^step (formed in
// float64 here, then rounded once) and wd_i = weight_decay·decay_mask[i].
#include <cmath>
#include <cstdint>

#include "engine/cpu/ops.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cpu {

void AdamWUpdate(float* param, const float* grad, float* m, float* v,
                 const float* decay_mask, int64_t count, float lr, float beta1,
                 float beta2, float eps, float weight_decay, int64_t step) {
  MESHTUNE_CHECK(count >= 0);
  MESHTUNE_CHECK(step >= 1);  // bias corrections divide by 1 − β^step
  const float bc1 = static_cast<float>(
      1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step)));
  const float bc2 = static_cast<float>(
      1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step)));
  // Vectorized (AVX2 sqrt and divide are correctly rounded, so the result
  // is the scalar one); engine/CMakeLists.txt builds with -fno-math-errno
  // so std::sqrt does not pin the loop to scalar code.
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i) {
    const float g = grad[i];
    m[i] = beta1 * m[i] + (1.0f - beta1) * g;
    v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
    const float m_hat = m[i] / bc1;
    const float v_hat = v[i] / bc2;
    const float wd =
        decay_mask != nullptr ? weight_decay * decay_mask[i] : weight_decay;
    param[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + wd * param[i]);
  }
}

}  // namespace meshtune::engine::cpu
