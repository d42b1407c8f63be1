// CPU GELU (tanh approximation) and SwiGLU: forward against published /
// hand-computed values and naive float64 code, backward against finite
// differences.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/cpu/ops.h"
#include "tests/engine/cpu/test_util.h"

namespace meshtune::engine::cpu {
namespace {

using test_util::ExpectAllNear;
using test_util::NumericGrad;
using test_util::RandomFloats;
using test_util::ToDouble;
using test_util::WeightedSum;

std::vector<double> NaiveGelu(const std::vector<double>& x) {
  const double c = std::sqrt(2.0 / M_PI);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    out[i] = 0.5 * x[i] *
             (1.0 + std::tanh(c * (x[i] + 0.044715 * std::pow(x[i], 3))));
  }
  return out;
}

// in[n, 2f] = [gate | up] -> out[n, f] = gate·σ(gate)·up.
std::vector<double> NaiveSwiglu(const std::vector<double>& in, int64_t n,
                                int64_t f) {
  std::vector<double> out(n * f);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < f; ++j) {
      const double a = in[i * 2 * f + j];
      const double u = in[i * 2 * f + f + j];
      out[i * f + j] = a / (1.0 + std::exp(-a)) * u;
    }
  }
  return out;
}

TEST(CpuActivationTest, GeluKnownValues) {
  // PyTorch gelu(approximate="tanh"): gelu(1) = 0.8411920, gelu(−1) =
  // −0.1588080, gelu(2) = 1.9545977, gelu(0) = 0.
  const std::vector<float> x = {0.0f, 1.0f, -1.0f, 2.0f};
  std::vector<float> out(4);
  GeluForward(x.data(), out.data(), 4);
  ExpectAllNear(out, std::vector<double>{0.0, 0.8411920, -0.1588080, 1.9545977},
                0, 1e-6, "gelu");
}

TEST(CpuActivationTest, GeluMatchesNaiveAndFiniteDifferences) {
  const int64_t count = 40;
  const auto x = RandomFloats(count, 41, -4.0f, 4.0f);
  const auto w_loss = RandomFloats(count, 42);
  std::vector<float> out(count), dx(count, 9.0f);
  GeluForward(x.data(), out.data(), count);
  ExpectAllNear(out, NaiveGelu(ToDouble(x)), 1e-5, 1e-6, "out");
  GeluBackward(w_loss.data(), x.data(), dx.data(), count);
  ExpectAllNear(
      dx,
      NumericGrad(
          [&](const auto& v) { return WeightedSum(NaiveGelu(v), w_loss); },
          ToDouble(x)),
      1e-4, 1e-5, "dx");
}

TEST(CpuActivationTest, SwigluHandExample) {
  // One row, f = 2: gate = [0, 1], up = [5, 2]: out = [0, 2·σ(1)] with
  // σ(1) = 0.7310586.
  const std::vector<float> in = {0.0f, 1.0f, 5.0f, 2.0f};
  std::vector<float> out(2);
  SwigluForward(in.data(), out.data(), 1, 2);
  ExpectAllNear(out, std::vector<double>{0.0, 1.4621172}, 0, 1e-6, "out");
}

TEST(CpuActivationTest, SwigluMatchesNaiveAndFiniteDifferences) {
  const int64_t n = 6, f = 5;
  const auto in = RandomFloats(n * 2 * f, 43, -3.0f, 3.0f);
  const auto w_loss = RandomFloats(n * f, 44);
  std::vector<float> out(n * f), din(n * 2 * f, 9.0f);
  SwigluForward(in.data(), out.data(), n, f);
  ExpectAllNear(out, NaiveSwiglu(ToDouble(in), n, f), 1e-5, 1e-6, "out");
  SwigluBackward(w_loss.data(), in.data(), din.data(), n, f);
  ExpectAllNear(din,
                NumericGrad(
                    [&](const auto& v) {
                      return WeightedSum(NaiveSwiglu(v, n, f), w_loss);
                    },
                    ToDouble(in)),
                1e-4, 1e-5, "din");
}

}  // namespace
}  // namespace meshtune::engine::cpu
