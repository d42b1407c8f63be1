// Learning from measured runs: three efficiency factors, one per kind of
// hardware term of the cost model, fitted to measured step times of real
// training runs on one machine and applied to every later estimate there.
//
//   compute     GemmTime_s, the attention kernels and ScanTime_s (FLOP-bound
//               work)
//   memory      MemoryTime_s and ElementwiseTime_s (norms, activations,
//               optimizer: bandwidth-bound)
//   collective  CollectiveTime_s (TP/CP/EP/PP/DP communication)
//
// A factor f multiplies every time of its kind (f = 1.25: that work runs 25%
// slower than the base calibration says). The factors are the same for
// every configuration, so they correct how fast this machine is at each
// kind of work, never a particular configuration's answer.
//
// Fit (FitEfficiencyFactors): the step time T(f) of a configuration is
// close to linear in the factors (exactly, where no term of a kind is
// hidden behind another by overlap), so Gauss-Newton converges in a few
// steps. Its Jacobian is probed on the cost model itself:
// ∂T/∂f_k ≈ (T(f with f_k doubled) − T(f)) / f_k. Each step minimizes the
// relative squared error of the runs plus a ridge toward the base
// calibration,
//   Σ_i ((T_i(f) − m_i)/m_i)² + λ·Σ_k (f_k − 1)²      (λ = kFitPrior),
// so a kind the runs barely exercise (little communication on one node)
// keeps f ≈ 1 instead of an arbitrary value; factors stay within
// [kMinFactor, kMaxFactor].
#ifndef MESHTUNE_COSTMODEL_FITTED_CALIBRATION_H_
#define MESHTUNE_COSTMODEL_FITTED_CALIBRATION_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "costmodel/calibration.h"

namespace meshtune::costmodel {

struct EfficiencyFactors {
  double compute = 1.0;
  double memory = 1.0;
  double collective = 1.0;
  bool IsIdentity() const {
    return compute == 1.0 && memory == 1.0 && collective == 1.0;
  }
};

inline constexpr double kFitPrior = 0.01;
inline constexpr double kMinFactor = 0.1;
inline constexpr double kMaxFactor = 10.0;

// A non-owning view of `base` with its times scaled by `factors` (the fit's
// probes; also the engine of FittedCalibration).
class ScaledCalibrationView : public Calibration {
 public:
  ScaledCalibrationView(const Calibration& base, EfficiencyFactors factors)
      : base_(base), f_(factors) {}
  const EfficiencyFactors& factors() const { return f_; }
  std::string Name() const override { return base_.Name(); }
  double GemmTime_s(int64_t m, int64_t n, int64_t k,
                    search_spaces::Precision precision,
                    const ModelOptions& options) const override;
  // The base's grouped GEMM times the compute factor, like GemmTime_s.
  double GroupedGemmTime_s(int64_t m, int64_t n, int64_t k,
                           search_spaces::Precision precision, bool fused,
                           const ModelOptions& options) const override {
    return f_.compute *
           base_.GroupedGemmTime_s(m, n, k, precision, fused, options);
  }
  double AttentionForwardTime_s(int64_t batch_heads, int64_t q_len,
                                int64_t kv_len, int64_t head_dim, bool causal,
                                const ModelOptions& options) const override;
  double AttentionBackwardTime_s(int64_t batch_heads, int64_t q_len,
                                 int64_t kv_len, int64_t head_dim, bool causal,
                                 const ModelOptions& options) const override;
  bool UsesFlashAttention() const override {
    return base_.UsesFlashAttention();
  }
  double Fp8BackwardGemmSlowdown(const ModelOptions& options) const override {
    return base_.Fp8BackwardGemmSlowdown(options);
  }
  // The base's scan time times the compute factor (FLOP-bound work).
  double ScanTime_s(double flops, const ModelOptions& options) const override {
    return f_.compute * base_.ScanTime_s(flops, options);
  }
  double MemoryTime_s(double bytes, const ModelOptions& options) const override;
  // The base's answer (measured kernel or datasheet bytes) times the memory
  // factor: elementwise work is the memory-bound kind.
  double ElementwiseTime_s(ElementwiseOp op, double elements, bool backward,
                           const ModelOptions& options) const override;
  double CollectiveTime_s(Collective op, double bytes, const CommGroup& group,
                          const ModelOptions& options) const override;

 private:
  const Calibration& base_;
  EfficiencyFactors f_;
};

namespace internal {
// Holds the owned base before ScaledCalibrationView is built on it
// (base-from-member: bases are initialised in declaration order).
struct OwnedCalibration {
  explicit OwnedCalibration(std::unique_ptr<Calibration> b);
  std::unique_ptr<Calibration> owned;
};
}  // namespace internal

// A base calibration, owned, with its times scaled by `factors`. Name():
// "<base name>+fit:<label>" (label: what the factors were fitted to, e.g.
// "5 runs").
class FittedCalibration : private internal::OwnedCalibration,
                          public ScaledCalibrationView {
 public:
  // REQUIRES: base != nullptr.
  FittedCalibration(std::unique_ptr<Calibration> base,
                    EfficiencyFactors factors, std::string label);
  const Calibration& base() const { return *owned; }
  std::string Name() const override;

 private:
  std::string label_;
};

// One measured run for the fit: how long the step really took, and the cost
// model's step time for that run's configuration under any calibration.
struct FitSample {
  double measured_step_s = 0;
  std::function<double(const Calibration&)> predict_step_s;
};

struct FitResult {
  EfficiencyFactors factors;
  int runs = 0;
  // Mean absolute relative error of the predictions, in percent, with the
  // base calibration and with the fitted factors (over the same runs).
  double mape_before_pct = 0;
  double mape_after_pct = 0;
};

// Fits the factors to `samples` (at least one; all measured_step_s > 0)
// as described at the top of this file, starting from `base`.
FitResult FitEfficiencyFactors(const Calibration& base,
                               const std::vector<FitSample>& samples);

}  // namespace meshtune::costmodel

#endif  // MESHTUNE_COSTMODEL_FITTED_CALIBRATION_H_
