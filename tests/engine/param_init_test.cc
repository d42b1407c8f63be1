// engine/param_init.h: the layout-independent initialization. InitParam
// (the name hashed once per tensor, rows drawn on every OpenMP thread) must
// give exactly NormalInitValue's value for each global element, whatever
// the tp shard, and the draws must be N(0, std²).
#include "engine/param_init.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "engine/param_store.h"
#include "gtest/gtest.h"

namespace meshtune::engine {
namespace {

constexpr uint64_t kSeed = 1234;

TEST(ParamInitTest, ShardsHoldTheGlobalTensorsValues) {
  const int64_t rows = 64, cols = 48;
  const float std = 0.02f;
  for (TpSplit split : {TpSplit::kColumn, TpSplit::kRow}) {
    for (int tp_rank = 0; tp_rank < 2; ++tp_rank) {
      ParamStore store;
      ParamInfo info;
      info.name = "decoder.layers.0.mlp.linear_fc1.weight";
      info.global_shape = {rows, cols};
      info.split = split;
      info.tp_rank = tp_rank;
      info.tp_size = 2;
      const int index = store.Add(info);
      store.Finalize();
      InitParam(store, index, InitKind::kNormal, std, kSeed);
      const float* p = store.param(index);
      const bool by_rows = split == TpSplit::kColumn;
      const int64_t local_rows = by_rows ? rows / 2 : rows;
      const int64_t local_cols = by_rows ? cols : cols / 2;
      for (int64_t r = 0; r < local_rows; ++r) {
        for (int64_t c = 0; c < local_cols; ++c) {
          const int64_t gr = by_rows ? tp_rank * local_rows + r : r;
          const int64_t gc = by_rows ? c : tp_rank * local_cols + c;
          ASSERT_EQ(p[r * local_cols + c],
                    NormalInitValue(kSeed, info.name, gr * cols + gc, std))
              << ToString(split) << " rank " << tp_rank << " (" << r << ", "
              << c << ")";
        }
      }
    }
  }
}

// 2^18 draws: the sample mean within 4 standard errors of 0 and the sample
// standard deviation within 1 % of `std`.
TEST(ParamInitTest, DrawsAreNormalWithTheGivenStd) {
  const int64_t n = int64_t{1} << 18;
  const float std = 0.5f;
  ParamStore store;
  ParamInfo info;
  info.name = "w";
  info.global_shape = {n};
  const int index = store.Add(info);
  store.Finalize();
  InitParam(store, index, InitKind::kNormal, std, kSeed);
  double sum = 0, sum_sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += store.param(index)[i];
    sum_sq +=
        static_cast<double>(store.param(index)[i]) * store.param(index)[i];
  }
  const double mean = sum / n;
  const double sd = std::sqrt(sum_sq / n - mean * mean);
  EXPECT_LT(std::abs(mean), 4 * std / std::sqrt(static_cast<double>(n)));
  EXPECT_NEAR(sd, std, 0.01 * std);
}

TEST(ParamInitTest, OnesAndZeros) {
  ParamStore store;
  ParamInfo info;
  info.name = "norm.weight";
  info.global_shape = {7};
  const int a = store.Add(info);
  info.name = "norm.bias";
  const int b = store.Add(info);
  store.Finalize();
  InitParam(store, a, InitKind::kOnes, 0.0f, kSeed);
  InitParam(store, b, InitKind::kZeros, 0.0f, kSeed);
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(store.param(a)[i], 1.0f);
    EXPECT_EQ(store.param(b)[i], 0.0f);
  }
}

}  // namespace
}  // namespace meshtune::engine
