// The serving load models against hand-computed values and against each
// other: the memory a replica leaves to the KV cache, continuous batching
// in closed form, a request rate by Little's law, benchmarks pass by pass
// on the calendar, and disaggregated prefill and decode workers.
#include "costmodel/serving_loads.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "costmodel/datasheet_calibration.h"
#include "search_spaces/presets/presets.h"

namespace meshtune::costmodel {
namespace {

using search_spaces::ClusterSpec;
using search_spaces::KvCacheDtype;
using search_spaces::ModelSpec;
using search_spaces::Precision;
using search_spaces::ServingConfig;
using search_spaces::ServingWorkload;

ModelSpec Preset(const char* name) {
  return search_spaces::ResolveModel(name).value();
}
ClusterSpec Cluster(const char* name) {
  return search_spaces::ResolveCluster(name).value();
}

TEST(EstimateServing, WeightsThatDoNotFitAreRefused) {
  const ModelSpec m = Preset("llama3-70b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;  // 70.6e9 · 2 B on one 80 GB GPU
  const ServingEstimate e = EstimateServing(m, h100, {1024, 256, 0}, c, 1, cal);
  EXPECT_FALSE(e.fits);
  EXPECT_EQ(e.infeasible_reason, "out_of_memory: the weights do not fit");
}

TEST(EstimateServing, KvCacheHoldsWhatIsLeft) {
  const ModelSpec m = Preset("llama3-70b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;
  c.tp = 8;
  c.weights = Precision::kFp8;
  c.kv_cache = KvCacheDtype::kFp8;
  const ServingWorkload w{2048, 512, 0};
  const ServingEstimate e = EstimateServing(m, h100, w, c, 8, cal);
  ASSERT_TRUE(e.fits) << e.infeasible_reason;
  const double usable = h100.UsableMemoryGib() * 1073741824.0;
  EXPECT_NEAR(
      e.kv_cache_bytes,
      c.kv_cache_memory_fraction * (usable - e.weight_bytes - e.runtime_bytes),
      1.0);
  // Runtime: 8192 tokens of 4·h plus two outputs of the widest local GEMM,
  // 16-bit. That is the out-projection's and fc2's full h = 8192 partial
  // sums (before their all-reduce), wider than fc1 with its gate (2 ·
  // 28 672 / 8 = 7168) or QKV ((8 + 2) · 128 = 1280); not the layer's sum
  // of 24 832. Plus fp32 logits of 2048 tokens over the padded
  // vocabulary's 129 024 / 8 = 16 128 local columns.
  EXPECT_NEAR(e.runtime_bytes,
              8192.0 * (4 * 8192 + 2 * 8192) * 2 + 2048.0 * 16128 * 4, 1.0);
  // 80 layers · 2 · 1 group · 128 · 1 B per token on each of the 8 GPUs.
  EXPECT_DOUBLE_EQ(e.kv_bytes_per_sequence, 80 * 2 * 128 * 2560.0);
  EXPECT_EQ(e.max_sequences,
            static_cast<int64_t>(e.kv_cache_bytes / e.kv_bytes_per_sequence));
  EXPECT_EQ(e.batch, std::min<int64_t>(e.max_sequences, kDefaultMaxBatch));
  EXPECT_EQ(e.replicas, 1);
  // The memory alone, as trtllm-bench's sizing reads it: the same numbers,
  // no batch or times.
  const ServingEstimate memory = EstimateServingMemory(m, h100, w, c);
  EXPECT_EQ(memory.max_sequences, e.max_sequences);
  EXPECT_DOUBLE_EQ(memory.kv_cache_bytes, e.kv_cache_bytes);
  EXPECT_DOUBLE_EQ(memory.runtime_bytes, e.runtime_bytes);
  EXPECT_EQ(memory.batch, 0);
  EXPECT_DOUBLE_EQ(memory.step_s, 0.0);
}

TEST(EstimateServing, ContinuousBatchingLoadModel) {
  const ModelSpec m = Preset("llama3-8b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;
  const ServingWorkload w{1000, 100, 64};
  const ServingEstimate e = EstimateServing(m, h100, w, c, 2, cal);
  ASSERT_TRUE(e.fits) << e.infeasible_reason;
  EXPECT_EQ(e.replicas, 2);
  EXPECT_EQ(e.batch, 32);  // 64 requests over 2 replicas
  const DecodeBreakdown d = DecodeStep(m, h100, c, 32, 1050, cal);
  EXPECT_DOUBLE_EQ(e.decode.total_s(), d.total_s());
  // The closed loop's requests move in cohorts that one step's 8192-token
  // budget prefills together: 8 of 1000 tokens, 32 / 8 = 4 cohorts, each
  // prefilled once per 100 steps. A request's 99 decode steps carry the
  // other 3 cohorts' prefills.
  const double prefill = PrefillTime_s(m, h100, c, 1000, 1, cal);
  const double cohort = PrefillTime_s(m, h100, c, 8000, 8, cal);
  EXPECT_NEAR(e.step_s, d.total_s() + 4 * cohort / 100, 1e-12);
  EXPECT_NEAR(e.tpot_s, d.total_s() + 3 * cohort / 99, 1e-12);
  // TTFT: the pass of the request's cohort's prefill, beside the other 3
  // cohorts' 24 decodes, the host working through all 32 requests; the
  // requests miss the pass in flight when they arrive, 2 − 1/√4 = 1.5
  // such passes in all.
  const DecodeBreakdown others = DecodeStep(m, h100, c, 24, 1050, cal);
  EXPECT_DOUBLE_EQ(e.ttft_s, 1.5 * PassWithHost_s(others.gpu_s() + cohort,
                                                  d.host_s, d.host_after_gpu));
  EXPECT_GT(e.ttft_s, 7 * prefill);
  EXPECT_NEAR(e.output_tokens_per_s, 2 * 32 / e.step_s, 1e-9);
  EXPECT_NEAR(e.output_tokens_per_s_per_gpu, e.output_tokens_per_s / 2, 1e-9);
  // One cohort: its requests' decode steps carry no prefill, and its
  // prefill pass no decodes, only the step overhead: the pass calendar's
  // TTFT and TPOT to rounding (a decode step of all 8 on top of the
  // prefill had put the TTFT 4 % above it).
  const ServingEstimate one =
      EstimateServing(m, h100, {1000, 100, 8}, c, 1, cal);
  EXPECT_NEAR(one.tpot_s, DecodeStep(m, h100, c, 8, 1050, cal).total_s(),
              1e-12);
  const ServingEstimate bench =
      EstimateClosedLoopSteadyState(m, h100, {1000, 100, 8}, c, 1, 8, cal);
  EXPECT_NEAR(one.ttft_s, bench.ttft_s, 1e-9 * bench.ttft_s);
  EXPECT_NEAR(one.tpot_s, bench.tpot_s, 1e-9 * bench.tpot_s);
  // Offline, the same batch's prefills come spread over the steps: 32/100
  // of one prompt a step.
  ServingConfig capped = c;
  capped.max_batch = 32;
  const ServingEstimate offline =
      EstimateServing(m, h100, {1000, 100, 0}, capped, 1, cal);
  ASSERT_EQ(offline.batch, 32);
  EXPECT_NEAR(offline.step_s, d.total_s() + 0.32 * prefill, 1e-12);
  EXPECT_DOUBLE_EQ(offline.tpot_s, offline.step_s);
  // More requests than the cache holds: refused with the numbers.
  const ServingEstimate over =
      EstimateServing(m, h100, {1000, 100, 1000000}, c, 1, cal);
  EXPECT_FALSE(over.fits);
  EXPECT_EQ(over.infeasible_reason.rfind("batch_limit: 1000000 sequences", 0),
            0u)
      << over.infeasible_reason;
}

TEST(EstimateServing, OfflineBatchFitsTheStepsTokenBudget) {
  // LLaMA-3 8B on an H100 holds over 850 483-token sequences (496 tokens
  // each in vLLM's 16-token pages), but each
  // offline step carries B decode tokens and B/16 prefills of 467 tokens
  // within 8192: B ≤ 8192 · 16 / 483 = 271.4, so 271.
  const ModelSpec m = Preset("llama3-8b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;
  const ServingEstimate e = EstimateServing(m, h100, {467, 16, 0}, c, 1, cal);
  ASSERT_TRUE(e.fits) << e.infeasible_reason;
  EXPECT_GT(e.max_sequences, 850);
  EXPECT_EQ(e.batch, 271);
  // A closed loop's concurrency is its batch.
  EXPECT_EQ(EstimateServing(m, h100, {467, 16, 400}, c, 1, cal).batch, 400);
  // Over 2 pipeline stages each of the 2 micro-batches in flight has its
  // own budget: B ≤ 2 · 8192 · 16 / 483 = 542.8, so 542.
  c.pp = 2;
  EXPECT_EQ(EstimateServing(m, h100, {467, 16, 0}, c, 2, cal).batch, 542);
}

TEST(EstimateServing, SpeculationEmitsTheAcceptedTokensOfEachStep) {
  // LLaMA-3 8B given one MTP depth on an H100, 3 drafts a step of which
  // 1.5 are accepted: a step emits 2.5 tokens per request.
  ModelSpec m = Preset("llama3-8b");
  m.mtp_num_layers = 1;
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;
  c.nextn = 3;
  ServingWorkload w{1000, 100, 64};
  w.nextn_accepted = 1.5;
  // A closed loop of 64 over 2 replicas: 4 cohorts of 8 (as above), each
  // prefilled once every 100 / 2.5 = 40 steps; a request's decode steps,
  // 99 / 2.5 of them, carry the other 3 cohorts' prefills.
  const ServingEstimate e = EstimateServing(m, h100, w, c, 2, cal);
  ASSERT_TRUE(e.fits) << e.infeasible_reason;
  const double step = DecodeStep(m, h100, c, 32, 1050, cal).total_s();
  const double cohort = PrefillTime_s(m, h100, c, 8000, 8, cal);
  EXPECT_NEAR(e.step_s, step + 4 * cohort * 2.5 / 100, 1e-12);
  EXPECT_NEAR(e.tpot_s, (step + 3 * cohort * 2.5 / 99) / 2.5, 1e-12);
  EXPECT_NEAR(e.output_tokens_per_s, 2 * 32 * 2.5 / e.step_s, 1e-9);
  // Offline, each decode takes 4 tokens of the 8192-token budget and a
  // step finishes B · 2.5 / 16 requests of 467 prompt tokens:
  // B ≤ 8192 · 16 / (16 · 4 + 467 · 2.5) = 106.4, so 106 (271 with one
  // token a decode, OfflineBatchFitsTheStepsTokenBudget).
  ServingWorkload offline{467, 16, 0};
  offline.nextn_accepted = 1.5;
  const ServingEstimate o = EstimateServing(m, h100, offline, c, 1, cal);
  ASSERT_TRUE(o.fits) << o.infeasible_reason;
  EXPECT_EQ(o.batch, 106);
  EXPECT_NEAR(o.tpot_s * 2.5, o.step_s, 1e-15);
  // Disaggregated decode workers step without prefills: a token is a
  // step over 2.5.
  ServingWorkload eight{1000, 100, 8};
  eight.nextn_accepted = 1.5;
  const DisaggregatedEstimate d =
      EstimateDisaggregated(m, h100, eight, c, 1, c, 1, cal);
  ASSERT_TRUE(d.fits) << d.infeasible_reason;
  EXPECT_NEAR(d.tpot_s, DecodeStep(m, h100, c, 8, 1050, cal).total_s() / 2.5,
              1e-15);
}

TEST(EstimateServing, ACachedPrefixShortensThePrefillsAndIsStoredOnce) {
  // LLaMA-3 8B on an H100, 4096-token prompts of which the first 3072 are
  // in the prefix cache, 128 output tokens.
  const ModelSpec m = Preset("llama3-8b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;
  ServingWorkload cached{4096, 128, 1};
  cached.prefix = 3072;
  const double prompt = PromptsPrefillTime_s(m, h100, c, 4096, 3072, 1, cal);
  // One client: its prompt's pass is the step overhead and the prefill of
  // 1024 new tokens attending to the 3072 cached ones, in closed form and
  // on the calendar alike.
  const ServingEstimate closed = EstimateServing(m, h100, cached, c, 1, cal);
  ASSERT_TRUE(closed.fits) << closed.infeasible_reason;
  EXPECT_DOUBLE_EQ(closed.prefill_s, prompt);
  EXPECT_NEAR(closed.ttft_s, StepOverhead_s(c.engine) + prompt, 1e-12);
  const ServingEstimate bench =
      EstimateClosedLoopBenchmark(m, h100, cached, c, 1, 1, 1, 0, cal);
  EXPECT_NEAR(bench.ttft_s, StepOverhead_s(c.engine) + prompt, 1e-12);
  // The prefix's 3072 tokens (192 whole 16-token pages) are stored once,
  // 131 072 B a token (32 layers · 2 · 8 groups · 128 · 2 B); each
  // sequence holds its other 1152 tokens.
  const ServingEstimate whole =
      EstimateServing(m, h100, {4096, 128, 1}, c, 1, cal);
  EXPECT_EQ(closed.kv_shared_prefix_tokens, 3072);
  EXPECT_DOUBLE_EQ(closed.kv_shared_prefix_bytes, 3072 * 131072.0);
  EXPECT_DOUBLE_EQ(closed.kv_bytes_per_sequence, 1152 * 131072.0);
  EXPECT_DOUBLE_EQ(whole.kv_bytes_per_sequence, 4224 * 131072.0);
  EXPECT_EQ(
      closed.max_sequences,
      static_cast<int64_t>(std::floor(
          (closed.kv_cache_bytes - 3072 * 131072.0) / (1152 * 131072.0))));
  EXPECT_LT(closed.ttft_s, 0.4 * whole.ttft_s);
  // Four distinct prefixes (aiperf's prefix pool of 4) take four copies.
  ServingWorkload pool = cached;
  pool.prefix_pool = 4;
  const ServingEstimate four = EstimateServing(m, h100, pool, c, 1, cal);
  EXPECT_DOUBLE_EQ(four.kv_shared_prefix_bytes, 4 * 3072 * 131072.0);
  EXPECT_EQ(
      four.max_sequences,
      static_cast<int64_t>(std::floor(
          (four.kv_cache_bytes - 4 * 3072 * 131072.0) / (1152 * 131072.0))));
  // A prefix short of a whole page is each sequence's own (the engines
  // share whole blocks only): 3071 tokens share 191 pages, 3056 tokens.
  ServingWorkload ragged = cached;
  ragged.prefix = 3071;
  EXPECT_EQ(EstimateServing(m, h100, ragged, c, 1, cal).kv_shared_prefix_tokens,
            3056);
  // Offline, each step's budget carries B decodes and B/128 prefills. On
  // an H200 with an FP8 cache, 2048-token prompts: whole, B ≤ 8192 · 128 /
  // 2176 = 481.9; with 1536 cached, 512 new tokens allow 8192 · 128 / 640
  // = 1638.4, and the cache, holding the prefix once, has room for more.
  const ClusterSpec h200 = Cluster("h200");
  const DatasheetCalibration cal200(h200);
  ServingConfig fp8 = c;
  fp8.kv_cache = KvCacheDtype::kFp8;
  ServingWorkload offline{2048, 128, 0};
  EXPECT_EQ(EstimateServing(m, h200, offline, fp8, 1, cal200).batch, 481);
  offline.prefix = 1536;
  const ServingEstimate lifted =
      EstimateServing(m, h200, offline, fp8, 1, cal200);
  ASSERT_TRUE(lifted.fits) << lifted.infeasible_reason;
  EXPECT_GT(lifted.max_sequences, 1638);
  EXPECT_EQ(lifted.batch, 1638);
  // A disaggregated prefill worker computes the same 1024 tokens.
  const DisaggregatedEstimate d =
      EstimateDisaggregated(m, h100, cached, c, 1, c, 1, cal);
  ASSERT_TRUE(d.fits) << d.infeasible_reason;
  EXPECT_DOUBLE_EQ(d.prefill_s, prompt);
}

TEST(EstimateServing, PipelineStagesOverlapTheOfflinePrefills) {
  // LLaMA-3 70B fp8 over 4 pipeline stages of an H100 each, offline
  // 2048/128: each step's B/128 prefills pass the stages one after the
  // other while the stages run other micro-batches, so a step (a round of
  // the pipeline) holds a quarter of their time on top of the decode.
  const ModelSpec m = Preset("llama3-70b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;
  c.pp = 4;
  c.weights = Precision::kFp8;
  c.kv_cache = KvCacheDtype::kFp8;
  const ServingWorkload w{2048, 128, 0};
  const ServingEstimate e = EstimateServing(m, h100, w, c, 4, cal);
  ASSERT_TRUE(e.fits) << e.infeasible_reason;
  const int64_t seqs = (e.batch + 127) / 128;
  const double new_per_step = e.batch / 128.0;
  const double prefills =
      PrefillTime_s(m, h100, c, seqs * 2048, seqs, cal) * new_per_step / seqs;
  EXPECT_NEAR(e.step_s, e.decode.total_s() + prefills / 4, 1e-12);
  // Its TTFT still waits for every stage of its own prefill.
  EXPECT_GT(e.ttft_s, e.prefill_s);
}

TEST(EstimateServing, BalancedAttentionDpRanksPrefillSideBySideOffline) {
  // LLaMA-3 8B over 4 attention-DP ranks of one H100 each, offline
  // 2048/4096, with TensorRT-LLM's attention-DP balance: a step's B/4096
  // (< 1) new prompts wait for a prompt on every rank, so the step prices
  // a batch of a prompt per rank, run side by side (the busiest rank's),
  // in a fraction B/4096/4 of the steps.
  const ModelSpec m = Preset("llama3-8b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;
  c.attention_dp = 4;
  c.attention_dp_balance = true;
  const ServingWorkload w{2048, 4096, 0};
  const ServingEstimate e = EstimateServing(m, h100, w, c, 4, cal);
  ASSERT_TRUE(e.fits) << e.infeasible_reason;
  const double new_per_step = e.batch / 4096.0;
  ASSERT_LT(new_per_step, 1.0);
  const double prefills =
      PrefillTime_s(m, h100, c, 4 * 2048, 4, cal) * new_per_step / 4;
  EXPECT_NEAR(e.step_s, e.decode.total_s() + prefills, 1e-12);
  // A prompt per rank costs what one prompt on one GPU would.
  const ServingConfig one;
  EXPECT_DOUBLE_EQ(PrefillTime_s(m, h100, c, 4 * 2048, 4, cal),
                   PrefillTime_s(m, h100, one, 2048, 1, cal));
}

TEST(EstimateServing, UnbalancedAttentionDpPromptsStallTheOtherRanks) {
  // The same without the balance (every engine's default): each rank is
  // busy with a prompt (one chunk: 2048 tokens fit the 8192-token budget
  // beside its decodes) in k = B/4096/4 of the steps, and a step waits for
  // any busy rank, 1 − (1 − k)^4 of them: the side-by-side share times
  // (1 − (1 − k)^4) / k, which for a dense model is one prompt on one
  // rank in 1 − (1 − k)^4 of the steps.
  const ModelSpec m = Preset("llama3-8b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;
  c.attention_dp = 4;
  const ServingWorkload w{2048, 4096, 0};
  const ServingEstimate e = EstimateServing(m, h100, w, c, 4, cal);
  ASSERT_TRUE(e.fits) << e.infeasible_reason;
  const double k = e.batch / 4096.0 / 4;
  const double stalled = 1.0 - std::pow(1.0 - k, 4);
  const double prefill = PrefillTime_s(m, h100, ServingConfig(), 2048, 1, cal);
  EXPECT_NEAR(e.step_s, e.decode.total_s() + prefill * stalled, 1e-12);
  // More than balanced (a prompt on every rank at once, in k of the
  // steps), less than each prompt alone (in 4k of them).
  EXPECT_GT(stalled, k);
  EXPECT_LT(stalled, 4 * k);
}

TEST(EstimateOpenLoopBenchmark, PipelinePassesPayTheirSlowestMicroBatch) {
  // LLaMA-3 70B fp8 over 4 pipeline stages. One request: its prompt is the
  // only micro-batch with a prefill, and every slot of the round runs it on
  // one stage, so its first token comes after the prefill's whole latency,
  // as the closed form's TTFT has it.
  const ModelSpec m = Preset("llama3-70b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;
  c.pp = 4;
  c.weights = Precision::kFp8;
  c.kv_cache = KvCacheDtype::kFp8;
  ServingWorkload w{2048, 2, 0};
  const ServingEstimate one =
      EstimateOpenLoopBenchmark(m, h100, w, c, 4, 1.0, 1, Arrivals::kEven, cal);
  ASSERT_TRUE(one.fits) << one.infeasible_reason;
  const double prefill_s = PrefillTime_s(m, h100, c, 2048, 1, cal);
  EXPECT_NEAR(one.ttft_s, StepOverhead_s(c.engine) + prefill_s, 1e-12);
  w.concurrency = 1;
  EXPECT_NEAR(EstimateServing(m, h100, w, c, 4, cal).ttft_s, one.ttft_s, 1e-12);
  // Sixteen 8192-token prompts at once fill the four micro-batches (8192
  // tokens each) of each of four passes: each pass pays one prompt's
  // latency, a quarter of the four's, and the mean first token comes
  // 2.5 of them after the start.
  w = ServingWorkload{8192, 1, 0};
  const ServingEstimate burst = EstimateOpenLoopBenchmark(
      m, h100, w, c, 4, std::numeric_limits<double>::infinity(), 16,
      Arrivals::kEven, cal);
  ASSERT_TRUE(burst.fits) << burst.infeasible_reason;
  const double pass_s =
      StepOverhead_s(c.engine) + PrefillTime_s(m, h100, c, 8192, 1, cal);
  EXPECT_NEAR(burst.ttft_s, 2.5 * pass_s, 1e-9);
}

TEST(EstimateOpenLoopBenchmark, ADatasetsLongRequestsDrainAlone) {
  // 500 requests of LLaMA-3 8B sent at once to one H100, 202 prompt and 214
  // output tokens on average: with every request those lengths they decode
  // together and finish together; spread as a dataset's (exponential,
  // the longest several times the mean) the last long ones decode nearly
  // alone, so the run takes longer for the same tokens, and their fast
  // lone steps weigh more in the pooled ITL than in the mean TPOT.
  const ModelSpec m = Preset("llama3-8b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  const ServingConfig c;
  ServingWorkload w{202, 214, 0};
  const ServingEstimate fixed = EstimateOpenLoopBenchmark(
      m, h100, w, c, 1, std::numeric_limits<double>::infinity(), 500,
      Arrivals::kPoisson, cal);
  w.lengths = search_spaces::LengthSpread::kExponential;
  const ServingEstimate spread = EstimateOpenLoopBenchmark(
      m, h100, w, c, 1, std::numeric_limits<double>::infinity(), 500,
      Arrivals::kPoisson, cal);
  ASSERT_TRUE(fixed.fits && spread.fits);
  EXPECT_LT(spread.output_tokens_per_s, 0.8 * fixed.output_tokens_per_s);
  EXPECT_NEAR(fixed.itl_s, fixed.tpot_s, 1e-12 * fixed.tpot_s);
  EXPECT_LT(spread.itl_s, spread.tpot_s);
}

TEST(EstimateClosedLoopBenchmark, PricesPassesWithTheModelsTimes) {
  const ModelSpec m = Preset("llama3-8b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;
  const ServingWorkload w{1000, 100, 0};
  // One client, one request on each of 2 replicas: the prefill pass (no
  // decodes: the step overhead) and 99 decode steps of one row.
  const ServingEstimate one =
      EstimateClosedLoopBenchmark(m, h100, w, c, 2, 2, 2, 0, cal);
  ASSERT_TRUE(one.fits) << one.infeasible_reason;
  EXPECT_EQ(one.batch, 1);
  const double prefill = PrefillTime_s(m, h100, c, 1000, 1, cal);
  const double step = DecodeStep(m, h100, c, 1, 1050, cal).total_s();
  EXPECT_NEAR(one.ttft_s, StepOverhead_s(c.engine) + prefill, 1e-12);
  EXPECT_NEAR(one.tpot_s, step, 1e-12);
  EXPECT_NEAR(one.output_tokens_per_s,
              2 * 100 / (StepOverhead_s(c.engine) + prefill + 99 * step), 1e-6);
  // A config's max_num_tokens is the step's budget: at 1000 tokens two
  // clients' prompts take a pass each, the second's split around A's
  // first decode (999 tokens, then 1, which attends to the 999 before it).
  ServingConfig narrow = c;
  narrow.max_num_tokens = 1000;
  const ServingEstimate two =
      EstimateClosedLoopBenchmark(m, h100, w, narrow, 1, 2, 2, 0, cal);
  const double d1 = DecodeStep(m, h100, narrow, 1, 1050, cal).total_s();
  const double t0 = StepOverhead_s(c.engine) + prefill;
  const double t2 = t0 + d1 + PrefillTime_s(m, h100, narrow, 999, 1, cal) + d1 +
                    PrefillTime_s(m, h100, narrow, 1, 1, cal) +
                    ChunkContextTime_s(m, narrow, 1, 999, cal);
  EXPECT_NEAR(two.ttft_s, (t0 + t2) / 2, 1e-12);
  // 64 clients per replica: the burst's 8 passes of 8 prompts each (the
  // 8192-token budget) make the mean TTFT several prefills long, and it
  // shrinks as later requests arrive one completion at a time.
  const ServingEstimate burst =
      EstimateClosedLoopBenchmark(m, h100, w, c, 1, 64, 64, 0, cal);
  const ServingEstimate long_run =
      EstimateClosedLoopBenchmark(m, h100, w, c, 1, 64, 6400, 0, cal);
  EXPECT_GT(burst.ttft_s, 4 * prefill);
  EXPECT_LT(long_run.ttft_s, 0.5 * burst.ttft_s);
  // The steady state: the first burst of 64 as warm-up, 640 measured.
  const ServingEstimate steady =
      EstimateClosedLoopSteadyState(m, h100, w, c, 1, 64, cal);
  const ServingEstimate warmed =
      EstimateClosedLoopBenchmark(m, h100, w, c, 1, 64, 704, 64, cal);
  EXPECT_DOUBLE_EQ(steady.ttft_s, warmed.ttft_s);
  EXPECT_DOUBLE_EQ(steady.tpot_s, warmed.tpot_s);
  EXPECT_LT(steady.ttft_s, burst.ttft_s);
  // A concurrency beyond what is simulated is refused, not run; a large
  // one is simulated with fewer measured requests.
  const ServingEstimate huge = EstimateClosedLoopBenchmark(
      m, h100, w, c, 1, 2000000000, 22000000000, 2000000000, cal);
  EXPECT_FALSE(huge.fits);
  EXPECT_EQ(huge.infeasible_reason.rfind("batch_limit: 2000000000 clients", 0),
            0u)
      << huge.infeasible_reason;
  const ServingEstimate many = EstimateClosedLoopBenchmark(
      m, h100, {100, 10, 0}, c, 1, 900000, 9900000, 900000, cal);
  EXPECT_TRUE(many.fits);
  EXPECT_GT(many.ttft_s, 0);
  // Offline memory checks carry over.
  EXPECT_FALSE(EstimateClosedLoopBenchmark(Preset("llama3-405b"), h100, w, c, 1,
                                           1, 1, 0, cal)
                   .fits);
}

TEST(EstimateDisaggregated, ClosedLoopOverPrefillAndDecodeWorkers) {
  const ModelSpec m = Preset("llama3-8b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;
  // Decode-bound: 8 requests, 1000 prompt tokens, 100 out.
  const DisaggregatedEstimate d =
      EstimateDisaggregated(m, h100, {1000, 100, 8}, c, 1, c, 1, cal);
  ASSERT_TRUE(d.fits) << d.infeasible_reason;
  const double tpot = DecodeStep(m, h100, c, 8, 1050, cal).total_s();
  const double prefill = PrefillTime_s(m, h100, c, 1000, 1, cal);
  EXPECT_DOUBLE_EQ(d.tpot_s, tpot);  // no prefill in the decode steps
  EXPECT_DOUBLE_EQ(d.prefill_s, prefill);
  EXPECT_NEAR(d.requests_per_s, 8 / (prefill + 99 * tpot), 1e-9);
  EXPECT_NEAR(d.ttft_s, prefill, 1e-9);
  EXPECT_NEAR(d.output_tokens_per_s, 100 * d.requests_per_s, 1e-9);
  // Prefill-bound: long prompts, short answers, many requests. The one
  // prefill worker serves 1/prefill requests/s and the rest wait (Little).
  const DisaggregatedEstimate q =
      EstimateDisaggregated(m, h100, {8000, 10, 64}, c, 1, c, 4, cal);
  ASSERT_TRUE(q.fits) << q.infeasible_reason;
  const double p8k = PrefillTime_s(m, h100, c, 8000, 1, cal);
  EXPECT_NEAR(q.requests_per_s, 1 / p8k, 1e-9);
  EXPECT_NEAR(q.ttft_s, 64 * p8k - 9 * q.tpot_s, 1e-9);
  EXPECT_DOUBLE_EQ(q.tpot_s,
                   DecodeStep(m, h100, c, 16, 8005, cal).total_s());  // 64 / 4
  // A decode share the cache cannot hold.
  const DisaggregatedEstimate full =
      EstimateDisaggregated(m, h100, {1000, 100, 10000000}, c, 1, c, 1, cal);
  EXPECT_FALSE(full.fits);
  EXPECT_EQ(full.infeasible_reason.rfind("decode: batch_limit", 0), 0u);
}

TEST(DisaggregatedBenchmarkTtft, FirstBurstQueuesForThePrefillRanks) {
  // 10 clients at once on 4 prefill ranks of 0.1 s a prompt: prompts 0-3
  // are first at 0.1 s, 4-7 at 0.2 s, 8-9 at 0.3 s (1.8 s in all); the
  // other 90 of 100 requests see the steady 0.1 s: 10.8 / 100.
  EXPECT_NEAR(DisaggregatedBenchmarkTtft_s(0.1, 4, 10, 100, 0.1), 0.108, 1e-12);
  // A burst the ranks take in one round adds nothing.
  EXPECT_NEAR(DisaggregatedBenchmarkTtft_s(0.1, 16, 10, 100, 0.1), 0.1, 1e-12);
  // The burst alone: 1.8 / 10.
  EXPECT_NEAR(DisaggregatedBenchmarkTtft_s(0.1, 4, 10, 5, 0.5), 0.18, 1e-12);
}

TEST(EstimateServingAtRate, LittlesLawConcurrency) {
  const ModelSpec m = Preset("llama3-8b");
  const ClusterSpec h100 = Cluster("h100");
  const DatasheetCalibration cal(h100);
  ServingConfig c;
  const ServingWorkload w{1000, 200, 0};
  const ServingEstimate e = EstimateServingAtRate(m, h100, w, c, 2, 10.0, cal);
  ASSERT_TRUE(e.fits) << e.infeasible_reason;
  // The fixed point: the requests in flight are the rate times the time
  // one spends in the system, spread over the 2 replicas.
  const int64_t in_flight =
      static_cast<int64_t>(std::ceil(10.0 * (e.ttft_s + 199 * e.tpot_s)));
  EXPECT_EQ(e.batch, (in_flight + 1) / 2);
  // Random arrivals wait half a step on average, then their prefill (5
  // requests/s per replica over a step of about 10 ms: alone) and a step.
  EXPECT_LT(5.0 * e.step_s, 0.5);
  EXPECT_DOUBLE_EQ(e.ttft_s, 0.5 * e.step_s + e.prefill_s + e.decode.total_s());
  // Random arrivals form no cohorts: each step carries B/osl of a prompt,
  // one at a time, and TPOT is the step.
  EXPECT_NEAR(e.step_s,
              e.decode.total_s() + static_cast<double>(e.batch) / 200 *
                                       PrefillTime_s(m, h100, c, 1000, 1, cal),
              1e-12);
  EXPECT_DOUBLE_EQ(e.tpot_s, e.step_s);
  EXPECT_DOUBLE_EQ(e.output_tokens_per_s, 10.0 * 200);
  EXPECT_DOUBLE_EQ(e.output_tokens_per_s_per_gpu, 10.0 * 200 / 2);
  // Faster than the offline capacity: refused with both rates.
  const ServingEstimate over =
      EstimateServingAtRate(m, h100, w, c, 2, 1e6, cal);
  EXPECT_FALSE(over.fits);
  EXPECT_EQ(over.infeasible_reason.rfind("overloaded: 1e+06 requests/s reach "
                                         "the ",
                                         0),
            0u)
      << over.infeasible_reason;
}

}  // namespace
}  // namespace meshtune::costmodel
