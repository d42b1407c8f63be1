// CPU Linear op: forward against a hand example and a naive float64
// product, backward against finite differences, the overwrite/accumulate
// rules and bit-identical reruns.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/cpu/ops.h"
#include "tests/engine/cpu/test_util.h"

namespace meshtune::engine::cpu {
namespace {

using test_util::BitIdentical;
using test_util::ExpectAllNear;
using test_util::NumericGrad;
using test_util::RandomFloats;
using test_util::ToDouble;
using test_util::WeightedSum;

// out[n, m] = in[n, k]·weight[m, k]ᵀ + bias[m] in float64 (bias may be
// empty).
std::vector<double> NaiveLinear(const std::vector<double>& in,
                                const std::vector<double>& weight,
                                const std::vector<double>& bias, int64_t n,
                                int64_t k, int64_t m) {
  std::vector<double> out(n * m);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      double sum = bias.empty() ? 0.0 : bias[j];
      for (int64_t c = 0; c < k; ++c) sum += in[i * k + c] * weight[j * k + c];
      out[i * m + j] = sum;
    }
  }
  return out;
}

TEST(CpuLinearTest, ForwardHandExample) {
  // in = [[1, 2]], weight = [[3, 4], [5, 6], [7, 8]], bias = [0.5, 0, −1]:
  // out = [1·3 + 2·4 + 0.5, 1·5 + 2·6, 1·7 + 2·8 − 1] = [11.5, 17, 22].
  const std::vector<float> in = {1, 2};
  const std::vector<float> weight = {3, 4, 5, 6, 7, 8};
  const std::vector<float> bias = {0.5f, 0.0f, -1.0f};
  std::vector<float> out(3);
  LinearForward(in.data(), weight.data(), bias.data(), out.data(), 1, 2, 3);
  EXPECT_EQ(out, (std::vector<float>{11.5f, 17.0f, 22.0f}));
  LinearForward(in.data(), weight.data(), nullptr, out.data(), 1, 2, 3);
  EXPECT_EQ(out, (std::vector<float>{11.0f, 17.0f, 23.0f}));
}

TEST(CpuLinearTest, ForwardMatchesNaive) {
  const int64_t n = 6, k = 8, m = 5;
  const auto in = RandomFloats(n * k, 1);
  const auto weight = RandomFloats(m * k, 2);
  const auto bias = RandomFloats(m, 3);
  std::vector<float> out(n * m);
  LinearForward(in.data(), weight.data(), bias.data(), out.data(), n, k, m);
  ExpectAllNear(
      out, NaiveLinear(ToDouble(in), ToDouble(weight), ToDouble(bias), n, k, m),
      1e-5, 1e-6, "out");
}

TEST(CpuLinearTest, BackwardMatchesFiniteDifferences) {
  const int64_t n = 6, k = 8, m = 5;
  const auto in = RandomFloats(n * k, 4);
  const auto weight = RandomFloats(m * k, 5);
  const auto bias = RandomFloats(m, 6);
  const auto w_loss = RandomFloats(n * m, 7);  // dout
  std::vector<float> din(n * k), dweight(m * k, 0.0f), dbias(m, 0.0f);
  LinearBackward(w_loss.data(), in.data(), weight.data(), din.data(),
                 dweight.data(), dbias.data(), n, k, m);

  const auto in_d = ToDouble(in), weight_d = ToDouble(weight),
             bias_d = ToDouble(bias);
  const auto fd_in = NumericGrad(
      [&](const std::vector<double>& x) {
        return WeightedSum(NaiveLinear(x, weight_d, bias_d, n, k, m), w_loss);
      },
      in_d);
  const auto fd_weight = NumericGrad(
      [&](const std::vector<double>& w) {
        return WeightedSum(NaiveLinear(in_d, w, bias_d, n, k, m), w_loss);
      },
      weight_d);
  const auto fd_bias = NumericGrad(
      [&](const std::vector<double>& bb) {
        return WeightedSum(NaiveLinear(in_d, weight_d, bb, n, k, m), w_loss);
      },
      bias_d);
  ExpectAllNear(din, fd_in, 1e-4, 1e-5, "din");
  ExpectAllNear(dweight, fd_weight, 1e-4, 1e-5, "dweight");
  ExpectAllNear(dbias, fd_bias, 1e-4, 1e-5, "dbias");
}

TEST(CpuLinearTest, ParamGradsAccumulateInputGradsOverwrite) {
  const int64_t n = 5, k = 4, m = 3;
  const auto in = RandomFloats(n * k, 8);
  const auto weight = RandomFloats(m * k, 9);
  const auto dout = RandomFloats(n * m, 10);
  std::vector<float> din(n * k, 0.0f), dweight(m * k, 0.0f), dbias(m, 0.0f);
  LinearBackward(dout.data(), in.data(), weight.data(), din.data(),
                 dweight.data(), dbias.data(), n, k, m);
  const auto din_once = din, dweight_once = dweight, dbias_once = dbias;

  std::fill(din.begin(), din.end(), 123.0f);  // garbage must be overwritten
  LinearBackward(dout.data(), in.data(), weight.data(), din.data(),
                 dweight.data(), dbias.data(), n, k, m);
  EXPECT_TRUE(BitIdentical(din, din_once));
  for (size_t i = 0; i < dweight.size(); ++i) {
    EXPECT_FLOAT_EQ(dweight[i], 2.0f * dweight_once[i]) << i;
  }
  for (size_t i = 0; i < dbias.size(); ++i) {
    EXPECT_FLOAT_EQ(dbias[i], 2.0f * dbias_once[i]) << i;
  }

  // Null din and dbias are skipped; dweight still accumulates.
  LinearBackward(dout.data(), in.data(), weight.data(), nullptr, dweight.data(),
                 nullptr, n, k, m);
  for (size_t i = 0; i < dweight.size(); ++i) {
    EXPECT_FLOAT_EQ(dweight[i], 3.0f * dweight_once[i]) << i;
  }
  for (size_t i = 0; i < dbias.size(); ++i) {
    EXPECT_FLOAT_EQ(dbias[i], 2.0f * dbias_once[i]) << i;
  }
}

TEST(CpuLinearTest, BackwardIsBitIdenticalAcrossRuns) {
  // Big enough for Eigen's blocked, multi-threaded GEMM path and several
  // dbias column blocks.
  const int64_t n = 300, k = 96, m = 200;
  const auto in = RandomFloats(n * k, 11);
  const auto weight = RandomFloats(m * k, 12);
  const auto dout = RandomFloats(n * m, 13);
  std::vector<float> runs[2][3];
  for (auto& run : runs) {
    run[0].assign(n * k, 0.0f);
    run[1].assign(m * k, 0.0f);
    run[2].assign(m, 0.0f);
    LinearBackward(dout.data(), in.data(), weight.data(), run[0].data(),
                   run[1].data(), run[2].data(), n, k, m);
  }
  EXPECT_TRUE(BitIdentical(runs[0][0], runs[1][0]));
  EXPECT_TRUE(BitIdentical(runs[0][1], runs[1][1]));
  EXPECT_TRUE(BitIdentical(runs[0][2], runs[1][2]));
}

}  // namespace
}  // namespace meshtune::engine::cpu
