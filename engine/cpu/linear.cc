// Linear layer forward/backward (engine/cpu/ops.h) on Eigen GEMMs.
//
// Weights use the PyTorch/Megatron [out, in] layout (Megatron
// core/tensor_parallel/layers.py: ColumnParallelLinear holds
// weight[out/tp, in], RowParallelLinear weight[out, in/tp]), so the forward
// product is in · weightᵀ. Eigen parallelizes each GEMM over output blocks
// with OpenMP (-fopenmp comes from engine/CMakeLists.txt), which keeps each
// output element's sum order fixed for a given thread count.
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "engine/cpu/ops.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cpu {
namespace {

using RowMajorMatrix =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMajorMatrix>;
using MutableMap = Eigen::Map<RowMajorMatrix>;

// Columns per task in the dbias reduction: wide enough for a cache line of
// doubles per row, narrow enough that m = 768 still splits across threads.
constexpr int64_t kBiasColumnsPerTask = 64;

// Test hook for `tune regress` (docs/regress.md): MESHTUNE_PLANTED_SLOWDOWN=K
// (an integer 2..100) computes every forward GEMM K times, a slowdown the
// regression gate must catch; the result, and so the numerics, are
// unchanged. Read once per process; unset or 1 = off.
int PlantedSlowdownFactor() {
  static const int factor = [] {
    const char* text = std::getenv("MESHTUNE_PLANTED_SLOWDOWN");
    if (text == nullptr || *text == '\0') return 1;
    char* end = nullptr;
    const long k = std::strtol(text, &end, 10);
    if (*end != '\0' || k < 1 || k > 100) {
      std::fprintf(stderr,
                   "tune: warning: ignoring MESHTUNE_PLANTED_SLOWDOWN='%s' "
                   "(want an integer from 1 to 100)\n",
                   text);
      return 1;
    }
    return static_cast<int>(k);
  }();
  return factor;
}

}  // namespace

void LinearForward(const float* in, const float* weight, const float* bias,
                   float* out, int64_t n, int64_t k, int64_t m) {
  MESHTUNE_CHECK(n >= 0 && k >= 0 && m >= 0);
  ConstMap in_mat(in, n, k);      // [n, k]
  ConstMap w_mat(weight, m, k);   // [m, k]
  MutableMap out_mat(out, n, m);  // [n, m]
  for (int r = PlantedSlowdownFactor(); r > 0; --r) {
    out_mat.noalias() = in_mat * w_mat.transpose();
  }
  if (bias == nullptr) return;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float* row = out + i * m;
    for (int64_t j = 0; j < m; ++j) row[j] += bias[j];
  }
}

void LinearBackward(const float* dout, const float* in, const float* weight,
                    float* din, float* dweight, float* dbias, int64_t n,
                    int64_t k, int64_t m) {
  MESHTUNE_CHECK(n >= 0 && k >= 0 && m >= 0);
  ConstMap dout_mat(dout, n, m);  // [n, m]
  ConstMap in_mat(in, n, k);      // [n, k]
  if (din != nullptr) {
    ConstMap w_mat(weight, m, k);   // [m, k]
    MutableMap din_mat(din, n, k);  // [n, k], overwritten
    din_mat.noalias() = dout_mat * w_mat;
  }
  MutableMap dw_mat(dweight, m, k);  // [m, k], accumulated
  dw_mat.noalias() += dout_mat.transpose() * in_mat;
  if (dbias == nullptr) return;
  // dbias[j] += Σ_i dout[i, j]: each task owns a column block and walks the
  // rows in order with float64 sums, so the result does not depend on the
  // schedule and does not lose precision over n = s·b ≈ 10⁴ rows.
  const int64_t tasks = (m + kBiasColumnsPerTask - 1) / kBiasColumnsPerTask;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t j0 = t * kBiasColumnsPerTask;
    const int64_t j1 = std::min(m, j0 + kBiasColumnsPerTask);
    double sums[kBiasColumnsPerTask] = {};
    for (int64_t i = 0; i < n; ++i) {
      const float* row = dout + i * m;
      for (int64_t j = j0; j < j1; ++j) sums[j - j0] += row[j];
    }
    for (int64_t j = j0; j < j1; ++j) {
      dbias[j] = static_cast<float>(dbias[j] + sums[j - j0]);
    }
  }
}

}  // namespace meshtune::engine::cpu
