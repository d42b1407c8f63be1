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

// Twenty candidates, best first, with predicted step times exact in binary
// (so that the hand-computed distances below are exact): five within 3 %
// of the best, then spread out to 4x. All have the same tp/pp, recompute
// and micro-batch unless a test changes one.
std::vector<costmodel::Estimate> TwentyCandidates() {
  const double times[] = {1.0,   1.0078125, 1.015625, 1.0234375, 1.03125,
                          1.125, 1.25,      1.375,    1.5,       1.75,
                          2.25,  2.5,       2.75,     3.0,       3.25,
                          3.5,   3.625,     3.75,     3.875,     4.0};
  std::vector<costmodel::Estimate> ranked;
  for (double t : times) {
    ranked.push_back(Make(1, 1, 4, RecomputeGranularity::kNone));
    ranked.back().step_time_s = t;
  }
  return ranked;
}

bool AllTrainable(const costmodel::Estimate&) { return true; }

std::vector<size_t> Indices(const std::vector<SelectedCandidate>& picks) {
  std::vector<size_t> out;
  for (const SelectedCandidate& p : picks) out.push_back(p.index);
  return out;
}

TEST(ValidateAnalysisTest, SpreadPicksTheCandidatesNearestTheQuantiles) {
  // M = 20, N = 5: q = 0, 0.25, 0.5, 0.75, 1 at positions h = q·19 = 0,
  // 4.75, 9.5, 14.25, 19; the values there, interpolated:
  //   q=0     t0 = 1.0                                  -> 0 (taken: 3)
  //   q=0.25  t4 + 0.75·(t5 − t4) = 1.03125 + 0.0703125
  //           = 1.1015625: t5 is 0.0234375 away, t4 0.0703125 -> 5
  //   q=0.5   t9 + 0.5·(t10 − t9) = 2.0: t9 and t10 both 0.25 away, the
  //           faster wins -> 9
  //   q=0.75  t14 + 0.25·(t15 − t14) = 3.3125: t14 0.0625 away -> 14
  //   q=1     t19 = 4.0 -> 19
  // With the top 3 (0, 1, 2) chosen, q=0's nearest not taken is 3
  // (0.0234375 away).
  const std::vector<costmodel::Estimate> ranked = TwentyCandidates();
  const auto picks = SelectCandidates(ranked, 3, 0, AllTrainable, 5);
  EXPECT_EQ(Indices(picks), (std::vector<size_t>{0, 1, 2, 3, 5, 9, 14, 19}));
  const std::string reasons[] = {
      "top 1",         "top 2",        "top 3",         "spread q=0",
      "spread q=0.25", "spread q=0.5", "spread q=0.75", "spread q=1"};
  ASSERT_EQ(picks.size(), 8u);
  for (size_t i = 0; i < picks.size(); ++i) {
    EXPECT_EQ(picks[i].reason, reasons[i]) << i;
    EXPECT_EQ(picks[i].from_spread, i >= 3) << i;
  }
}

TEST(ValidateAnalysisTest, SpreadSkipsWhatTheTopAndExtrasChose) {
  // Candidate 5 alone has micro-batch 2: the "other micro-batch" extra.
  // Top 3 + that extra take 0, 1, 2, 5; q=0 goes to 3 as before, and
  // q=0.25 (1.1015625) to the nearest not taken: 4 (0.0703125 away) rather
  // than 6 (1.25, 0.1484375 away).
  std::vector<costmodel::Estimate> ranked = TwentyCandidates();
  ranked[5].config.mbs = 2;
  auto picks = SelectCandidates(ranked, 3, 3, AllTrainable, 5);
  EXPECT_EQ(Indices(picks), (std::vector<size_t>{0, 1, 2, 5, 3, 4, 9, 14, 19}));
  EXPECT_EQ(picks[3].reason, "other micro-batch");
  EXPECT_FALSE(picks[3].from_spread);
  EXPECT_EQ(picks[5].reason, "spread q=0.25");

  // Top 6 (0..5): q=0 (1.0) goes to 6 (1.25), the nearest not taken, and
  // q=0.25 (1.1015625) then to 7 (1.375): a spread pick is not chosen twice.
  picks = SelectCandidates(TwentyCandidates(), 6, 0, AllTrainable, 5);
  EXPECT_EQ(Indices(picks),
            (std::vector<size_t>{0, 1, 2, 3, 4, 5, 6, 7, 9, 14, 19}));
  EXPECT_EQ(picks[6].reason, "spread q=0");
  EXPECT_EQ(picks[7].reason, "spread q=0.25");
}

TEST(ValidateAnalysisTest, SpreadQuantilesAreOverPredictedTimeNotRank) {
  // The ranking's order need not be the predicted times' order: times 2, 1,
  // 4, 3 sort to positions (1, 0, 3, 2). N = 3 with the top 1 (index 0,
  // 2.0 s) chosen: h = 0, 1.5, 3; values 1.0 -> 1; 2.5 -> 3.0 (index 3,
  // 2.0 is taken); 4.0 -> 2.
  std::vector<costmodel::Estimate> ranked;
  for (double t : {2.0, 1.0, 4.0, 3.0}) {
    ranked.push_back(Make(1, 1, 4, RecomputeGranularity::kNone));
    ranked.back().step_time_s = t;
  }
  const auto picks = SelectCandidates(ranked, 1, 0, AllTrainable, 3);
  EXPECT_EQ(Indices(picks), (std::vector<size_t>{0, 1, 3, 2}));
  EXPECT_EQ(picks[2].reason, "spread q=0.5");
}

