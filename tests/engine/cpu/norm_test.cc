// CPU LayerNorm and RMSNorm: saved statistics and outputs against a hand
// example and naive float64 code, backward (x, weight, bias) against finite
// differences, and the overwrite/accumulate rules.
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

constexpr float kEps = 1e-5f;

// LayerNorm (rms = false) or RMSNorm (rms = true) of x[n, h] in float64;
// bias empty for RMSNorm.
std::vector<double> NaiveNorm(const std::vector<double>& x,
                              const std::vector<double>& weight,
                              const std::vector<double>& bias, int64_t n,
                              int64_t h, bool rms) {
  std::vector<double> out(n * h);
  for (int64_t i = 0; i < n; ++i) {
    double mean = 0.0;
    if (!rms) {
      for (int64_t j = 0; j < h; ++j) mean += x[i * h + j];
      mean /= h;
    }
    double sq = 0.0;
    for (int64_t j = 0; j < h; ++j) {
      sq += (x[i * h + j] - mean) * (x[i * h + j] - mean);
    }
    const double rstd = 1.0 / std::sqrt(sq / h + kEps);
    for (int64_t j = 0; j < h; ++j) {
      out[i * h + j] = (x[i * h + j] - mean) * rstd * weight[j] +
                       (bias.empty() ? 0.0 : bias[j]);
    }
  }
  return out;
}

TEST(CpuNormTest, LayerNormForwardHandExample) {
  // Row [1, 2, 3, 4]: mean 2.5, biased variance 1.25, so with eps = 0 the
  // normalized row is [−1.5, −0.5, 0.5, 1.5]/√1.25.
  const std::vector<float> x = {1, 2, 3, 4};
  const std::vector<float> weight = {1, 1, 2, 1};
  const std::vector<float> bias = {0, 0, 0, 10};
  std::vector<float> out(4), mean(1), rstd(1);
  LayerNormForward(x.data(), weight.data(), bias.data(), out.data(),
                   mean.data(), rstd.data(), 1, 4, 0.0f);
  const double r = 1.0 / std::sqrt(1.25);
  EXPECT_FLOAT_EQ(mean[0], 2.5f);
  EXPECT_FLOAT_EQ(rstd[0], static_cast<float>(r));
  ExpectAllNear(out,
                std::vector<double>{-1.5 * r, -0.5 * r, 1.0 * r, 1.5 * r + 10},
                1e-6, 1e-6, "out");
}

TEST(CpuNormTest, RmsNormForwardHandExample) {
  // Row [3, 4]: mean(x²) = 12.5, rstd = 1/√12.5 (eps = 0).
  const std::vector<float> x = {3, 4};
  const std::vector<float> weight = {1, 0.5f};
  std::vector<float> out(2), rstd(1);
  RmsNormForward(x.data(), weight.data(), out.data(), rstd.data(), 1, 2, 0.0f);
  const double r = 1.0 / std::sqrt(12.5);
  EXPECT_FLOAT_EQ(rstd[0], static_cast<float>(r));
  ExpectAllNear(out, std::vector<double>{3 * r, 2 * r}, 1e-6, 1e-7, "out");
}

