// tune validate's selection and statistics (tuner/validate/analysis.h)
// against hand-computed values.
#include "tuner/validate/analysis.h"

#include <gtest/gtest.h>

#include <cmath>

namespace meshtune::tuner {
namespace {

using search_spaces::RecomputeGranularity;

costmodel::Estimate Make(int64_t tp, int64_t pp, int64_t mbs,
                         RecomputeGranularity r, bool fits = true) {
  costmodel::Estimate e;
  e.config.tp = tp;
  e.config.pp = pp;
  e.config.mbs = mbs;
  e.config.recompute.granularity = r;
  e.fits = fits;
  return e;
}

TEST(ValidateAnalysisTest, SpearmanHandValues) {
  // Identical order: 1; reversed: −1.
  EXPECT_DOUBLE_EQ(SpearmanRho({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(SpearmanRho({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  // One swap of neighbours among 4: ρ = 1 − 6·Σd²/(n(n²−1)) = 1 − 12/60.
  EXPECT_NEAR(SpearmanRho({1, 2, 3, 4}, {1, 3, 2, 4}), 0.8, 1e-12);
  // Ties: a = (1, 2, 2, 3) has ranks (1, 2.5, 2.5, 4); Pearson of the ranks
  // with (1, 2, 3, 4) = 4.5/√(4.5·5) = 0.948683.
  EXPECT_NEAR(SpearmanRho({1, 2, 2, 3}, {1, 2, 3, 4}), 0.9486832980505138,
              1e-12);
  EXPECT_TRUE(std::isnan(SpearmanRho({1, 1, 1}, {1, 2, 3})));
}

TEST(ValidateAnalysisTest, ErrorPercentSign) {
  EXPECT_DOUBLE_EQ(ErrorPercent(0.9, 1.0), -10.000000000000002);
  EXPECT_DOUBLE_EQ(ErrorPercent(1.5, 1.0), 50.0);
}

TEST(ValidateAnalysisTest, AnalyzeHandValues) {
  // Predicted 1, 2, 3, 4; measured 1.1, 1.0, failed, 5.
  std::vector<CandidateOutcome> o = {{1.0, 1.1, std::nullopt},
                                     {2.0, 1.0, std::nullopt},
                                     {3.0, std::nullopt, std::nullopt},
                                     {4.0, 5.0, std::nullopt}};
  const ValidationStats s = AnalyzeOutcomes(o);
  EXPECT_EQ(s.measured, 3);
  // |−9.09| + 100 + 20 = 129.09 / 3.
  EXPECT_NEAR(*s.mape_pct, (100.0 / 11.0 + 100.0 + 20.0) / 3.0, 1e-9);
  // Ranks predicted (1, 2, 3), measured (2, 1, 3): ρ = 1 − 6·2/(3·8) = 0.5.
  EXPECT_NEAR(*s.spearman, 0.5, 1e-12);
  EXPECT_EQ(*s.measured_best, 1u);
  EXPECT_FALSE(s.top1_is_measured_best);
  EXPECT_NEAR(*s.top1_loss_pct, 10.0, 1e-9);
}

TEST(ValidateAnalysisTest, FailedTop1HasNoLoss) {
  const ValidationStats s = AnalyzeOutcomes({{1.0, std::nullopt, std::nullopt},
                                             {2.0, 2.0, std::nullopt},
                                             {3.0, 2.5, std::nullopt}});
  EXPECT_FALSE(s.top1_is_measured_best);
  EXPECT_FALSE(s.top1_loss_pct.has_value());
  EXPECT_EQ(*s.measured_best, 1u);
  const ValidationStats none =
      AnalyzeOutcomes({{1.0, std::nullopt, std::nullopt}});
  EXPECT_EQ(none.measured, 0);
  EXPECT_FALSE(none.mape_pct.has_value());
  EXPECT_FALSE(none.spearman.has_value());
}

TEST(ValidateAnalysisTest, RepeatedRunsMedianAndSpread) {
  // Odd count: the middle run; one slow run of three moves nothing.
  RepeatedRuns r = SummarizeRuns({0.60, 0.80, 0.62});
  EXPECT_DOUBLE_EQ(r.median_s, 0.62);
  EXPECT_NEAR(r.spread_pct, 100.0 * 0.20 / 0.62, 1e-12);
  // Even count: the mean of the middle two.
  r = SummarizeRuns({0.5, 0.7, 0.6, 0.4});
  EXPECT_DOUBLE_EQ(r.median_s, 0.55);
  EXPECT_NEAR(r.spread_pct, 100.0 * 0.3 / 0.55, 1e-12);
  r = SummarizeRuns({0.3});
  EXPECT_DOUBLE_EQ(r.median_s, 0.3);
  EXPECT_DOUBLE_EQ(r.spread_pct, 0.0);
}

TEST(ValidateAnalysisTest, RoundOrderRotates) {
  EXPECT_EQ(RoundOrder(3, 0), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(RoundOrder(3, 1), (std::vector<size_t>{1, 2, 0}));
  EXPECT_EQ(RoundOrder(3, 2), (std::vector<size_t>{2, 0, 1}));
  EXPECT_EQ(RoundOrder(3, 3), (std::vector<size_t>{0, 1, 2}));
  EXPECT_TRUE(RoundOrder(0, 5).empty());
}

TEST(ValidateAnalysisTest, NoiseAndSeparatedPairs) {
  // Spreads 4, 10, 20 (one candidate measured once, one failed): noise =
  // the median, 10 %. Predictions 1.00, 1.05, 1.30, 2.00 among the measured:
  // pairs apart by more than 10 %: (1.00, 1.30), (1.00, 2.00),
  // (1.05, 1.30), (1.05, 2.00), (1.30, 2.00) = 5; (1.00, 1.05) is 5 %.
  // Measured 1.0, 0.9, 1.4, 1.3: in order are (1.00, 1.30) 1.0 < 1.4,
  // (1.00, 2.00) 1.0 < 1.3, (1.05, 1.30) 0.9 < 1.4, (1.05, 2.00) 0.9 <
  // 1.3; (1.30, 2.00) is reversed (1.4 > 1.3): 4 of 5.
  std::vector<CandidateOutcome> o = {{1.00, 1.0, 4.0},
                                     {1.05, 0.9, 10.0},
                                     {1.30, 1.4, 20.0},
                                     {1.50, std::nullopt, std::nullopt},
                                     {2.00, 1.3, std::nullopt}};
  const ValidationStats s = AnalyzeOutcomes(o);
  ASSERT_TRUE(s.noise_pct.has_value());
  EXPECT_DOUBLE_EQ(*s.noise_pct, 10.0);
  EXPECT_EQ(s.separated_pairs, 5);
  EXPECT_EQ(s.separated_pairs_in_order, 4);
  // Without repeated runs there is no noise estimate: every pair with
  // different predictions counts (6 among the 4 measured).
  for (CandidateOutcome& c : o) c.spread_pct.reset();
  const ValidationStats t = AnalyzeOutcomes(o);
  EXPECT_FALSE(t.noise_pct.has_value());
  EXPECT_EQ(t.separated_pairs, 6);
  EXPECT_EQ(t.separated_pairs_in_order, 4);
}

TEST(ValidateAnalysisTest, SelectsTopKThenOneNewValuePerAxis) {
  using R = RecomputeGranularity;
  const std::vector<costmodel::Estimate> ranked = {
      Make(2, 1, 4, R::kNone),         // 0 top 1
      Make(1, 1, 4, R::kSelective),    // 1 top 2
      Make(1, 1, 4, R::kNone, false),  // 2 does not fit: never chosen
      Make(1, 1, 2, R::kNone),         // 3 other micro-batch (2 is new)
      Make(1, 2, 4, R::kNone),         // 4 pp 2: untrainable here
      Make(1, 1, 4, R::kFull),         // 5 other recompute (full is new)
      Make(4, 1, 4, R::kNone),         // 6 other tp/pp split (4/1 is new)
  };
  auto trainable = [](const costmodel::Estimate& e) {
    return e.config.pp == 1;
  };
  const auto picked = SelectCandidates(ranked, 2, 3, trainable);
  ASSERT_EQ(picked.size(), 5u);
  EXPECT_EQ(picked[0].index, 0u);
  EXPECT_EQ(picked[0].reason, "top 1");
  EXPECT_EQ(picked[1].index, 1u);
  EXPECT_EQ(picked[1].reason, "top 2");
  // tp/pp 2/1 and 1/1 are taken; 1/2 is untrainable: 4/1.
  EXPECT_EQ(picked[2].index, 6u);
  EXPECT_EQ(picked[2].reason, "other tp/pp split");
  // none and selective are taken: full.
  EXPECT_EQ(picked[3].index, 5u);
  EXPECT_EQ(picked[3].reason, "other recompute");
  EXPECT_EQ(picked[4].index, 3u);
  EXPECT_EQ(picked[4].reason, "other micro-batch");

  // extras = 0: the top K only; K larger than the list: what there is.
  EXPECT_EQ(SelectCandidates(ranked, 2, 0, trainable).size(), 2u);
  EXPECT_EQ(SelectCandidates(ranked, 10, 0, trainable).size(), 5u);
  // An axis with no new value adds nothing.
  const std::vector<costmodel::Estimate> same = {Make(1, 1, 4, R::kNone),
                                                 Make(1, 1, 4, R::kNone)};
  EXPECT_EQ(SelectCandidates(same, 1, 3, trainable).size(), 1u);
}

}  // namespace
}  // namespace meshtune::tuner
