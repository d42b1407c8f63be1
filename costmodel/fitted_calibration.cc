#include "costmodel/fitted_calibration.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "search_spaces/status.h"

namespace meshtune::costmodel {
namespace {

// Solves the 3×3 system a·x = b by Gaussian elimination with partial
// pivoting (a is symmetric positive definite here: JᵀJ + λI).
std::array<double, 3> Solve3(std::array<std::array<double, 3>, 3> a,
                             std::array<double, 3> b) {
  for (int col = 0; col < 3; ++col) {
    int pivot = col;
    for (int r = col + 1; r < 3; ++r) {
      if (std::fabs(a[r][col]) > std::fabs(a[pivot][col])) pivot = r;
    }
    std::swap(a[col], a[pivot]);
    std::swap(b[col], b[pivot]);
    for (int r = col + 1; r < 3; ++r) {
      const double m = a[r][col] / a[col][col];
      for (int c = col; c < 3; ++c) a[r][c] -= m * a[col][c];
      b[r] -= m * b[col];
    }
  }
  std::array<double, 3> x{};
  for (int r = 2; r >= 0; --r) {
    double s = b[r];
    for (int c = r + 1; c < 3; ++c) s -= a[r][c] * x[c];
    x[r] = s / a[r][r];
  }
  return x;
}

EfficiencyFactors FromArray(const std::array<double, 3>& a) {
  EfficiencyFactors f;
  f.compute = a[0];
  f.memory = a[1];
  f.collective = a[2];
  return f;
}

double MapePct(const Calibration& cal, const std::vector<FitSample>& samples) {
  double sum = 0;
  for (const FitSample& s : samples) {
    sum += std::fabs(s.predict_step_s(cal) - s.measured_step_s) /
           s.measured_step_s;
  }
  return 100.0 * sum / static_cast<double>(samples.size());
}

}  // namespace

// ---- ScaledCalibrationView ----

double ScaledCalibrationView::GemmTime_s(int64_t m, int64_t n, int64_t k,
                                         search_spaces::Precision precision,
                                         const ModelOptions& options) const {
  return f_.compute * base_.GemmTime_s(m, n, k, precision, options);
}
double ScaledCalibrationView::AttentionForwardTime_s(
    int64_t batch_heads, int64_t q_len, int64_t kv_len, int64_t head_dim,
    bool causal, const ModelOptions& options) const {
  return f_.compute * base_.AttentionForwardTime_s(batch_heads, q_len, kv_len,
                                                   head_dim, causal, options);
}
double ScaledCalibrationView::AttentionBackwardTime_s(
    int64_t batch_heads, int64_t q_len, int64_t kv_len, int64_t head_dim,
    bool causal, const ModelOptions& options) const {
  return f_.compute * base_.AttentionBackwardTime_s(batch_heads, q_len, kv_len,
                                                    head_dim, causal, options);
}
double ScaledCalibrationView::MemoryTime_s(double bytes,
                                           const ModelOptions& options) const {
  return f_.memory * base_.MemoryTime_s(bytes, options);
}
double ScaledCalibrationView::ElementwiseTime_s(
    ElementwiseOp op, double elements, bool backward,
    const ModelOptions& options) const {
  return f_.memory * base_.ElementwiseTime_s(op, elements, backward, options);
}
double ScaledCalibrationView::CollectiveTime_s(
    Collective op, double bytes, const CommGroup& group,
    const ModelOptions& options) const {
  return f_.collective * base_.CollectiveTime_s(op, bytes, group, options);
}

// ---- FittedCalibration ----

namespace internal {
OwnedCalibration::OwnedCalibration(std::unique_ptr<Calibration> b)
    : owned(std::move(b)) {
  MESHTUNE_CHECK(owned != nullptr);
}
}  // namespace internal

FittedCalibration::FittedCalibration(std::unique_ptr<Calibration> base,
                                     EfficiencyFactors factors,
                                     std::string label)
    : internal::OwnedCalibration(std::move(base)),
      ScaledCalibrationView(*owned, factors),
      label_(std::move(label)) {}

std::string FittedCalibration::Name() const {
  return owned->Name() + "+fit:" + label_;
}

// ---- Fit ----

FitResult FitEfficiencyFactors(const Calibration& base,
                               const std::vector<FitSample>& samples) {
  MESHTUNE_CHECK(!samples.empty());
  for (const FitSample& s : samples) MESHTUNE_CHECK(s.measured_step_s > 0);
  std::array<double, 3> f = {1.0, 1.0, 1.0};
  constexpr int kIterations = 6;
  for (int it = 0; it < kIterations; ++it) {
    // Normal equations of the linearized, ridge-regularized problem in the
    // new factors f': (JᵀJ + λI)·f' = Jᵀ(r + J·f) + λ·1, with rows scaled
    // by 1/m_i, r_i = (m_i − T_i(f))/m_i.
    std::array<std::array<double, 3>, 3> ata{};
    std::array<double, 3> atb{};
    const ScaledCalibrationView at_f(base, FromArray(f));
    for (const FitSample& s : samples) {
      const double m = s.measured_step_s;
      const double t = s.predict_step_s(at_f);
      std::array<double, 3> row{};
      for (int k = 0; k < 3; ++k) {
        std::array<double, 3> probe = f;
        probe[k] *= 2.0;
        const ScaledCalibrationView probed(base, FromArray(probe));
        row[k] = (s.predict_step_s(probed) - t) / f[k] / m;
      }
      const double target =
          (m - t) / m + row[0] * f[0] + row[1] * f[1] + row[2] * f[2];
      for (int a = 0; a < 3; ++a) {
        for (int b = 0; b < 3; ++b) ata[a][b] += row[a] * row[b];
        atb[a] += row[a] * target;
      }
    }
    for (int k = 0; k < 3; ++k) {
      ata[k][k] += kFitPrior;
      atb[k] += kFitPrior * 1.0;
    }
    std::array<double, 3> next = Solve3(ata, atb);
    for (double& x : next) x = std::clamp(x, kMinFactor, kMaxFactor);
    f = next;
  }
  FitResult result;
  result.factors = FromArray(f);
  result.runs = static_cast<int>(samples.size());
  result.mape_before_pct = MapePct(base, samples);
  result.mape_after_pct =
      MapePct(ScaledCalibrationView(base, result.factors), samples);
  return result;
}

}  // namespace meshtune::costmodel
