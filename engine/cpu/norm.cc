// LayerNorm and RMSNorm over the last dimension (engine/cpu/ops.h).
//
// Forward saves the per-row statistics (mean and rstd, or rstd alone) so
// backward does not recompute them, as Megatron's fused kernels
// (apex FusedLayerNormAffineFunction, TE's rmsnorm) do. Row statistics are
// summed in float64; the normalized value is then formed in float from the
// saved float statistics so forward and backward see the same x̂.
//
// Backward, with x̂ = (x − mean)·rstd and g = dout·weight (per row, h wide):
//   LayerNorm: dx = rstd·(g − mean(g) − x̂·mean(g·x̂))
//   RMSNorm:   dx = rstd·(g − x̂·mean(g·x̂))      (x̂ = x·rstd)
//   dweight += Σ_rows dout·x̂, dbias += Σ_rows dout.
// The parameter reductions run per column block over all rows in row order
// with float64 sums, so they are deterministic for any thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "engine/cpu/ops.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cpu {
namespace {

// Columns per task in the parameter-gradient reductions.
constexpr int64_t kColumnsPerTask = 64;

// Accumulates dweight[j] += Σ_i dout[i, j]·x̂[i, j] and (when dbias is not
// null) dbias[j] += Σ_i dout[i, j], x̂[i, j] = (x[i, j] − mean[i])·rstd[i]
// (mean may be null for RMSNorm: treated as 0).
void NormParamGrads(const float* dout, const float* x, const float* mean,
                    const float* rstd, float* dweight, float* dbias, int64_t n,
                    int64_t h) {
  const int64_t tasks = (h + kColumnsPerTask - 1) / kColumnsPerTask;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t j0 = t * kColumnsPerTask;
    const int64_t j1 = std::min(h, j0 + kColumnsPerTask);
    double dw[kColumnsPerTask] = {};
    double db[kColumnsPerTask] = {};
    for (int64_t i = 0; i < n; ++i) {
      const float* x_row = x + i * h;
      const float* dout_row = dout + i * h;
      const float mu = mean != nullptr ? mean[i] : 0.0f;
      for (int64_t j = j0; j < j1; ++j) {
        const float xhat = (x_row[j] - mu) * rstd[i];
        dw[j - j0] += static_cast<double>(dout_row[j]) * xhat;
        db[j - j0] += dout_row[j];
      }
    }
    for (int64_t j = j0; j < j1; ++j) {
      dweight[j] = static_cast<float>(dweight[j] + dw[j - j0]);
      if (dbias != nullptr)
        dbias[j] = static_cast<float>(dbias[j] + db[j - j0]);
    }
  }
}

}  // namespace

void LayerNormForward(const float* x, const float* weight, const float* bias,
                      float* out, float* mean, float* rstd, int64_t n,
                      int64_t h, float eps) {
  MESHTUNE_CHECK(n >= 0 && h > 0);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float* x_row = x + i * h;  // [h]
    float* out_row = out + i * h;    // [h]
    double sum = 0.0;
    for (int64_t j = 0; j < h; ++j) sum += x_row[j];
    const double mu = sum / static_cast<double>(h);
    double sq = 0.0;  // two-pass variance: no cancellation for large means
    for (int64_t j = 0; j < h; ++j) {
      const double d = x_row[j] - mu;
      sq += d * d;
    }
    const double var = sq / static_cast<double>(h);  // biased, as PyTorch
    mean[i] = static_cast<float>(mu);
    rstd[i] = static_cast<float>(1.0 / std::sqrt(var + eps));
    for (int64_t j = 0; j < h; ++j) {
      const float xhat = (x_row[j] - mean[i]) * rstd[i];
      out_row[j] = xhat * weight[j] + bias[j];
    }
  }
}

void LayerNormBackward(const float* dout, const float* x, const float* weight,
                       const float* mean, const float* rstd, float* dx,
                       float* dweight, float* dbias, int64_t n, int64_t h) {
  MESHTUNE_CHECK(n >= 0 && h > 0);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float* x_row = x + i * h;
    const float* dout_row = dout + i * h;
    float* dx_row = dx + i * h;
    double sum_g = 0.0, sum_gx = 0.0;  // Σ g, Σ g·x̂ over the row
    for (int64_t j = 0; j < h; ++j) {
      const float xhat = (x_row[j] - mean[i]) * rstd[i];
      const float g = dout_row[j] * weight[j];
      sum_g += g;
      sum_gx += static_cast<double>(g) * xhat;
    }
    const float mean_g = static_cast<float>(sum_g / static_cast<double>(h));
    const float mean_gx = static_cast<float>(sum_gx / static_cast<double>(h));
    for (int64_t j = 0; j < h; ++j) {
      const float xhat = (x_row[j] - mean[i]) * rstd[i];
      const float g = dout_row[j] * weight[j];
      dx_row[j] = rstd[i] * (g - mean_g - xhat * mean_gx);
    }
  }
  NormParamGrads(dout, x, mean, rstd, dweight, dbias, n, h);
}

void RmsNormForward(const float* x, const float* weight, float* out,
                    float* rstd, int64_t n, int64_t h, float eps) {
  MESHTUNE_CHECK(n >= 0 && h > 0);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float* x_row = x + i * h;  // [h]
    float* out_row = out + i * h;    // [h]
    double sq = 0.0;
    for (int64_t j = 0; j < h; ++j)
      sq += static_cast<double>(x_row[j]) * x_row[j];
    rstd[i] =
        static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(h) + eps));
    for (int64_t j = 0; j < h; ++j) out_row[j] = x_row[j] * rstd[i] * weight[j];
  }
}

void RmsNormBackward(const float* dout, const float* x, const float* weight,
                     const float* rstd, float* dx, float* dweight, int64_t n,
                     int64_t h) {
  MESHTUNE_CHECK(n >= 0 && h > 0);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float* x_row = x + i * h;
    const float* dout_row = dout + i * h;
    float* dx_row = dx + i * h;
    double sum_gx = 0.0;  // Σ g·x̂ over the row
    for (int64_t j = 0; j < h; ++j) {
      sum_gx +=
          static_cast<double>(dout_row[j] * weight[j]) * (x_row[j] * rstd[i]);
    }
    const float mean_gx = static_cast<float>(sum_gx / static_cast<double>(h));
    for (int64_t j = 0; j < h; ++j) {
      const float xhat = x_row[j] * rstd[i];
      const float g = dout_row[j] * weight[j];
      dx_row[j] = rstd[i] * (g - xhat * mean_gx);
    }
  }
  NormParamGrads(dout, x, /*mean=*/nullptr, rstd, dweight, /*dbias=*/nullptr, n,
                 h);
}

}  // namespace meshtune::engine::cpu
