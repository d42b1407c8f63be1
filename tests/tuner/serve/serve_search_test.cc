// The serving search: its best plan meets the targets on the pass calendar
// and has the most tokens/s per GPU of all points checked there, the batch
// is the largest that meets them there, the front is not dominated, and
// layouts that cannot serve are counted under their reason.
#include "tuner/serve/serve_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "costmodel/datasheet_calibration.h"
#include "costmodel/serving_loads.h"
#include "search_spaces/presets/presets.h"

namespace meshtune::tuner {
namespace {

// `model` on `gpus` H100, serving `workload`, in bf16 unless `fp8`.
ServeProblem OnH100(const char* model, int64_t gpus,
                    search_spaces::ServingWorkload workload, bool fp8 = false) {
  ServeProblem p;
  p.model = search_spaces::ResolveModel(model).value();
  p.cluster = search_spaces::ResolveCluster("h100").value();
  p.num_gpus = gpus;
  p.workload = workload;
  if (fp8) {
    p.weights = search_spaces::Precision::kFp8;
    p.kv_cache = search_spaces::KvCacheDtype::kFp8;
  }
  return p;
}

ServeProblem Llama70bOn8H100() {
  ServeProblem p = OnH100("llama3-70b", 8, {2048, 512, 0});
  p.tpot_target_s = 0.050;
  return p;
}

TEST(ServeSearch, BestMeetsTargetsWithMostTokensPerGpu) {
  const ServeProblem p = Llama70bOn8H100();
  const costmodel::DatasheetCalibration cal(p.cluster);
  const ServeResult r = ServeSearch(p, cal);
  ASSERT_TRUE(r.best.has_value());
  const ServePoint& best = r.points[*r.best];
  EXPECT_TRUE(best.meets_targets);
  EXPECT_TRUE(best.calendar);
  EXPECT_LE(best.estimate.tpot_s, 0.050);
  for (const ServePoint& q : r.points) {
    if (q.meets_targets && q.calendar) {
      EXPECT_LE(q.estimate.output_tokens_per_s_per_gpu,
                best.estimate.output_tokens_per_s_per_gpu);
    }
  }
  // Its numbers are the benchmark's at that concurrency, and it is the
  // largest batch of its layout that meets the target there: one more
  // sequence misses it.
  search_spaces::ServingWorkload w = p.workload;
  const int64_t clients = best.estimate.batch * best.estimate.replicas;
  w.concurrency = clients;
  const costmodel::ServingEstimate bench =
      costmodel::EstimateClosedLoopSteadyState(
          p.model, p.cluster, w, best.config, p.num_gpus, clients, cal);
  EXPECT_DOUBLE_EQ(best.estimate.ttft_s, bench.ttft_s);
  EXPECT_DOUBLE_EQ(best.estimate.tpot_s, bench.tpot_s);
  w.concurrency = clients + best.estimate.replicas;
  const costmodel::ServingEstimate more =
      costmodel::EstimateClosedLoopSteadyState(
          p.model, p.cluster, w, best.config, p.num_gpus, w.concurrency, cal);
  EXPECT_TRUE(!more.fits || more.tpot_s > 0.050);
  // 70.6e9 bf16 weights do not fit one 80 GB H100: tp1 is refused.
  EXPECT_GT(r.rejected.at("out_of_memory"), 0);
}

TEST(ServeSearch, SweepChecksItsCandidatesOnTheCalendar) {
  // LLaMA-3 8B on 8 H100 at 4096/1024 under TTFT 180 ms and TPOT 40 ms.
  // Each layout's largest batch that meets both on the closed form is
  // repriced on the calendar, where cohorts' prompts straddle passes; one
  // misses there and is bisected down.
  ServeProblem p = OnH100("llama3-8b", 8, {4096, 1024, 0});
  p.ttft_target_s = 0.180;
  p.tpot_target_s = 0.040;
  const costmodel::DatasheetCalibration cal(p.cluster);
  const ServeResult r = ServeSearch(p, cal);
  ASSERT_TRUE(r.best.has_value());
  const ServePoint& best = r.points[*r.best];
  EXPECT_TRUE(best.calendar);
  EXPECT_LE(best.estimate.ttft_s, 0.180);
  EXPECT_LE(best.estimate.tpot_s, 0.040);
  // Some closed-form candidate missed on the calendar: its point was
  // repriced in place, and a smaller batch of its layout was added.
  bool repriced_miss = false;
  for (const ServePoint& q : r.points) {
    repriced_miss = repriced_miss || (q.calendar && !q.meets_targets);
  }
  EXPECT_TRUE(repriced_miss);
  // No closed-form point of a layout beats the best on the closed form's
  // own numbers by more than the check's share: the check stopped there.
  for (const ServePoint& q : r.points) {
    if (q.calendar || !q.meets_targets) continue;
    search_spaces::ServingWorkload w = p.workload;
    w.concurrency = q.estimate.batch * q.estimate.replicas;
    const costmodel::ServingEstimate e =
        costmodel::EstimateClosedLoopSteadyState(
            p.model, p.cluster, w, q.config, p.num_gpus, w.concurrency, cal);
    if (e.fits && e.ttft_s <= 0.180 && e.tpot_s <= 0.040) {
      EXPECT_LE(e.output_tokens_per_s_per_gpu,
                best.estimate.output_tokens_per_s_per_gpu / kCalendarCheckShare)
          << q.config.tp << " " << q.config.pp << " " << q.estimate.batch;
    }
  }
  // At the best plan's own batch (2x tp4, 353 sequences each) the closed
  // form's TTFT undercuts the calendar's (130 against 173 ms: the cohorts'
  // 4096-token prompts straddle passes there), which is why candidates are
  // checked on the calendar.
  search_spaces::ServingWorkload w = p.workload;
  w.concurrency = best.estimate.batch * best.estimate.replicas;
  const costmodel::ServingEstimate closed = costmodel::EstimateServing(
      p.model, p.cluster, w, best.config, p.num_gpus, cal);
  EXPECT_LT(closed.ttft_s, 0.9 * best.estimate.ttft_s);
  EXPECT_LE(best.estimate.ttft_s, 0.180);
}

TEST(ServeSearch, CheckSearchesAboveTheClosedFormsMiss) {
  // LLaMA-3 70B on 8 H100 at 2048/512 under TTFT 400 ms. tp8's four
  // 2048-token prompts fill a pass exactly, 353 ms on both prices; at 5
  // clients the closed form prices a cohort of four and one of one, each
  // waiting for the other's pass (415 ms), where the calendar's cohorts
  // regroup (387 ms). The check goes on the calendar past the closed
  // form's miss and bisects: 5 sequences meet, 6 miss.
  ServeProblem p = Llama70bOn8H100();
  p.tpot_target_s = 0;
  p.ttft_target_s = 0.400;
  const costmodel::DatasheetCalibration cal(p.cluster);
  const ServeResult r = ServeSearch(p, cal);
  ASSERT_TRUE(r.best.has_value());
  const ServePoint& best = r.points[*r.best];
  EXPECT_TRUE(best.calendar);
  EXPECT_LE(best.estimate.ttft_s, 0.400);
  auto at = [&](int64_t clients) {
    search_spaces::ServingWorkload w = p.workload;
    w.concurrency = clients;
    return std::make_pair(
        costmodel::EstimateServing(p.model, p.cluster, w, best.config,
                                   p.num_gpus, cal),
        costmodel::EstimateClosedLoopSteadyState(
            p.model, p.cluster, w, best.config, p.num_gpus, clients, cal));
  };
  const int64_t clients = best.estimate.batch * best.estimate.replicas;
  const auto [closed, bench] = at(clients);
  EXPECT_GT(closed.ttft_s, 0.400);  // the closed form alone refuses it
  EXPECT_DOUBLE_EQ(best.estimate.ttft_s, bench.ttft_s);
  EXPECT_GT(at(clients + 1).second.ttft_s, 0.400);
  EXPECT_EQ(best.config.tp, 8);
  EXPECT_EQ(best.estimate.batch, 5);
}

TEST(ServeSearch, FrontIsNotDominated) {
  const ServeProblem p = Llama70bOn8H100();
  const costmodel::DatasheetCalibration cal(p.cluster);
  const ServeResult r = ServeSearch(p, cal);
  ASSERT_FALSE(r.front.empty());
  for (size_t i : r.front) {
    const auto& a = r.points[i].estimate;
    for (const ServePoint& q : r.points) {
      const auto& b = q.estimate;
      const bool dominates =
          b.output_tokens_per_s_per_gpu > a.output_tokens_per_s_per_gpu &&
          b.output_tokens_per_s_per_user > a.output_tokens_per_s_per_user;
      EXPECT_FALSE(dominates);
    }
  }
  // Listed from the fastest per user to the most per GPU.
  for (size_t k = 1; k < r.front.size(); ++k) {
    EXPECT_GE(r.points[r.front[k - 1]].estimate.output_tokens_per_s_per_user,
              r.points[r.front[k]].estimate.output_tokens_per_s_per_user);
    EXPECT_LT(r.points[r.front[k - 1]].estimate.output_tokens_per_s_per_gpu,
              r.points[r.front[k]].estimate.output_tokens_per_s_per_gpu);
  }
}

TEST(ServeSearch, FrontIsPricedOnTheCalendar) {
  // Every aggregated point of a sweep's front is its benchmark's steady
  // state at batch · replicas clients, what --concurrency prints; points
  // off the front keep the closed form.
  const ServeProblem p = Llama70bOn8H100();
  const costmodel::DatasheetCalibration cal(p.cluster);
  const ServeResult r = ServeSearch(p, cal);
  ASSERT_FALSE(r.front.empty());
  bool moved = false;  // a point whose closed form differed
  for (size_t i : r.front) {
    const ServePoint& q = r.points[i];
    ASSERT_TRUE(q.calendar) << q.config.tp << " " << q.estimate.batch;
    search_spaces::ServingWorkload w = p.workload;
    w.concurrency = q.estimate.batch * q.estimate.replicas;
    const costmodel::ServingEstimate bench =
        costmodel::EstimateClosedLoopSteadyState(
            p.model, p.cluster, w, q.config, p.num_gpus, w.concurrency, cal);
    EXPECT_DOUBLE_EQ(q.estimate.ttft_s, bench.ttft_s);
    EXPECT_DOUBLE_EQ(q.estimate.tpot_s, bench.tpot_s);
    EXPECT_DOUBLE_EQ(q.estimate.output_tokens_per_s_per_gpu,
                     bench.output_tokens_per_s_per_gpu);
    const costmodel::ServingEstimate closed = costmodel::EstimateServing(
        p.model, p.cluster, w, q.config, p.num_gpus, cal);
    moved = moved || std::abs(closed.ttft_s / bench.ttft_s - 1) > 0.05;
  }
  // tp8 at 64 sequences: 667 ms on the closed form, 726 ms on the
  // calendar; tp4 at 2 x 101, 1 032 and 1 130 ms.
  EXPECT_TRUE(moved);
  size_t closed_form = 0;
  for (const ServePoint& q : r.points) closed_form += !q.calendar;
  EXPECT_GT(closed_form, r.points.size() / 2);
}

TEST(ServeSearch, MoeLayoutsUseAttentionDataParallelism) {
  const ServeProblem p = OnH100("qwen3-30b-a3b", 4, {1024, 1024, 256}, true);
  const costmodel::DatasheetCalibration cal(p.cluster);
  const ServeResult r = ServeSearch(p, cal);
  bool dep = false;
  for (const ServePoint& q : r.points) {
    dep = dep || (q.config.attention_dp == 4 && q.config.ep == 4);
    // A fixed concurrency: every point runs it.
    EXPECT_EQ(q.estimate.batch * q.estimate.replicas, 256);
  }
  EXPECT_TRUE(dep);
  ASSERT_TRUE(r.best.has_value());
}

TEST(ServeSearch, FixedConcurrencyIsPricedAsItsBenchmark) {
  // LLaMA-3 70B on 8 H100 at 64 clients: each point is the closed-loop
  // benchmark's steady state (the pass calendar), the TTFT tune accuracy
  // compares with published points. 256 clients exceed the cache of some
  // layouts (4 replicas of tp 2 hold 20 sequences each), which are refused
  // rather than left to queue their clients.
  const ServeProblem p = OnH100("llama3-70b", 8, {2048, 512, 64});
  const costmodel::DatasheetCalibration cal(p.cluster);
  const ServeResult r = ServeSearch(p, cal);
  ASSERT_FALSE(r.points.empty());
  for (const ServePoint& q : r.points) {
    const costmodel::ServingEstimate bench =
        costmodel::EstimateClosedLoopSteadyState(p.model, p.cluster, p.workload,
                                                 q.config, p.num_gpus, 64, cal);
    EXPECT_DOUBLE_EQ(q.estimate.ttft_s, bench.ttft_s);
    EXPECT_DOUBLE_EQ(q.estimate.tpot_s, bench.tpot_s);
  }
  const ServeResult crowded =
      ServeSearch(OnH100("llama3-70b", 8, {2048, 512, 256}), cal);
  EXPECT_GT(crowded.rejected.at("batch_limit"), 0);
  for (const ServePoint& q : crowded.points) {
    EXPECT_LE(q.estimate.batch, q.estimate.max_sequences);
  }
}

TEST(ServeSearch, ImpossibleTargetsLeaveNoBest) {
  ServeProblem p = Llama70bOn8H100();
  p.tpot_target_s = 1e-4;
  const costmodel::DatasheetCalibration cal(p.cluster);
  const ServeResult r = ServeSearch(p, cal);
  EXPECT_FALSE(r.points.empty());
  EXPECT_FALSE(r.best.has_value());
}

TEST(ServeProblem, ChecksInputs) {
  ServeProblem p = Llama70bOn8H100();
  EXPECT_TRUE(ValidateServeProblem(p).ok());
  p.num_gpus = 0;
  EXPECT_EQ(ValidateServeProblem(p).message(),
            "--gpus must be at least 1, got 0");
  p = Llama70bOn8H100();
  p.ttft_target_s = -1;
  EXPECT_EQ(ValidateServeProblem(p).message(),
            "--ttft-ms and --tpot-ms must be positive");
  p = Llama70bOn8H100();
  p.workload.osl = 0;
  EXPECT_EQ(ValidateServeProblem(p).message(),
            "--isl and --osl must be at least 1 token, got 2048 and 0");
}

TEST(ServeSearch, DisaggregatedSplitsUseEveryGpu) {
  ServeProblem p = OnH100("llama3-70b", 16, {8192, 256, 0}, true);
  p.disaggregated = true;
  const costmodel::DatasheetCalibration cal(p.cluster);
  const ServeResult r = ServeSearch(p, cal);
  int64_t disaggregated = 0;
  for (const ServePoint& q : r.points) {
    if (!q.disaggregated) continue;
    ++disaggregated;
    EXPECT_EQ(q.prefill.pp, 1);
    EXPECT_EQ(q.prefill_workers * q.prefill.gpus() +
                  q.estimate.replicas * q.config.gpus(),
              16)
        << ToString(q.prefill) << " x" << q.prefill_workers << " + "
        << ToString(q.config) << " x" << q.estimate.replicas;
    // The closed loop of the cost model, from the same parts.
    const double prefill = costmodel::PrefillTime_s(
        p.model, p.cluster, q.prefill, 8192 * q.prefill.attention_dp,
        q.prefill.attention_dp, cal);
    const costmodel::DisaggregatedLoop loop =
        costmodel::DisaggregatedClosedLoop(
            prefill, q.prefill_workers * q.prefill.attention_dp / prefill,
            q.estimate.tpot_s, q.estimate.batch * q.estimate.replicas, 256);
    EXPECT_NEAR(q.estimate.output_tokens_per_s, loop.requests_per_s * 256,
                1e-6 * q.estimate.output_tokens_per_s);
    EXPECT_NEAR(q.estimate.ttft_s, loop.ttft_s, 1e-9);
  }
  EXPECT_GT(disaggregated, 0);
  // Without the flag, none.
  p.disaggregated = false;
  for (const ServePoint& q : ServeSearch(p, cal).points) {
    EXPECT_FALSE(q.disaggregated);
  }
}

TEST(ServeSearch, DisaggregatedWorkersNeedNotDivideTheGpus) {
  // 24 H100: tp8·pp2 (16 GPUs) does not divide 24, so it is no aggregated
  // plan, but 1 prefill worker of 8 GPUs + 1 decode worker of 16 is a split.
  ServeProblem p = OnH100("llama3-70b", 24, {4096, 512, 0}, true);
  p.disaggregated = true;
  const costmodel::DatasheetCalibration cal(p.cluster);
  const ServeResult r = ServeSearch(p, cal);
  bool sixteen = false;
  for (const ServePoint& q : r.points) {
    if (!q.disaggregated) {
      EXPECT_EQ(24 % q.config.gpus(), 0) << ToString(q.config);
      continue;
    }
    EXPECT_EQ(q.prefill_workers * q.prefill.gpus() +
                  q.estimate.replicas * q.config.gpus(),
              24);
    sixteen = sixteen || q.config.gpus() == 16 || q.prefill.gpus() == 16;
  }
  EXPECT_TRUE(sixteen);
}

TEST(ServeSearch, DisaggregatedAtAFixedConcurrency) {
  ServeProblem p = OnH100("llama3-8b", 4, {4096, 128, 64});
  p.disaggregated = true;
  const costmodel::DatasheetCalibration cal(p.cluster);
  const ServeResult r = ServeSearch(p, cal);
  int64_t disaggregated = 0;
  for (const ServePoint& q : r.points) {
    if (!q.disaggregated) continue;
    ++disaggregated;
    // Each decode worker holds its share of the 64 requests.
    EXPECT_EQ(q.estimate.batch,
              (64 + q.estimate.replicas - 1) / q.estimate.replicas);
  }
  EXPECT_GT(disaggregated, 0);
}

TEST(ServeSearch, DisaggregatedDecodeWorkersEmitTheirAcceptedDrafts) {
  // DeepSeek-V3 fp8 on 16 H200 at 64 clients, disaggregated (one 8-GPU
  // worker a side), each draft length from 0 to 2 at rates 0.8 and 0.5: a
  // decode worker's token is its step over the tokens the step emits (1,
  // 1.8 or 2.2), and both sides of a point run the same drafter.
  ServeProblem p = OnH100("deepseek-v3", 16, {1024, 256, 64}, /*fp8=*/true);
  p.cluster = search_spaces::ResolveCluster("h200").value();
  p.workload.nextn_accept_rates = {0.8, 0.5};
  p.disaggregated = true;
  ASSERT_TRUE(ValidateServeProblem(p).ok());
  const costmodel::DatasheetCalibration cal(p.cluster);
  const ServeResult r = ServeSearch(p, cal);
  const double progress[] = {1.0, 1.8, 2.2};
  std::set<int64_t> lengths;
  for (const ServePoint& q : r.points) {
    if (!q.disaggregated) continue;
    lengths.insert(q.config.nextn);
    EXPECT_EQ(q.prefill.nextn, q.config.nextn);
    EXPECT_NEAR(q.estimate.tpot_s * progress[q.config.nextn],
                q.estimate.decode.total_s(), 1e-12);
    EXPECT_NEAR(q.estimate.output_tokens_per_s_per_user * q.estimate.tpot_s,
                1.0, 1e-12);
  }
  EXPECT_EQ(lengths, (std::set<int64_t>{0, 1, 2}));
}

TEST(ServeSearch, RequestRateGivesOnePointPerLayout) {
  ServeProblem p = OnH100("llama3-8b", 4, {1024, 256, 0});
  p.request_rate = 20;
  ASSERT_TRUE(ValidateServeProblem(p).ok());
  const costmodel::DatasheetCalibration cal(p.cluster);
  const ServeResult r = ServeSearch(p, cal);
  ASSERT_FALSE(r.points.empty());
  for (const ServePoint& q : r.points) {
    EXPECT_DOUBLE_EQ(q.estimate.output_tokens_per_s, 20.0 * 256);
  }
  // Every layout serves the same tokens per GPU; the best is the fastest
  // per token.
  ASSERT_TRUE(r.best.has_value());
  for (const ServePoint& q : r.points) {
    EXPECT_GE(q.estimate.tpot_s, r.points[*r.best].estimate.tpot_s);
  }
  p.workload.concurrency = 8;
  EXPECT_EQ(ValidateServeProblem(p).message(),
            "--request-rate and --concurrency cannot be combined");
  p.workload.concurrency = 0;
  p.disaggregated = true;
  EXPECT_EQ(ValidateServeProblem(p).message(),
            "--request-rate prices aggregated deployments only");
}

}  // namespace
}  // namespace meshtune::tuner
