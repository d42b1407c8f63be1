// `tune accuracy --with-best` (tuner/accuracy/best.h): the best plan of each
// step-time row's problem, its gain over the row's own configuration, the
// per-problem search cache, rows where nothing fits and rows that are not
// searched, the summary statistics, and the JSON/text reports through the
// built binary.
#include "tuner/accuracy/best.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "costmodel/cost_model.h"
#include "costmodel/datasheet_calibration.h"
#include "tests/tuner/tune_in_process.h"
#include "tuner/accuracy/cases.h"
#include "tuner/io/csv_reader.h"
#include "tuner/search/ranking.h"

namespace meshtune::tuner {
namespace {

const char* const kHeader =
    "source,model,params_b,layers,hidden,heads,kv_heads,ffn_hidden,vocab,"
    "seq_len,gpu,num_gpus,tp,pp,dp,cp,ep,vp,sp,mbs,gbs,recompute,precision,"
    "measured_metric,measured_value,notes";

// CSV lines 2..7 (line 1 is the header):
//   2  GPT 1.7B on 8 A100-80GB, tp1 dp8          (problem A)
//   3  the same problem, tp2 dp4                  (problem A again: cached)
//   4  GPT 1.7B on 16 A100-80GB, tp2 pp2 dp4      (problem B)
//   5  GPT-3 175B on 8 A100-80GB, tp8: no plan of any kind fits
//   6  a per-layer row (Korthikanti et al. 2022 Table 4): not searched
//   7  an allocated-memory row: not searched
const char* const kRows[] = {
    "Test,GPT-1.7B,,,,,,,,,A100-SXM4-80GB,8,1,1,8,1,1,,0,2,64,none,bf16,"
    "step_time_s,2.0,",
    "Test,GPT-1.7B,,,,,,,,,A100-SXM4-80GB,8,2,1,4,1,1,,1,2,64,none,bf16,"
    "step_time_s,2.0,",
    "Test,GPT-1.7B,,,,,,,,,A100-SXM4-80GB,16,2,2,4,1,1,,1,1,64,none,bf16,"
    "step_time_s,1.5,",
    "Test,GPT3-175B,,,,,,,,,A100-SXM4-80GB,8,8,1,1,1,1,,1,1,8,full,bf16,"
    "step_time_s,60,",
    "Korthikanti2022_Table4,GPT-22B (single transformer layer),22,48,6144,64,"
    "64,24576,51200,2048,A100-SXM4-80GB (Selene),8,8,1,1,1,1,,0,4,4,none,"
    "mixed (16-bit),layer_fwd_ms,7.7,",
    "Test,GPT-1.7B,,,,,,,,,A100-SXM4-80GB,8,1,1,8,1,1,,0,2,64,none,bf16,"
    "allocated_memory_gib,30,",
};

std::string Csv() {
  std::string text = std::string(kHeader) + "\n";
  for (const char* row : kRows) text += std::string(row) + "\n";
  return text;
}

std::vector<AccuracyResult> Predicted() {
  auto table = ParseCsv(Csv(), "best.csv");
  EXPECT_TRUE(table.ok()) << table.status().message();
  if (!table.ok()) return {};
  auto cases = MapAccuracyRows(table.value());
  EXPECT_TRUE(cases.ok()) << cases.status().message();
  if (!cases.ok()) return {};
  return PredictAll(cases.value(), DefaultEstimator());
}

// The rows once searched (one finder for the whole test binary: the
// searches take a fraction of a second each, and the counters are checked
// on a fresh finder in their own test).
const std::vector<AccuracyResult>& Searched() {
  static const std::vector<AccuracyResult>* const kResults = [] {
    auto* results = new std::vector<AccuracyResult>(Predicted());
    BestPlanFinder finder;
    AddBestPlans(results, &finder);
    return results;
  }();
  return *kResults;
}

TEST(AccuracyWithBest, RowsMapAsTheTestExpects) {
  const std::vector<AccuracyResult> results = Predicted();
  ASSERT_EQ(results.size(), 6u);
  for (const AccuracyResult& r : results) {
    ASSERT_TRUE(r.prediction.has_value())
        << "line " << r.row.line << ": " << r.row.skipped_reason;
  }
  EXPECT_FALSE(results[3].prediction->fits);  // 175B on 8 GPUs
}

TEST(AccuracyWithBest, BestPlanIsNoSlowerThanTheRowsOwn) {
  const std::vector<AccuracyResult>& results = Searched();
  ASSERT_EQ(results.size(), 6u);
  for (size_t i : {0u, 1u, 2u}) {
    const AccuracyResult& r = results[i];
    ASSERT_TRUE(r.best.has_value());
    ASSERT_TRUE(r.best->searched) << r.best->reason;
    ASSERT_TRUE(r.best->config.has_value()) << r.best->reason;
    EXPECT_TRUE(r.best->reason.empty());
    EXPECT_GT(r.best->step_s, 0);
    // The row's configuration is in the default space and fits, so the
    // search's rank 1 is as fast or faster, up to the ranking's tie band
    // (tuner/search/ranking.h: within 0.1 % the simpler plan ranks first).
    EXPECT_TRUE(r.prediction->fits);
    EXPECT_LE(r.best->step_s,
              r.prediction->predicted_step_s * (1 + kStepTimeTieFraction))
        << "line " << r.row.line << ": "
        << search_spaces::ToString(*r.best->config) << " vs "
        << search_spaces::ToString(r.row.config);
    EXPECT_GE(r.best->gain_pct, -100 * kStepTimeTieFraction);
    EXPECT_EQ(r.best->config->world(), r.row.num_gpus);
  }
}

TEST(AccuracyWithBest, BestPlanReestimatesToItsStepAndGain) {
  const AccuracyResult& r = Searched()[2];
  ASSERT_TRUE(r.best && r.best->config);
  // The plan, estimated on its own with the calibration Predict() uses,
  // gives the recorded step time; the gain is (row − best)/row.
  const costmodel::DatasheetCalibration calibration(r.row.cluster,
                                                    r.row.attention);
  const costmodel::Estimate e = costmodel::EstimateConfig(
      r.row.model, r.row.cluster, r.row.training, *r.best->config, calibration);
  EXPECT_TRUE(e.fits);
  EXPECT_DOUBLE_EQ(e.step_time_s, r.best->step_s);
  // The plan's breakdown is the estimate's, term by term.
  for (const costmodel::TimeTerm& term : costmodel::kTimeTerms) {
    EXPECT_DOUBLE_EQ(r.best->time.*term.seconds, e.time.*term.seconds)
        << term.name;
  }
  const double row_s = r.prediction->predicted_step_s;
  EXPECT_DOUBLE_EQ(r.best->gain_pct, 100.0 * (row_s - e.step_time_s) / row_s);
}

TEST(AccuracyWithBest, GainArithmeticByHand) {
  // A row predicted at twice the best plan's step: the plan is 50 % faster;
  // at the best's own step, 0 %; at 0.8 of it, the plan is 25 % slower
  // ((0.8 − 1)/0.8).
  const AccuracyResult& r = Searched()[0];
  ASSERT_TRUE(r.best && r.best->config);
  const double best_s = r.best->step_s;
  BestPlanFinder finder;
  EXPECT_DOUBLE_EQ(finder.Find(r.row, 2 * best_s).gain_pct, 50.0);
  EXPECT_DOUBLE_EQ(finder.Find(r.row, best_s).gain_pct, 0.0);
  EXPECT_DOUBLE_EQ(finder.Find(r.row, 0.8 * best_s).gain_pct, -25.0);
  EXPECT_DOUBLE_EQ(finder.Find(r.row, 2 * best_s).step_s, best_s);
}

TEST(AccuracyWithBest, SearchMarginByHand) {
  // 80 GiB usable: the near-capacity band is 5 % of it, 4 GiB.
  EXPECT_DOUBLE_EQ(SearchMarginGib(60, 80), 4.0);
  // A row that leaves only 2 GiB free: the search keeps 2, so the row's own
  // plan stays in the space.
  EXPECT_DOUBLE_EQ(SearchMarginGib(78, 80), 2.0);
  // A row that does not fit: no margin.
  EXPECT_DOUBLE_EQ(SearchMarginGib(81, 80), 0.0);
}

TEST(AccuracyWithBest, BestPlanLeavesTheMarginFree) {
  const AccuracyResult& r = Searched()[0];
  ASSERT_TRUE(r.best && r.best->config);
  const double usable_gib = r.prediction->capacity_gib;
  const double margin_gib =
      SearchMarginGib(r.prediction->memory_gib, usable_gib);
  EXPECT_NEAR(margin_gib, 0.05 * usable_gib, 1e-9);
  const costmodel::DatasheetCalibration calibration(r.row.cluster,
                                                    r.row.attention);
  auto memory_gib = [&](const search_spaces::ParallelConfig& c) {
    return costmodel::EstimateConfig(r.row.model, r.row.cluster, r.row.training,
                                     c, calibration)
               .memory.total_bytes() /
           (1024.0 * 1024 * 1024);
  };
  EXPECT_LE(memory_gib(*r.best->config), usable_gib - margin_gib);
  // A margin the plan does not leave: the search finds another plan, which
  // does, or none.
  const double tight_gib = usable_gib - memory_gib(*r.best->config) + 1.0;
  BestPlanFinder finder;
  const BestPlan tight = finder.Find(r.row, r.best->step_s, tight_gib);
  if (tight.config) {
    EXPECT_LE(memory_gib(*tight.config), usable_gib - tight_gib);
    EXPECT_GE(tight.step_s, r.best->step_s * (1 - kStepTimeTieFraction));
  }
  EXPECT_FALSE(finder.HasSearched(r.row, margin_gib));
  EXPECT_TRUE(finder.HasSearched(r.row, tight_gib));
}

TEST(AccuracyWithBest, LargestSavingByHand) {
  // Row: compute 10 s, tp 2 s, bubble 3 s, host 4 s. Best: compute 9 s,
  // tp 0, bubble 1 s, host 1 s, dp 0.5 s more: savings 1, 2, 2, 3, -0.5 s:
  // host_launch saves most (3 s).
  costmodel::TimeBreakdown row, best;
  row.compute_s = 10, row.tp_comm_s = 2, row.pp_bubble_s = 3, row.host_s = 4;
  best.compute_s = 9, best.pp_bubble_s = 1, best.host_s = 1;
  best.dp_comm_s = 0.5;
  TermSaving s = LargestSaving(row, best);
  EXPECT_STREQ(s.term, "host_launch");
  EXPECT_DOUBLE_EQ(s.saved_s, 3.0);
  // A tie (tp_comm and pp_bubble both 2 s once host saves nothing) goes to
  // the earlier term of kTimeTerms.
  best.host_s = 4;
  s = LargestSaving(row, best);
  EXPECT_STREQ(s.term, "tp_comm");
  EXPECT_DOUBLE_EQ(s.saved_s, 2.0);
  // Nothing lower in the best plan: the least increase, <= 0.
  s = LargestSaving(costmodel::TimeBreakdown(), best);
  EXPECT_STREQ(s.term, "recompute");
  EXPECT_DOUBLE_EQ(s.saved_s, 0.0);
}

TEST(AccuracyWithBest, TimeTermsAddUpToTheStep) {
  // kTimeTerms names every term of TimeBreakdown once: distinct powers of
  // two sum to total_s() only if each is counted exactly once.
  costmodel::TimeBreakdown t;
  double v = 1;
  for (const costmodel::TimeTerm& term : costmodel::kTimeTerms) {
    t.*term.seconds = v;
    v *= 2;
  }
  EXPECT_DOUBLE_EQ(t.total_s(), v - 1);
  EXPECT_EQ(std::size(costmodel::kTimeTerms), 11u);
}

TEST(AccuracyWithBest, EachProblemIsSearchedOnce) {
  std::vector<AccuracyResult> results = Predicted();
  ASSERT_EQ(results.size(), 6u);
  BestPlanFinder finder;
  std::vector<std::pair<int64_t, int64_t>> progress;
  AddBestPlans(&results, &finder, [&](int64_t done, int64_t total) {
    progress.emplace_back(done, total);
  });
  // Lines 2 and 3 share problem A; line 4 is B, line 5 C; lines 6-7 are
  // not searched.
  EXPECT_EQ(finder.searches(), 3);
  EXPECT_EQ(finder.cache_hits(), 1);
  EXPECT_FALSE(results[0].best->cached);
  EXPECT_TRUE(results[1].best->cached);
  EXPECT_FALSE(results[2].best->cached);
  ASSERT_TRUE(results[0].best->config && results[1].best->config);
  EXPECT_EQ(*results[0].best->config, *results[1].best->config);
  EXPECT_DOUBLE_EQ(results[0].best->step_s, results[1].best->step_s);
  const std::vector<std::pair<int64_t, int64_t>> expected = {
      {0, 3}, {1, 3}, {2, 3}, {3, 3}};
  EXPECT_EQ(progress, expected);
  // A second pass over the same rows searches nothing new.
  AddBestPlans(&results, &finder);
  EXPECT_EQ(finder.searches(), 3);
  EXPECT_EQ(finder.cache_hits(), 1 + 4);
}

TEST(AccuracyWithBest, ProblemKeyIgnoresOnlyTheParallelConfiguration) {
  const std::vector<AccuracyResult>& results = Searched();
  const AccuracyCase& a = results[0].row;
  EXPECT_EQ(ProblemKey(a), ProblemKey(results[1].row));  // tp differs
  EXPECT_NE(ProblemKey(a), ProblemKey(results[2].row));  // num_gpus differs
  AccuracyCase changed = a;
  changed.training.global_batch_size = 128;
  EXPECT_NE(ProblemKey(changed), ProblemKey(a));
  changed = a;
  changed.training.seq_length = 4096;
  EXPECT_NE(ProblemKey(changed), ProblemKey(a));
  changed = a;
  changed.training.precision = search_spaces::Precision::kFp8;
  EXPECT_NE(ProblemKey(changed), ProblemKey(a));
  changed = a;
  changed.training.tp_comm_overlap = !a.training.tp_comm_overlap;
  EXPECT_NE(ProblemKey(changed), ProblemKey(a));
  changed = a;
  changed.cluster.name = "h100";
  EXPECT_NE(ProblemKey(changed), ProblemKey(a));
  changed = a;
  changed.attention = costmodel::AttentionKernel::kUnfused;
  EXPECT_NE(ProblemKey(changed), ProblemKey(a));
  // What the notes turn on beyond the model cells: FSDP, offloading,
  // forced balancing.
  changed = a;
  changed.training.megatron_fsdp = !a.training.megatron_fsdp;
  EXPECT_NE(ProblemKey(changed), ProblemKey(a));
  changed = a;
  changed.training.cpu_offloading_num_layers = 20;
  EXPECT_NE(ProblemKey(changed), ProblemKey(a));
  changed = a;
  changed.model.moe_router_force_load_balancing =
      !a.model.moe_router_force_load_balancing;
  EXPECT_NE(ProblemKey(changed), ProblemKey(a));
  // A model variant is a different model.
  changed = a;
  changed.model_key = results[3].row.model_key;
  EXPECT_NE(ProblemKey(changed), ProblemKey(a));
}

TEST(AccuracyWithBest, NothingFitsGivesNoPlanAndTheReason) {
  const AccuracyResult& r = Searched()[3];
  ASSERT_TRUE(r.best.has_value());
  EXPECT_TRUE(r.best->searched);
  EXPECT_FALSE(r.best->config.has_value());
  EXPECT_NE(r.best->reason.find("fits in memory"), std::string::npos)
      << r.best->reason;
  EXPECT_NE(r.best->reason.find("gpt3-175b on 8 x"), std::string::npos)
      << r.best->reason;
}

TEST(AccuracyWithBest, LayerAndMemoryRowsAreNotSearched) {
  const std::vector<AccuracyResult>& results = Searched();
  const BestPlan& layer = *results[4].best;
  EXPECT_FALSE(layer.searched);
  EXPECT_FALSE(layer.config.has_value());
  EXPECT_NE(layer.reason.find("per-layer row"), std::string::npos);
  const BestPlan& memory = *results[5].best;
  EXPECT_FALSE(memory.searched);
  EXPECT_NE(memory.reason.find("memory row"), std::string::npos);
}

TEST(AccuracyWithBest, SummaryCountsAndMedian) {
  const std::vector<AccuracyResult>& results = Searched();
  const AccuracySummary summary = Summarize(results);
  ASSERT_TRUE(summary.with_best.has_value());
  const WithBestSummary& w = *summary.with_best;
  EXPECT_EQ(w.searched, 4);  // lines 2-5
  EXPECT_EQ(w.problems, 3);
  EXPECT_EQ(w.found, 3);
  EXPECT_EQ(w.no_plan, 1);
  // The three gains, by hand: median is the middle one, max the largest.
  std::vector<double> gains = {results[0].best->gain_pct,
                               results[1].best->gain_pct,
                               results[2].best->gain_pct};
  std::sort(gains.begin(), gains.end());
  EXPECT_DOUBLE_EQ(w.median_gain_pct, gains[1]);
  EXPECT_DOUBLE_EQ(w.max_gain_pct, gains[2]);
  int64_t within = 0;
  for (double g : gains) within += g <= kBestGainBarPct ? 1 : 0;
  EXPECT_EQ(w.within, within);
  EXPECT_DOUBLE_EQ(w.within_share_pct, 100.0 * within / 3.0);
  EXPECT_EQ(w.beyond.size(), static_cast<size_t>(3 - within));
  for (size_t k = 1; k < w.beyond.size(); ++k) {
    EXPECT_GE(results[w.beyond[k - 1]].best->gain_pct,
              results[w.beyond[k]].best->gain_pct);
  }
  // Without --with-best the summary has no with_best.
  EXPECT_FALSE(Summarize(Predicted()).with_best.has_value());
}

TEST(AccuracyWithBest, SummaryListsRowsBeyondTheBarLargestFirst) {
  // Gains set by hand: 2 %, 30 %, 12 %, 5 % and one row without a plan.
  std::vector<AccuracyResult> results(5);
  const double gains[] = {2, 30, 12, 5};
  for (size_t i = 0; i < 5; ++i) {
    results[i].row.line = static_cast<int64_t>(i) + 2;
    results[i].row.kind = MetricKind::kStepTime;
    results[i].prediction = AccuracyPrediction{};
    BestPlan b;
    b.searched = true;
    if (i < 4) {
      b.config = search_spaces::ParallelConfig{};
      b.gain_pct = gains[i];
    } else {
      b.reason = "nothing fits";
    }
    results[i].best = b;
  }
  const WithBestSummary w = *Summarize(results).with_best;
  EXPECT_EQ(w.found, 4);
  EXPECT_EQ(w.no_plan, 1);
  EXPECT_EQ(w.within, 2);
  EXPECT_DOUBLE_EQ(w.within_share_pct, 50.0);
  EXPECT_DOUBLE_EQ(w.median_gain_pct, (5.0 + 12.0) / 2);
  EXPECT_DOUBLE_EQ(w.max_gain_pct, 30.0);
  EXPECT_EQ(w.max_gain_line, 3);
  EXPECT_EQ(w.beyond, (std::vector<size_t>{1, 2}));
}

TEST(AccuracyWithBestCommand, JsonCarriesTheBestPlan) {
  const std::string dir = testing::MakeTempDir();
  const std::string csv = dir + "/best.csv";
  testing::WriteFile(csv, Csv());
  const auto run = testing::RunTuneInProcess("accuracy --csv '" + csv +
                                             "' --with-best --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // stderr is not a terminal here: no progress bar.
  EXPECT_EQ(run.err, "");
  const nlohmann::json doc = nlohmann::json::parse(run.out);
  ASSERT_EQ(doc["rows"].size(), 6u);
  const nlohmann::json& row = doc["rows"][0];
  for (const char* key :
       {"best_config", "best_config_text", "best_step_s", "best_gain_pct",
        "best_time_s", "best_term", "best_term_saved_s", "best_reason"}) {
    EXPECT_TRUE(row.contains(key)) << key;
  }
  // The best plan's terms add up to its step; best_term is the term with
  // the largest row − best, and saves what the two breakdowns say.
  ASSERT_TRUE(row["best_time_s"].is_object());
  double best_sum = 0, largest = -1e300;
  std::string largest_term;
  for (const costmodel::TimeTerm& term : costmodel::kTimeTerms) {
    const double saved = row["time_s"][term.name].get<double>() -
                         row["best_time_s"][term.name].get<double>();
    best_sum += row["best_time_s"][term.name].get<double>();
    if (saved > largest) largest = saved, largest_term = term.name;
  }
  EXPECT_NEAR(best_sum, row["best_step_s"].get<double>(), 1e-9 * best_sum);
  EXPECT_EQ(row["best_term"], largest_term);
  EXPECT_NEAR(row["best_term_saved_s"].get<double>(), largest, 1e-12);
  ASSERT_TRUE(row["best_config"].is_object());
  for (const char* key : {"tp", "pp", "dp", "cp", "ep", "vpp", "sp", "mbs",
                          "gbs", "recompute", "dist_opt", "precision"}) {
    EXPECT_TRUE(row["best_config"].contains(key)) << key;
  }
  EXPECT_EQ(row["best_config"]["gbs"], 64);
  EXPECT_EQ(row["best_config"]["precision"], "bf16");
  EXPECT_TRUE(row["best_reason"].is_null());
  EXPECT_LE(row["best_step_s"].get<double>(),
            row["predicted_step_s"].get<double>() * (1 + kStepTimeTieFraction));
  const double pred = row["predicted_step_s"].get<double>();
  EXPECT_NEAR(row["best_gain_pct"].get<double>(),
              100 * (pred - row["best_step_s"].get<double>()) / pred, 1e-9);
  const nlohmann::json& none = doc["rows"][3];
  EXPECT_TRUE(none["best_config"].is_null());
  EXPECT_TRUE(none["best_step_s"].is_null());
  EXPECT_TRUE(none["best_gain_pct"].is_null());
  EXPECT_TRUE(none["best_time_s"].is_null());
  EXPECT_TRUE(none["best_term"].is_null());
  EXPECT_TRUE(none["best_reason"].is_string());
  EXPECT_TRUE(doc["rows"][4]["best_config"].is_null());
  EXPECT_NE(doc["rows"][4]["best_reason"].get<std::string>().find("per-layer"),
            std::string::npos);
  const nlohmann::json& w = doc["summary"]["with_best"];
  EXPECT_EQ(w["searched"], 4);
  EXPECT_EQ(w["problems"], 3);
  EXPECT_EQ(w["found"], 3);
  EXPECT_EQ(w["no_plan"], 1);
  EXPECT_EQ(w["bar_pct"], 10.0);
  for (const char* key : {"within", "within_share_pct", "median_gain_pct",
                          "max_gain_pct", "max_gain_line", "beyond"}) {
    EXPECT_TRUE(w.contains(key)) << key;
  }
  // Each row beyond the bar names the term its best plan saves most on, as
  // its row does.
  ASSERT_FALSE(w["beyond"].empty());
  for (const nlohmann::json& b : w["beyond"]) {
    for (const nlohmann::json& r : doc["rows"]) {
      if (r["line"] != b["line"]) continue;
      EXPECT_EQ(b["term"], r["best_term"]);
      EXPECT_EQ(b["term_saved_s"], r["best_term_saved_s"]);
    }
  }
}

TEST(AccuracyWithBestCommand, TableHasTheGainColumnAndFooter) {
  const std::string dir = testing::MakeTempDir();
  const std::string csv = dir + "/best.csv";
  testing::WriteFile(csv, Csv());
  const auto run =
      testing::RunTuneInProcess("accuracy --csv '" + csv + "' --with-best");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("best_gain"), std::string::npos);
  EXPECT_NE(run.out.find("none fits"), std::string::npos);
  EXPECT_NE(run.out.find("# Rows searched       : 4 (3 distinct problems), "
                         "1 with no feasible plan"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("# Median gain"), std::string::npos);
  // The rows beyond the bar (this file has some: JsonCarriesTheBestPlan)
  // name the term their best plan saves most on.
  EXPECT_NE(run.out.find("largest saving"), std::string::npos) << run.out;
  // Without the flag: no column, no footer, no best_* JSON keys.
  const auto plain = testing::RunTuneInProcess("accuracy --csv '" + csv + "'");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out.find("best_gain"), std::string::npos);
  EXPECT_EQ(plain.out.find("Rows searched"), std::string::npos);
  const auto json =
      testing::RunTuneInProcess("accuracy --csv '" + csv + "' --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json doc = nlohmann::json::parse(json.out);
  EXPECT_FALSE(doc["rows"][0].contains("best_config"));
  EXPECT_FALSE(doc["summary"].contains("with_best"));
}

TEST(AccuracyWithBestCommand, AblationAndWithBestAreExclusive) {
  const std::string dir = testing::MakeTempDir();
  const std::string csv = dir + "/best.csv";
  testing::WriteFile(csv, Csv());
  const auto run = testing::RunTuneInProcess("accuracy --csv '" + csv +
                                             "' --with-best --ablation");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--ablation and --with-best cannot be combined"),
            std::string::npos)
      << run.err;
}

}  // namespace
}  // namespace meshtune::tuner
