// Helpers shared by the CPU op tests (tests/engine/cpu_*_test.cc): seeded
// random buffers, central finite differences of float64 reference
// functions, and element-wise comparisons with a combined tolerance.
//
// Gradient checks follow one pattern: the op runs in float32; an
// independent naive float64 forward written in the test defines a scalar
// loss L = Σ out·w with random weights w; the op's backward is fed
// dout = w, and its gradients are compared with central differences of L
// (step 1e-6 in float64, so the differences themselves are accurate to
// ~1e-9 and the tolerance only has to cover float32 rounding in the op).
#ifndef MESHTUNE_TESTS_ENGINE_CPU_TEST_UTIL_H_
#define MESHTUNE_TESTS_ENGINE_CPU_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace meshtune::engine::cpu::test_util {

// count floats uniform in [lo, hi) from a fixed seed.
inline std::vector<float> RandomFloats(size_t count, uint32_t seed,
                                       float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(count);
  for (float& x : out) x = dist(gen);
  return out;
}

inline std::vector<double> ToDouble(const std::vector<float>& x) {
  return std::vector<double>(x.begin(), x.end());
}

// Σ out[i]·w[i] in float64.
inline double WeightedSum(const std::vector<double>& out,
                          const std::vector<float>& w) {
  EXPECT_EQ(out.size(), w.size());
  double sum = 0.0;
  for (size_t i = 0; i < out.size() && i < w.size(); ++i) sum += out[i] * w[i];
  return sum;
}

// ∂f/∂x by central differences, x perturbed one element at a time.
inline std::vector<double> NumericGrad(
    const std::function<double(const std::vector<double>&)>& f,
    std::vector<double> x, double step = 1e-6) {
  std::vector<double> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + step;
    const double plus = f(x);
    x[i] = saved - step;
    const double minus = f(x);
    x[i] = saved;
    grad[i] = (plus - minus) / (2.0 * step);
  }
  return grad;
}

// Expects |actual[i] − expected[i]| <= atol + rtol·|expected[i]| for all i.
template <typename A, typename E>
void ExpectAllNear(const std::vector<A>& actual, const std::vector<E>& expected,
                   double rtol, double atol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = static_cast<double>(actual[i]);
    const double e = static_cast<double>(expected[i]);
    const double tol = atol + rtol * std::fabs(e);
    if (!(std::fabs(a - e) <= tol) && reported < 5) {
      ADD_FAILURE() << what << "[" << i << "]: got " << a << ", want " << e
                    << " (tolerance " << tol << ")";
      ++reported;
    }
  }
}

// Bitwise equality of two float buffers (determinism checks).
inline bool BitIdentical(const std::vector<float>& a,
                         const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  }
  return true;
}

}  // namespace meshtune::engine::cpu::test_util

#endif  // MESHTUNE_TESTS_ENGINE_CPU_TEST_UTIL_H_