TEST(CpuNormTest, LayerNormMatchesNaiveAndFiniteDifferences) {
  const int64_t n = 6, h = 8;
  const auto x = RandomFloats(n * h, 21, -2.0f, 3.0f);
  const auto weight = RandomFloats(h, 22, 0.5f, 1.5f);
  const auto bias = RandomFloats(h, 23);
  const auto w_loss = RandomFloats(n * h, 24);
  std::vector<float> out(n * h), mean(n), rstd(n);
  LayerNormForward(x.data(), weight.data(), bias.data(), out.data(),
                   mean.data(), rstd.data(), n, h, kEps);
  const auto x_d = ToDouble(x), weight_d = ToDouble(weight),
             bias_d = ToDouble(bias);
  ExpectAllNear(out, NaiveNorm(x_d, weight_d, bias_d, n, h, false), 1e-5, 1e-5,
                "out");

  std::vector<float> dx(n * h, 7.0f), dweight(h, 0.0f), dbias(h, 0.0f);
  LayerNormBackward(w_loss.data(), x.data(), weight.data(), mean.data(),
                    rstd.data(), dx.data(), dweight.data(), dbias.data(), n, h);
  auto loss = [&](const std::vector<double>& xx, const std::vector<double>& w,
                  const std::vector<double>& bb) {
    return WeightedSum(NaiveNorm(xx, w, bb, n, h, false), w_loss);
  };
  ExpectAllNear(
      dx,
      NumericGrad([&](const auto& v) { return loss(v, weight_d, bias_d); },
                  x_d),
      1e-3, 1e-4, "dx");
  ExpectAllNear(dweight,
                NumericGrad([&](const auto& v) { return loss(x_d, v, bias_d); },
                            weight_d),
                1e-4, 1e-5, "dweight");
  ExpectAllNear(
      dbias,
      NumericGrad([&](const auto& v) { return loss(x_d, weight_d, v); },
                  bias_d),
      1e-4, 1e-5, "dbias");

  // A second call overwrites dx and doubles the parameter gradients.
  const auto dx_once = dx, dweight_once = dweight, dbias_once = dbias;
  LayerNormBackward(w_loss.data(), x.data(), weight.data(), mean.data(),
                    rstd.data(), dx.data(), dweight.data(), dbias.data(), n, h);
  EXPECT_EQ(dx, dx_once);
  for (int64_t j = 0; j < h; ++j) {
    EXPECT_FLOAT_EQ(dweight[j], 2 * dweight_once[j]);
    EXPECT_FLOAT_EQ(dbias[j], 2 * dbias_once[j]);
  }
}

TEST(CpuNormTest, RmsNormMatchesNaiveAndFiniteDifferences) {
  const int64_t n = 6, h = 8;
  const auto x = RandomFloats(n * h, 31, -2.0f, 3.0f);
  const auto weight = RandomFloats(h, 32, 0.5f, 1.5f);
  const auto w_loss = RandomFloats(n * h, 33);
  std::vector<float> out(n * h), rstd(n);
  RmsNormForward(x.data(), weight.data(), out.data(), rstd.data(), n, h, kEps);
  const auto x_d = ToDouble(x), weight_d = ToDouble(weight);
  const std::vector<double> no_bias;
  ExpectAllNear(out, NaiveNorm(x_d, weight_d, no_bias, n, h, true), 1e-5, 1e-5,
                "out");

  std::vector<float> dx(n * h, 7.0f), dweight(h, 0.0f);
  RmsNormBackward(w_loss.data(), x.data(), weight.data(), rstd.data(),
                  dx.data(), dweight.data(), n, h);
  auto loss = [&](const std::vector<double>& xx, const std::vector<double>& w) {
    return WeightedSum(NaiveNorm(xx, w, no_bias, n, h, true), w_loss);
  };
  ExpectAllNear(
      dx, NumericGrad([&](const auto& v) { return loss(v, weight_d); }, x_d),
      1e-3, 1e-4, "dx");
  ExpectAllNear(
      dweight,
      NumericGrad([&](const auto& v) { return loss(x_d, v); }, weight_d), 1e-4,
      1e-5, "dweight");

  const auto dx_once = dx, dweight_once = dweight;
  RmsNormBackward(w_loss.data(), x.data(), weight.data(), rstd.data(),
                  dx.data(), dweight.data(), n, h);
  EXPECT_EQ(dx, dx_once);
  for (int64_t j = 0; j < h; ++j) {
    EXPECT_FLOAT_EQ(dweight[j], 2 * dweight_once[j]);
  }
}

}  // namespace
}  // namespace meshtune::engine::cpu
