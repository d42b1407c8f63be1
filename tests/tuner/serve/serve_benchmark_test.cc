// The run that checks a plan: its load is the plan's, ten requests per
// client, and its means are the cost model's for that run (the calendar
// with the first burst; disaggregated, the burst queueing for the prefill
// ranks; at a rate, Poisson arrivals).
#include "tuner/serve/serve_benchmark.h"

#include <gtest/gtest.h>

#include "costmodel/datasheet_calibration.h"
#include "costmodel/serving_loads.h"
#include "search_spaces/presets/presets.h"

namespace meshtune::tuner {
namespace {

ServeProblem OnH100(const char* model, int64_t gpus,
                    search_spaces::ServingWorkload workload) {
  ServeProblem p;
  p.model = search_spaces::ResolveModel(model).value();
  p.cluster = search_spaces::ResolveCluster("h100").value();
  p.num_gpus = gpus;
  p.workload = workload;
  return p;
}

TEST(BenchmarkRequests, TenWavesWithinBounds) {
  EXPECT_EQ(BenchmarkRequests(4), 100);        // at least 100
  EXPECT_EQ(BenchmarkRequests(190), 1900);     // ten waves
  EXPECT_EQ(BenchmarkRequests(5000), 10000);   // at most 10 000
  EXPECT_EQ(BenchmarkRequests(20352), 40704);  // but two waves
  EXPECT_EQ(BenchmarkRequests(0), 100);
}

TEST(PredictServeBenchmark, ClosedLoopIsThePlansLoadOnTheCalendar) {
  ServeProblem p = OnH100("llama3-70b", 8, {2048, 512, 0});
  p.tpot_target_s = 0.050;
  const costmodel::DatasheetCalibration cal(p.cluster);
  const ServeResult r = ServeSearch(p, cal);
  ASSERT_TRUE(r.best.has_value());
  const ServePoint& best = r.points[*r.best];
  const ServeBenchmark b = PredictServeBenchmark(p, best, cal);
  const int64_t clients = best.estimate.batch * best.estimate.replicas;
  EXPECT_EQ(b.max_concurrency, clients);
  EXPECT_EQ(b.num_prompts, BenchmarkRequests(clients));
  EXPECT_TRUE(b.not_predicted.empty()) << b.not_predicted;
  search_spaces::ServingConfig c = best.config;
  c.max_batch = best.estimate.batch;
  search_spaces::ServingWorkload w = p.workload;
  w.concurrency = clients;
  const costmodel::ServingEstimate e = costmodel::EstimateClosedLoopBenchmark(
      p.model, p.cluster, w, c, p.num_gpus, clients, b.num_prompts, 0, cal);
  EXPECT_DOUBLE_EQ(b.ttft_s, e.ttft_s);
  EXPECT_DOUBLE_EQ(b.tpot_s, e.tpot_s);
  EXPECT_DOUBLE_EQ(b.output_tokens_per_s, e.output_tokens_per_s);
  // The first burst lengthens the run's mean TTFT beyond the steady
  // state's that the plan was ranked by.
  EXPECT_GT(b.ttft_s, best.estimate.ttft_s);
}

TEST(PredictServeBenchmark, APoolOfPrefixesIsComputedOnceEach) {
  // 8192-token prompts whose first 6144 come from a pool of 8 prefixes:
  // the run sends a multiple of 8 prompts, and each replica computes each
  // prefix once (all but the test request's) where one prefix would be
  // computed by that request alone. Both plans are 2x tp4 at 62 (the
  // steady state they are ranked by has every prefix cached).
  search_spaces::ServingWorkload one{8192, 512, 0};
  one.prefix = 6144;
  search_spaces::ServingWorkload eight = one;
  eight.prefix_pool = 8;
  ServeProblem p1 = OnH100("llama3-70b", 8, one),
               p8 = OnH100("llama3-70b", 8, eight);
  p1.tpot_target_s = p8.tpot_target_s = 0.050;
  const costmodel::DatasheetCalibration cal(p1.cluster);
  const ServeResult r1 = ServeSearch(p1, cal), r8 = ServeSearch(p8, cal);
  ASSERT_TRUE(r1.best.has_value());
  ASSERT_TRUE(r8.best.has_value());
  const ServePoint& best = r8.points[*r8.best];
  EXPECT_EQ(best.config.tp, r1.points[*r1.best].config.tp);
  EXPECT_EQ(best.estimate.batch, r1.points[*r1.best].estimate.batch);
  EXPECT_DOUBLE_EQ(best.estimate.ttft_s, r1.points[*r1.best].estimate.ttft_s);
  const ServeBenchmark b8 = PredictServeBenchmark(p8, best, cal);
  const ServeBenchmark b1 = PredictServeBenchmark(p1, best, cal);
  const int64_t clients = best.estimate.batch * best.estimate.replicas;
  EXPECT_EQ(b1.num_prompts, BenchmarkRequests(clients));
  EXPECT_EQ(b8.num_prompts % 8, 0);
  EXPECT_GE(b8.num_prompts, b1.num_prompts);
  EXPECT_LT(b8.num_prompts, b1.num_prompts + 8);
  EXPECT_GT(b8.ttft_s, b1.ttft_s);
  EXPECT_EQ(BenchmarkPrompts(eight, 1), 104);  // 100, rounded up to 8s
  // More prefixes than prompts: one prompt of each.
  eight.prefix_pool = 300;
  EXPECT_EQ(BenchmarkPrompts(eight, 1), 300);
}

TEST(PredictServeBenchmark, DisaggregatedBurstQueuesForThePrefillRanks) {
  ServeProblem p = OnH100("llama3-70b", 16, {8192, 256, 0});
  p.weights = search_spaces::Precision::kFp8;
  p.kv_cache = search_spaces::KvCacheDtype::kFp8;
  p.disaggregated = true;
  p.tpot_target_s = 0.040;
  p.ttft_target_s = 2.0;
  const costmodel::DatasheetCalibration cal(p.cluster);
  const ServeResult r = ServeSearch(p, cal);
  ASSERT_TRUE(r.best.has_value());
  const ServePoint& best = r.points[*r.best];
  ASSERT_TRUE(best.disaggregated);
  const ServeBenchmark b = PredictServeBenchmark(p, best, cal);
  const int64_t clients = best.estimate.batch * best.estimate.replicas;
  EXPECT_EQ(b.max_concurrency, clients);
  search_spaces::ServingWorkload w = p.workload;
  w.concurrency = clients;
  const costmodel::DisaggregatedEstimate d = costmodel::EstimateDisaggregated(
      p.model, p.cluster, w, best.prefill, best.prefill_workers, best.config,
      best.estimate.replicas, cal);
  EXPECT_DOUBLE_EQ(
      b.ttft_s,
      costmodel::DisaggregatedBenchmarkTtft_s(
          d.prefill_s, best.prefill_workers * best.prefill.attention_dp,
          clients, 10 * clients, d.ttft_s));
  EXPECT_DOUBLE_EQ(b.tpot_s, d.tpot_s);
  EXPECT_GT(b.ttft_s, d.ttft_s);
}

TEST(PredictServeBenchmark, RateIsPoissonArrivals) {
  ServeProblem p = OnH100("llama3-8b", 8, {1024, 256, 0});
  p.request_rate = 20;
  const costmodel::DatasheetCalibration cal(p.cluster);
  const ServeResult r = ServeSearch(p, cal);
  ASSERT_TRUE(r.best.has_value());
  const ServePoint& best = r.points[*r.best];
  const ServeBenchmark b = PredictServeBenchmark(p, best, cal);
  EXPECT_EQ(b.max_concurrency, 0);
  EXPECT_DOUBLE_EQ(b.request_rate, 20);
  EXPECT_GE(b.num_prompts, kMinBenchmarkRequests);
  search_spaces::ServingWorkload w = p.workload;
  const costmodel::ServingEstimate e = costmodel::EstimateOpenLoopBenchmark(
      p.model, p.cluster, w, best.config, p.num_gpus, 20, b.num_prompts,
      costmodel::Arrivals::kPoisson, cal);
  EXPECT_DOUBLE_EQ(b.ttft_s, e.ttft_s);
  EXPECT_DOUBLE_EQ(b.tpot_s, e.tpot_s);
  // N requests over a makespan that ramps up and drains: below the rate's
  // tokens.
  EXPECT_LT(b.output_tokens_per_s, 20.0 * 256);
}

}  // namespace
}  // namespace meshtune::tuner
