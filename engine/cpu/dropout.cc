// Hidden dropout with counter-based masks (engine/cpu/ops.h,
// engine/cpu/dropout_mask.h).
#include <cstdint>

#include "engine/cpu/ops.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cpu {

void HiddenDropout(float* x, int64_t rows, int64_t h, int64_t b,
                   const DropoutSpec& d) {
  if (!d.active()) return;
  MESHTUNE_CHECK(d.p < 1.0f && b > 0 && d.first_row >= 0);
  const float scale = d.scale();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t g = d.first_row + r;
    const uint64_t seed = DropoutRowSeed(d.key, d.first_sample + g % b, g / b);
    float* row = x + r * h;
    for (int64_t j = 0; j < h; ++j) {
      row[j] = DropoutUniform(seed, j) >= d.p ? row[j] * scale : 0.0f;
    }
  }
}

}  // namespace meshtune::engine::cpu