TEST(ValidateAnalysisTest, SpreadLargerThanTheTrainableSetTakesThemAll) {
  // Four candidates (1, 2, 3, 4 s), top 1 chosen, N = 10: q_i = i/9 at
  // h = i/3; i = 0: 1.0 -> 2.0 (index 1), i = 1: 1.333 -> 3.0 (index 2),
  // i = 2: 1.667 -> 4.0 (index 3); then nothing is left and it stops.
  std::vector<costmodel::Estimate> ranked;
  for (double t : {1.0, 2.0, 3.0, 4.0}) {
    ranked.push_back(Make(1, 1, 4, RecomputeGranularity::kNone));
    ranked.back().step_time_s = t;
  }
  const auto picks = SelectCandidates(ranked, 1, 0, AllTrainable, 10);
  EXPECT_EQ(Indices(picks), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(picks[1].reason, "spread q=0");
  EXPECT_EQ(picks[2].reason, "spread q=0.11");
  EXPECT_EQ(picks[3].reason, "spread q=0.22");
  // Every candidate already in the top K: the spread adds none.
  EXPECT_EQ(SelectCandidates(ranked, 4, 0, AllTrainable, 5).size(), 4u);
  // Thirds print to two decimals: N = 4 gives q = 0, 0.33, 0.67, 1.
  const auto thirds =
      SelectCandidates(TwentyCandidates(), 1, 0, AllTrainable, 4);
  ASSERT_EQ(thirds.size(), 5u);
  EXPECT_EQ(thirds[2].reason, "spread q=0.33");
  EXPECT_EQ(thirds[3].reason, "spread q=0.67");
}

TEST(ValidateAnalysisTest, SpreadLeavesOutUntrainableAndInfeasible) {
  // Times 1..6; index 2 does not fit and index 5 (the slowest, pp 2) is
  // untrainable: the set is 1, 2, 4, 5 s (indices 0, 1, 3, 4), so its
  // maximum is 5 s. Top 1 + N = 2: q=0 (1.0, taken) -> 1; q=1 (5.0) -> 4.
  std::vector<costmodel::Estimate> ranked;
  for (double t : {1.0, 2.0, 3.0, 4.0, 5.0, 6.0}) {
    ranked.push_back(Make(1, 1, 4, RecomputeGranularity::kNone));
    ranked.back().step_time_s = t;
  }
  ranked[2].fits = false;
  ranked[5].config.pp = 2;
  auto trainable = [](const costmodel::Estimate& e) {
    return e.config.pp == 1;
  };
  auto picks = SelectCandidates(ranked, 1, 0, trainable, 2);
  EXPECT_EQ(Indices(picks), (std::vector<size_t>{0, 1, 4}));
  // N = 5 takes the whole set of four and nothing else.
  picks = SelectCandidates(ranked, 1, 0, trainable, 5);
  EXPECT_EQ(Indices(picks), (std::vector<size_t>{0, 1, 3, 4}));
}

TEST(ValidateAnalysisTest, SpreadTakesWhateverTheEngineTrains) {
  // Context- and expert-parallel plans are left out only when the
  // predicate says the engine cannot train them. Times 1, 2, 3; top 1 and
  // N = 2: q=0 (1.0, taken) -> 1 (cp 2), q=1 -> 2 (ep 2).
  std::vector<costmodel::Estimate> ranked;
  for (double t : {1.0, 2.0, 3.0}) {
    ranked.push_back(Make(1, 1, 4, RecomputeGranularity::kNone));
    ranked.back().step_time_s = t;
  }
  ranked[1].config.cp = 2;
  ranked[2].config.ep = 2;
  EXPECT_EQ(Indices(SelectCandidates(ranked, 1, 0, AllTrainable, 2)),
            (std::vector<size_t>{0, 1, 2}));
  auto no_cp = [](const costmodel::Estimate& e) { return e.config.cp == 1; };
  EXPECT_EQ(Indices(SelectCandidates(ranked, 1, 0, no_cp, 2)),
            (std::vector<size_t>{0, 2}));
}

TEST(ValidateAnalysisTest, SpreadZeroChangesNothing) {
  std::vector<costmodel::Estimate> ranked = TwentyCandidates();
  ranked[5].config.mbs = 2;
  ranked[7].config.tp = 2;
  const auto before = SelectCandidates(ranked, 3, 3, AllTrainable);
  const auto off = SelectCandidates(ranked, 3, 3, AllTrainable, 0);
  EXPECT_EQ(Indices(before), (std::vector<size_t>{0, 1, 2, 7, 5}));
  ASSERT_EQ(Indices(off), Indices(before));
  for (size_t i = 0; i < off.size(); ++i) {
    EXPECT_EQ(off[i].reason, before[i].reason);
    EXPECT_FALSE(off[i].from_spread);
  }
}

TEST(ValidateAnalysisTest, PredictedRangeIsMinMaxAndTheirRatio) {
  const auto r = RangeOf({0.5, 2.0, 1.0});
  ASSERT_TRUE(r.has_value());
  EXPECT_DOUBLE_EQ(r->min_s, 0.5);
  EXPECT_DOUBLE_EQ(r->max_s, 2.0);
  EXPECT_DOUBLE_EQ(r->ratio(), 4.0);
  EXPECT_DOUBLE_EQ(RangeOf({0.3})->ratio(), 1.0);
  EXPECT_FALSE(RangeOf({}).has_value());
}

}  // namespace
}  // namespace meshtune::tuner
