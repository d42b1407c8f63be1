// Ranking: step time first, 0.1 % ties broken by headroom, simplicity and a
// fixed key; the order must not depend on the input order.
#include "tuner/search/ranking.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace meshtune::tuner {
namespace {

using costmodel::Estimate;
using search_spaces::RecomputeGranularity;

Estimate Make(int64_t tp, int64_t pp, double step_s, double mem_bytes,
              RecomputeGranularity g = RecomputeGranularity::kNone,
              bool sp = false) {
  Estimate e;
  e.config.tp = tp;
  e.config.pp = pp;
  e.config.dp = 64 / (tp * pp);
  e.config.sp = sp;
  e.config.recompute.granularity = g;
  e.fits = true;
  e.step_time_s = step_s;
  e.memory.weights_bytes = mem_bytes;
  e.memory_capacity_bytes = 80e9;
  return e;
}

TEST(RankEstimates, FasterFirstOutsideTheTieBand) {
  std::vector<Estimate> v = {Make(8, 1, 10.2, 10e9), Make(4, 2, 10.0, 70e9)};
  RankEstimates(&v);
  EXPECT_EQ(v[0].config.tp, 4);  // 2 % faster beats much more headroom
}

TEST(RankEstimates, TiesWithinTenthOfPercentPreferHeadroom) {
  std::vector<Estimate> v = {Make(4, 2, 10.000, 70e9),
                             Make(8, 1, 10.009, 10e9)};
  RankEstimates(&v);
  EXPECT_EQ(v[0].config.tp, 8);  // 0.09 % slower but 60 GB more headroom
}

TEST(RankEstimates, EqualScoresPreferSimplerConfig) {
  std::vector<Estimate> v = {
      Make(2, 2, 10.0, 10e9, RecomputeGranularity::kNone, true),
      Make(2, 2, 10.0, 10e9, RecomputeGranularity::kFull),
      Make(2, 2, 10.0, 10e9, RecomputeGranularity::kSelective),
      Make(8, 1, 10.0, 10e9),
      Make(2, 2, 10.0, 10e9, RecomputeGranularity::kNone, false),
  };
  RankEstimates(&v);
  EXPECT_EQ(v[0].config.tp * v[0].config.pp, 4);
  EXPECT_EQ(v[0].config.recompute.granularity, RecomputeGranularity::kNone);
  EXPECT_FALSE(v[0].config.sp);  // sp off first when all else is equal
  EXPECT_TRUE(v[1].config.sp);
  EXPECT_EQ(v[2].config.recompute.granularity,
            RecomputeGranularity::kSelective);
  EXPECT_EQ(v[3].config.recompute.granularity, RecomputeGranularity::kFull);
  EXPECT_EQ(v[4].config.tp, 8);
}

TEST(RankEstimates, OrderIndependentOfInputOrder) {
  std::vector<Estimate> v;
  for (int64_t tp : {1, 2, 4, 8}) {
    for (int64_t pp : {1, 2, 4, 8}) {
      // Many exact and near ties.
      v.push_back(Make(tp, pp, 10.0 + 0.004 * ((tp + pp) % 3), 1e9 * (tp % 2)));
    }
  }
  std::vector<Estimate> reference = v;
  RankEstimates(&reference);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::shuffle(v.begin(), v.end(), rng);
    std::vector<Estimate> ranked = v;
    RankEstimates(&ranked);
    for (size_t i = 0; i < ranked.size(); ++i) {
      EXPECT_TRUE(ranked[i].config == reference[i].config) << "trial " << trial;
    }
  }
}

}  // namespace
}  // namespace meshtune::tuner
