// The engine's one tolerance policy (docs/design.md §9): fp32 runs of the
// same model and data under different parallel layouts agree to 1e-5
// relative (the summation order of tensor-parallel and data-parallel
// reductions differs, nothing else does).
#ifndef MESHTUNE_TESTS_ENGINE_TOLERANCE_H_
#define MESHTUNE_TESTS_ENGINE_TOLERANCE_H_

#include <algorithm>
#include <cmath>

namespace meshtune::engine::testing {

constexpr double kFp32RelativeTolerance = 1e-5;
// Values near zero (weights of a few 1e-3) are compared with this floor.
constexpr double kFp32AbsoluteFloor = 1e-6;

// Whole tensors (final weights) are compared by RMS: rms(a − b) ≤
// 1e-5·rms(b) + 1e-6. Elementwise comparison is not meaningful for the few
// parameters whose gradient is analytically zero or nearly so (the key bias:
// softmax is shift-invariant), because Adam divides their rounding noise by
// √v + eps and turns it into updates of ~1e-6 that differ between layouts.
// A real bug moves weights by ~lr (1e-3), far above this bound.
constexpr double kTensorAbsoluteRms = 1e-6;

template <typename Vec>
bool TensorsWithinFp32Tolerance(const Vec& actual, const Vec& expected,
                                double* rms_diff, double* rms_ref) {
  double d = 0, r = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double e = expected[i], a = actual[i];
    d += (a - e) * (a - e);
    r += e * e;
  }
  const double n =
      expected.empty() ? 1.0 : static_cast<double>(expected.size());
  *rms_diff = std::sqrt(d / n);
  *rms_ref = std::sqrt(r / n);
  return *rms_diff <= kFp32RelativeTolerance * *rms_ref + kTensorAbsoluteRms;
}

inline bool WithinFp32Tolerance(double actual, double expected) {
  return std::fabs(actual - expected) <=
         kFp32RelativeTolerance *
                 std::max(std::fabs(expected), std::fabs(actual)) +
             kFp32AbsoluteFloor;
}

}  // namespace meshtune::engine::testing

#endif  // MESHTUNE_TESTS_ENGINE_TOLERANCE_H_
