// Serving rows of `tune accuracy`: how a row of the inference CSV schema
// becomes a deployment and a load (model and GPU names, layouts of
// TensorRT-LLM's DEP runs and aiconfigurator's disaggregated workers, KV
// dtypes, request rates), what is skipped and why, and the summary.
#include "tuner/accuracy/serving_cases.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "costmodel/datasheet_calibration.h"
#include "costmodel/serving_loads.h"
#include "tuner/accuracy/serving_report.h"

namespace meshtune::tuner {
namespace {

using search_spaces::KvCacheDtype;
using search_spaces::Precision;

constexpr const char* kHeader =
    "source,commit_or_date,model,gpu,num_gpus,tp,pp,ep,dp,precision,"
    "framework,isl,osl,concurrency,metric,value,notes\n";

std::vector<ServingCase> Map(const std::string& rows) {
  auto table = ParseCsv(std::string(kHeader) + rows, "t.csv");
  EXPECT_TRUE(table.ok()) << table.status().message();
  auto cases = MapServingRows(table.value());
  EXPECT_TRUE(cases.ok()) << cases.status().message();
  return cases.ok() ? cases.value() : std::vector<ServingCase>{};
}

// The online table's run of a case: 500 requests at its rate, simulated
// (what PredictServingCase prices it with).
costmodel::ServingEstimate BenchmarkOf500(const ServingCase& c) {
  const costmodel::DatasheetCalibration cal(c.cluster);
  return costmodel::EstimateOpenLoopBenchmark(
      c.model, c.cluster, c.workload, c.config, c.num_gpus, c.request_rate, 500,
      costmodel::Arrivals::kPoisson, cal);
}

TEST(ServingCases, OfflineTensorRtLlmRow) {
  const auto cases =
      Map("TRT v0.17,x,Llama-3.1-70B,H100-SXM-80GB,4,4,1,,,FP8,TensorRT-LLM "
          "0.17,128,2048,,output_tokens_per_s,5000,\"system total; "
          "kv_cache_free_gpu_mem_fraction 0.95 (0.90 on OOM)\"\n");
  ASSERT_EQ(cases.size(), 1u);
  const ServingCase& c = cases[0];
  EXPECT_EQ(c.skipped_reason, "");
  EXPECT_EQ(c.model.name, "llama3-70b");
  EXPECT_EQ(c.cluster.name, "h100");
  EXPECT_EQ(c.config.tp, 4);
  EXPECT_EQ(c.config.ep, 1);
  EXPECT_EQ(c.config.weights, Precision::kFp8);
  EXPECT_EQ(c.config.kv_cache, KvCacheDtype::kFp8);  // TensorRT-LLM FP8
  EXPECT_EQ(c.workload.isl, 128);
  EXPECT_EQ(c.workload.osl, 2048);
  EXPECT_EQ(c.workload.concurrency, 0);
  EXPECT_DOUBLE_EQ(c.config.kv_cache_memory_fraction, 0.95);
  const ServingPrediction p = PredictServingCase(c);
  EXPECT_EQ(p.skipped_reason, "");
  EXPECT_GT(p.predicted, 0);
  EXPECT_DOUBLE_EQ(p.error_pct, (p.predicted - 5000) / 5000 * 100);
}

TEST(ServingCases, TrtllmBenchSizesItsEngineFromTheKvCache) {
  // tuning.py's finetune_setting, by hand.
  struct Case {
    double kv_requests;
    int64_t isl, osl, pp, max_batch_size, max_num_tokens;
  };
  const Case settings[] = {
      // min(5706, 4096) = 4096, a multiple of 256; 4096 · 2 tokens.
      {5706, 128, 128, 1, 4096, 8192},
      // 128 · ⌈730/128⌉ = 768; 1460 tokens, at least 2048.
      {730, 1000, 1000, 1, 768, 2048},
      // 50 a micro-batch over 2 stages, at least 64; 450 tokens → 2048.
      {100, 8192, 1024, 2, 64, 2048},
      // 256 · ⌈3000/256⌉ = 3072; 33 000 tokens capped at 32 768.
      {3000, 20000, 2000, 1, 3072, 32768},
      // 128 · 5 = 640; 750 tokens → 2048.
      {600, 500, 2000, 1, 640, 2048},
      // 725 a micro-batch over 4 stages → 768; 7975 tokens → 512 · 16.
      {2900, 5000, 500, 4, 768, 8192},
      // A fractional estimate rounds up as trtllm-bench's float does:
      // 32 · ⌈64.4/32⌉ = 96, where 64 requests give 64.
      {64.4, 1024, 8192, 1, 96, 2048},
      {64, 1024, 8192, 1, 64, 2048},
  };
  for (const Case& k : settings) {
    const TrtllmBenchSettings s =
        TrtllmBenchEngineSettings(k.kv_requests, k.isl, k.osl, k.pp);
    EXPECT_EQ(s.max_batch_size, k.max_batch_size) << k.kv_requests;
    EXPECT_EQ(s.max_num_tokens, k.max_num_tokens) << k.kv_requests;
  }

  // Offline trtllm-bench rows take these settings; its rows at a
  // concurrency do not.
  const auto cases =
      Map("v1.0,x,Llama-3.1-8B,H100-SXM-80GB,1,1,1,,,FP8,TensorRT-LLM 1.0 "
          "(PyTorch backend; trtllm-bench throughput),128,128,,"
          "output_tokens_per_s,28000,\"offline\"\n"
          "blog,x,Llama-3.1-8B,H100-SXM-80GB,1,1,1,,,FP8,TensorRT-LLM "
          "(trtllm-bench throughput),128,128,64,output_tokens_per_s,9000,"
          "\"max_batch_size 64\"\n"
          "v0.17,x,Llama-3.1-8B,H100-SXM-80GB,1,1,1,,,FP8,TensorRT-LLM 0.17 "
          "(TRT engine),128,128,,output_tokens_per_s,28000,\"offline\"\n"
          "v0.17,x,Llama-3.1-8B,H100-SXM-80GB,1,1,1,,,FP8,TensorRT-LLM 0.17 "
          "(TRT engine; trtllm-bench throughput),128,128,,"
          "output_tokens_per_s,28000,\"offline\"\n");
  ASSERT_EQ(cases.size(), 4u);
  EXPECT_TRUE(cases[0].trtllm_bench_settings);
  EXPECT_FALSE(cases[1].trtllm_bench_settings);
  EXPECT_FALSE(cases[2].trtllm_bench_settings);
  EXPECT_TRUE(cases[3].trtllm_bench_settings);
  // The C++ executor at trtllm-bench's batch of 4096 (it estimates 4157
  // 256-token requests of 8B in FP8) against the default cap of 2048: a
  // larger step, more tokens/s.
  EXPECT_GT(PredictServingCase(cases[3]).predicted,
            PredictServingCase(cases[2]).predicted);
  // The PyTorch flow's host bounds its steps at that batch: a token per
  // request every 35 us, 28 571 tokens/s at any batch.
  EXPECT_NEAR(PredictServingCase(cases[0]).predicted, 1 / 35e-6, 1e-6);
}

TEST(ServingCases, TrtllmBenchEstimatesItsOwnKvRequests) {
  const auto cases =
      Map("v1.0,x,Llama-3.1-8B,H100-SXM-80GB,1,1,1,,,BF16,TensorRT-LLM "
          "(trtllm-bench throughput),1024,1024,,output_tokens_per_s,9000,"
          "\"offline\"\n"
          "dev guide,x,DeepSeek-R1-0528,H200-SXM-141GB,8,1,1,8,8,FP8,"
          "TensorRT-LLM (trtllm-bench throughput),1000,1000,,"
          "output_tokens_per_s_per_gpu,1627,\"DEP8\"\n");
  ASSERT_EQ(cases.size(), 2u);
  // Llama-3.1-8B by hand: 32 layers of 218 112 000 weights and two
  // 128256 x 4096 embeddings, 8 030 257 152 elements at 2 bytes = 14.958
  // GiB of 79.65; 2·32·8·128·2 = 131 072 bytes a token, 2048 a request:
  // (79.65 − 14.958) · 0.9 / 0.25 = 232.89 requests.
  EXPECT_NEAR(TrtllmBenchKvRequests(cases[0]), 232.89, 0.01);
  // DeepSeek-R1 FP8 on 8 H200 (DEP8: trtllm-bench --tp 8): its 671 B
  // elements at 1 byte = 624.9 GiB of 8 · 140.4; the latent cache priced
  // as 128 heads of 7168/128 = 56 elements, 2·61·128·56 = 874 496 FP8
  // bytes a token: (1123.2 − 624.9) · 0.9 / 1.6289 = 275.3 requests,
  // where the cost model's cache holds about 4 600 2000-token sequences.
  EXPECT_NEAR(TrtllmBenchKvRequests(cases[1]), 275.3, 275.3 * 0.005);
  EXPECT_EQ(
      TrtllmBenchEngineSettings(TrtllmBenchKvRequests(cases[1]), 1000, 1000, 1)
          .max_batch_size,
      384);
}

TEST(ServingCases, DepLayoutAndCheckpointNames) {
  const auto cases =
      Map("dev guide,x,DeepSeek-R1-0528,B200-180GB,8,1,1,8,8,FP4,TensorRT-LLM "
          "(PyTorch),1024,1024,,output_tokens_per_s_per_gpu,4000,\"DEP8; "
          "FP16 KV\"\n"
          "aic,x,nvidia/Llama-3.1-8B-Instruct-FP8,H200-SXM-141GB,1,1,1,1,1,fp8,"
          "SGLang 0.5.9,1024,1024,8,tpot_ms,7,\"aggregated\"\n");
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0].skipped_reason, "");
  EXPECT_EQ(cases[0].model.name, "deepseek-v3");
  // Its MTP layer is kept but not run: the row states no speculation.
  EXPECT_EQ(cases[0].model.mtp_num_layers, 1);
  EXPECT_EQ(cases[0].config.nextn, 0);
  EXPECT_EQ(cases[0].config.attention_dp, 8);
  EXPECT_EQ(cases[0].config.moe_tp(), 1);
  EXPECT_EQ(cases[0].config.weights, Precision::kNvfp4);
  EXPECT_EQ(cases[0].config.kv_cache, KvCacheDtype::kBf16);  // "FP16 KV"
  EXPECT_EQ(cases[1].skipped_reason, "");
  EXPECT_EQ(cases[1].model.name, "llama3-8b");
  EXPECT_EQ(cases[1].config.kv_cache, KvCacheDtype::kBf16);  // SGLang
  EXPECT_EQ(cases[1].workload.concurrency, 8);
}

TEST(ServingCases, AttentionDpBalanceFromTheNotes) {
  // The developer guide's DeepSeek runs state TensorRT-LLM's attention-DP
  // balance; elsewhere it is off, as TensorRT-LLM's default.
  const std::string row =
      "dev guide,x,DeepSeek-R1-0528,B200-180GB,4,1,1,4,4,FP4,TensorRT-LLM "
      "(PyTorch),1024,1024,,output_tokens_per_s_per_gpu,6000,";
  const auto cases =
      Map(row +
          "\"DEP4; DeepSeek options: attention DP w/ balance, CUTLASS "
          "MoE, kv fp8\"\n" +
          row + "\"DEP4\"\n");
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_TRUE(cases[0].config.attention_dp_balance);
  EXPECT_FALSE(cases[1].config.attention_dp_balance);
}

TEST(ServingCases, PrecisionFromTheNotesGemmMode) {
  const auto cases =
      Map("aic,x,meta-llama/Llama-3.1-8B-Instruct,H100-SXM-80GB,1,1,1,1,1,not "
          "recorded,TensorRT-LLM 1.0.0rc3,1024,128,8,ttft_ms,190,\"aggregated; "
          "gemm=-, moe=-\"\n"
          "aic,x,meta-llama/Llama-3.1-8B-Instruct,H100-SXM-80GB,1,1,1,1,1,not "
          "recorded,TensorRT-LLM 1.0.0rc3,1024,128,8,ttft_ms,190,\"aggregated; "
          "gemm=fp8_block, moe=-\"\n"
          "aic,x,meta-llama/Llama-3.1-8B-Instruct,H100-SXM-80GB,1,1,1,1,1,not "
          "recorded,TensorRT-LLM 1.0.0rc3,1024,128,8,ttft_ms,190,aggregated\n");
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_EQ(cases[0].skipped_reason, "");
  EXPECT_EQ(cases[0].config.weights, Precision::kBf16);  // "-": none
  EXPECT_EQ(cases[1].config.weights, Precision::kFp8Blockwise);
  EXPECT_EQ(cases[2].skipped_reason.rfind("unknown precision", 0), 0u);
}

TEST(ServingCases, DeepSeekFp8IsBlockScaled) {
  // DeepSeek-V3/R1's FP8 checkpoint is block-scaled whatever the row says
  // (its config.json: weight_block_size [128, 128]); ModelOpt's FP8
  // checkpoints of other models are per-tensor unless the notes name
  // fp8_block.
  const auto cases =
      Map("x,x,DeepSeek-R1,H200-SXM-141GB,8,8,1,8,,FP8 "
          "(deepseek-ai/DeepSeek-R1),TensorRT-LLM,1024,2048,1,"
          "output_tokens_per_s,50,\"x\"\n"
          "x,x,Llama-3.1-70B,H200-SXM-141GB,4,4,1,,,FP8,TensorRT-LLM,1024,"
          "1024,,output_tokens_per_s,5000,\"x\"\n"
          "aic,x,Qwen3-30B-A3B,H200-SXM-141GB,1,1,1,1,1,fp8,SGLang 0.5.9,1024,"
          "1024,8,tpot_ms,10,\"aggregated; gemm=fp8, moe=fp8_block\"\n");
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_EQ(cases[0].config.weights, Precision::kFp8Blockwise);
  EXPECT_EQ(cases[1].config.weights, Precision::kFp8);
  EXPECT_EQ(cases[2].config.weights, Precision::kFp8Blockwise);
  for (const ServingCase& c : cases) {
    EXPECT_EQ(c.skipped_reason, "") << c.line;
    EXPECT_GT(PredictServingCase(c).predicted, 0) << c.line;
  }
}

TEST(ServingCases, DisaggregatedWorkersFromNotes) {
  const auto cases = Map(
      "aic,x,deepseek-ai/DeepSeek-V3,GB200,40,,,,,fp8,TensorRT-LLM,1024,8192,"
      "2048,ttft_ms,1877,\"disaggregated; prefill: 1 workers x (tp1 pp1 adp8 "
      "moe_tp1 ep8, bs1); decode: 1 workers x (tp1 pp1 adp32 moe_tp1 ep32, "
      "bs64); gemm=fp8\"\n"
      "aic,x,deepseek-ai/DeepSeek-V3,GB200,48,,,,,fp8,TensorRT-LLM,1024,8192,"
      "2048,ttft_ms,1877,\"disaggregated; prefill: 1 workers x (tp1 pp1 adp8 "
      "moe_tp1 ep8, bs1); decode: 1 workers x (tp1 pp1 adp32 moe_tp1 ep32, "
      "bs64)\"\n"
      "aic,x,deepseek-ai/DeepSeek-V3,GB200,,,,,,fp8,TensorRT-LLM,1024,8192,"
      "2048,tpot_ms,24,\"disaggregated; prefill: 2 workers x (tp1 pp1 adp8 "
      "moe_tp1 ep8, bs1); decode: 1 workers x (tp1 pp1 adp32 moe_tp1 ep32, "
      "bs64)\"\n");
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_EQ(cases[2].skipped_reason, "");
  EXPECT_EQ(cases[2].num_gpus, 2 * 8 + 32);  // blank: the workers' GPUs
  const ServingCase& c = cases[0];
  EXPECT_EQ(c.skipped_reason, "");
  EXPECT_TRUE(c.disaggregated);
  EXPECT_EQ(c.prefill_workers, 1);
  EXPECT_EQ(c.prefill_config.attention_dp, 8);
  EXPECT_EQ(c.decode_workers, 1);
  EXPECT_EQ(c.config.attention_dp, 32);
  EXPECT_EQ(c.config.ep, 32);
  EXPECT_EQ(c.config.max_batch, 64 * 32);
  const ServingPrediction p = PredictServingCase(c);
  EXPECT_EQ(p.skipped_reason, "");
  EXPECT_GT(p.predicted, 0);
  EXPECT_EQ(cases[1].skipped_reason,
            "the prefill and decode workers hold 40 GPUs, not num_gpus 48");
}

TEST(ServingCases, RequestRateIsAnOpenLoop) {
  const auto cases =
      Map("online,x,Llama-3.1-8B,H100-SXM-80GB,1,1,1,,,BF16,TensorRT-LLM "
          "0.14,467,256,,requests_per_s,2,\"request rate 2 QPS\"\n"
          "online,x,Llama-3.1-8B,H100-SXM-80GB,1,1,1,,,BF16,TensorRT-LLM "
          "0.14,467,256,,requests_per_s,30,\"request rate 1000 QPS\"\n");
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_DOUBLE_EQ(cases[0].request_rate, 2.0);
  // Below capacity every request is served, but the benchmark's 500
  // requests take 499 / 2 s to arrive plus the last one's own latency
  // (256 tokens, a few seconds): a little under the rate.
  const double served = PredictServingCase(cases[0]).predicted;
  EXPECT_LT(served, 2.0);
  EXPECT_GT(served, 500 / (499 / 2.0 + 5.0));
  // Far above it the deployment serves its capacity.
  const double saturated = PredictServingCase(cases[1]).predicted;
  EXPECT_LT(saturated, 1000.0);
  EXPECT_GT(saturated, 2.0);
}

TEST(ServingCases, TheOnlineTables202By214IsADataset) {
  // TensorRT-LLM's online table ran 467/256 and 467/16 at fixed lengths
  // and 202/214 as a dataset of those means; no other source's lengths
  // spread.
  const std::string online =
      "NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md (Online "
      "Serving Measurements table),x,Llama-3.1-8B,H100-SXM-80GB,1,1,1,,,BF16,"
      "TensorRT-LLM 0.14.0 + Triton tensorrtllm_backend,";
  const auto cases = Map(
      online + "202,214,,itl_ms,21,\"500 requests, infinite request rate\"\n" +
      online + "467,256,,itl_ms,39,\"500 requests, infinite request rate\"\n" +
      "other,x,Llama-3.1-8B,H100-SXM-80GB,1,1,1,,,BF16,TensorRT-LLM 0.14.0 + "
      "Triton tensorrtllm_backend,202,214,,itl_ms,21,\"500 requests, "
      "infinite request rate\"\n");
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_EQ(cases[0].workload.lengths,
            search_spaces::LengthSpread::kExponential);
  EXPECT_EQ(cases[1].workload.lengths, search_spaces::LengthSpread::kFixed);
  EXPECT_EQ(cases[2].workload.lengths, search_spaces::LengthSpread::kFixed);
  // Its ITL is the pooled gap of the simulated run, not the mean TPOT.
  const costmodel::ServingEstimate e = BenchmarkOf500(cases[0]);
  ASSERT_TRUE(e.fits);
  EXPECT_DOUBLE_EQ(PredictServingCase(cases[0]).predicted, e.itl_s * 1e3);
  EXPECT_LT(e.itl_s, e.tpot_s);
}

TEST(ServingCases, InfiniteRateSimulatesTheBenchmarksBurst) {
  // 500 requests sent at once: the engine prefills them a step budget at a
  // time while the first ones decode, then decodes them together
  // (costmodel::EstimateOpenLoopBenchmark, simulated).
  const std::string row =
      "online,x,Llama-3.1-8B,H100-SXM-80GB,1,1,1,,,BF16,TensorRT-LLM "
      "0.14,467,256,,";
  const auto cases =
      Map(row + "ttft_ms,9000,\"500 requests, infinite request rate\"\n" + row +
          "itl_ms,40,\"500 requests, infinite request rate\"\n" + row +
          "ttft_ms,50,\"offline\"\n" + row + "tpot_ms,40,\"offline\"\n");
  ASSERT_EQ(cases.size(), 4u);
  EXPECT_TRUE(std::isinf(cases[0].request_rate));
  EXPECT_EQ(cases[0].benchmark_requests, 500);
  EXPECT_DOUBLE_EQ(cases[2].request_rate, 0.0);
  const ServingCase& c = cases[0];
  const costmodel::DatasheetCalibration cal(c.cluster);
  const costmodel::ServingEstimate e = BenchmarkOf500(c);
  ASSERT_TRUE(e.fits);
  EXPECT_DOUBLE_EQ(PredictServingCase(cases[0]).predicted, e.ttft_s * 1e3);
  // ITL, the mean gap between tokens, is TPOT when every output is one
  // length (to rounding: the two sum the same passes in different orders).
  EXPECT_NEAR(PredictServingCase(cases[1]).predicted, e.tpot_s * 1e3,
              1e-9 * e.tpot_s * 1e3);
  // All 500 fit the KV cache and run together: the half of the prompts
  // before the mean one (250 · 467 tokens) bound its wait from below. Its
  // tokens come no faster than the whole burst's decode step, and faster
  // than the offline steady state's, whose KV-bound batch is larger and
  // mixes in new prompts all along.
  const double half_prompts_s = costmodel::PrefillTime_s(
      c.model, c.cluster, c.config, 250 * 467, 250, cal);
  EXPECT_GT(e.ttft_s, half_prompts_s);
  EXPECT_GT(PredictServingCase(cases[0]).predicted,
            PredictServingCase(cases[2]).predicted);
  const double burst_step_s =
      costmodel::DecodeStep(c.model, c.cluster, c.config, 500, 467 + 128, cal)
          .total_s();
  EXPECT_GT(e.tpot_s, burst_step_s);
  EXPECT_LT(e.tpot_s * 1e3, PredictServingCase(cases[3]).predicted);
}

TEST(ServingCases, ReadsTheBenchmarksRequestCount) {
  // trtllm-bench's "num_requests=N" and the blogs' "N synthetic requests"
  // count like the online table's "N requests".
  const std::string row =
      "x,x,Llama-3.1-8B,H100-SXM-80GB,1,1,1,,,BF16,TensorRT-LLM "
      "0.14,467,256,,output_tokens_per_s,9000,";
  const auto cases = Map(
      row + "\"offline, infinite request rate; num_requests=3000\"\n" + row +
      "\"max-throughput, 5120 synthetic requests\"\n" + row + "\"offline\"\n");
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_EQ(cases[0].benchmark_requests, 3000);
  EXPECT_EQ(cases[1].benchmark_requests, 5120);
  EXPECT_EQ(cases[2].benchmark_requests, 0);
}

TEST(ServingCases, BlankEpKeepsTheExpertsTensorParallel) {
  // TensorRT-LLM's Mapping without an expert-parallel size: moe_tp = tp.
  const auto cases =
      Map("TRT v0.17,x,Mixtral-8x7B,H100-SXM-80GB,8,8,1,,,FP8,TensorRT-LLM "
          "0.17,128,2048,,output_tokens_per_s,50000,\n");
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_EQ(cases[0].skipped_reason, "");
  EXPECT_EQ(cases[0].config.ep, 1);
  EXPECT_EQ(cases[0].config.moe_tp(), 8);
  // TensorRT-LLM v1.0's tables run MoE models with attention DP over --ep.
  const auto v10 =
      Map("NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md (v1.0 "
          "throughput tables),x,Qwen3-30B-A3B,B200-180GB,4,4,1,,,FP4,"
          "TensorRT-LLM 1.0,128,128,,output_tokens_per_s,50000,\n"
          "NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md (v1.0 "
          "throughput tables),x,Llama-3.1-8B,B200-180GB,4,4,1,,,FP4,"
          "TensorRT-LLM 1.0,128,128,,output_tokens_per_s,50000,\n");
  ASSERT_EQ(v10.size(), 2u);
  EXPECT_EQ(v10[0].config.tp, 1);
  EXPECT_EQ(v10[0].config.attention_dp, 4);
  EXPECT_EQ(v10[0].config.ep, 4);
  EXPECT_EQ(v10[1].config.tp, 4);  // dense: as written
  EXPECT_EQ(v10[1].config.attention_dp, 1);
}

TEST(ServingCases, AiconfiguratorRowsRunItsEngineSettingsAndBenchmark) {
  const std::string aic =
      "ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/systems/"
      "silicon_sample.csv,x,meta-llama/Llama-3.1-70B,H200-SXM-141GB,1,1,1,1,"
      "1,";
  const auto cases =
      Map(aic +
          "fp8,vLLM,8192,1024,32,ttft_ms,3132,\"aggregated; moe_tp=1; "
          "batch_size field=32; gemm=fp8\"\n" +
          aic +
          "fp8,SGLang 0.5.9,8192,1024,32,ttft_ms,3132,\"aggregated; "
          "batch_size field=32\"\n" +
          aic +
          "bf16,TensorRT-LLM 1.2,8192,1024,8,ttft_ms,500,\"aggregated; "
          "batch_size field=8\"\n" +
          "x,x,Llama-3.1-70B,H200-SXM-141GB,1,1,1,1,1,fp8,vLLM,8192,1024,32,"
          "ttft_ms,3132,\n");
  ASSERT_EQ(cases.size(), 4u);
  for (const ServingCase& c : cases) ASSERT_EQ(c.skipped_reason, "");
  // Its generator's token budget: max_batch_size + isl + 1500, SGLang's
  // isl + 1500; 20 requests per client measured from a fresh burst; an
  // FP8 KV cache with quantized weights.
  EXPECT_EQ(cases[0].config.max_num_tokens, 32 + 8192 + 1500);
  EXPECT_EQ(cases[0].benchmark_requests, 20 * 32);
  EXPECT_EQ(cases[0].config.kv_cache, KvCacheDtype::kFp8);
  EXPECT_EQ(costmodel::KvAdmissionOf(cases[0].config.engine),
            costmodel::KvAdmission::kPreemptNewest);
  EXPECT_EQ(cases[1].config.max_num_tokens, 8192 + 1500);
  // The framework names the engine whose step overhead is priced.
  EXPECT_EQ(cases[0].config.engine, search_spaces::ServingEngine::kVllm);
  EXPECT_EQ(cases[1].config.engine, search_spaces::ServingEngine::kSglang);
  EXPECT_EQ(cases[2].config.engine, search_spaces::ServingEngine::kTensorRtLlm);
  EXPECT_EQ(cases[2].config.max_num_tokens, 8 + 8192 + 1500);
  EXPECT_EQ(cases[2].config.kv_cache, KvCacheDtype::kBf16);
  // TensorRT-LLM reserves each request's whole length (any source).
  EXPECT_EQ(costmodel::KvAdmissionOf(cases[2].config.engine),
            costmodel::KvAdmission::kReserveWholeRequest);
  // Built TensorRT engines run under its C++ executor, the rest under its
  // PyTorch flow; both reserve whole requests.
  const std::string head = "x,x,Llama-3.1-8B,H100-SXM-80GB,1,1,1,,,BF16,";
  const std::string tail = ",128,128,,output_tokens_per_s,9000,\n";
  const auto flows = Map(
      head + "TensorRT-LLM 0.17 (TRT engine via trtllm-bench build)" + tail +
      head + "TensorRT-LLM 0.14.0 + Triton tensorrtllm_backend" + tail + head +
      "\"TensorRT-LLM 1.0 (PyTorch backend, trtllm-bench\"" + tail);
  ASSERT_EQ(flows.size(), 3u);
  using search_spaces::ServingEngine;
  EXPECT_EQ(flows[0].config.engine, ServingEngine::kTensorRtLlmCpp);
  EXPECT_EQ(flows[1].config.engine, ServingEngine::kTensorRtLlmCpp);
  EXPECT_EQ(flows[2].config.engine, ServingEngine::kTensorRtLlm);
  // 1.0's pipeline loop pays the host after the GPU (HostAfterGpu).
  EXPECT_FALSE(flows[0].config.trtllm_sync_pipeline);
  EXPECT_FALSE(flows[1].config.trtllm_sync_pipeline);
  EXPECT_TRUE(flows[2].config.trtllm_sync_pipeline);
  EXPECT_TRUE(flows[2].prefill_config.trtllm_sync_pipeline);
  EXPECT_FALSE(cases[2].config.trtllm_sync_pipeline);  // 1.2
  EXPECT_EQ(costmodel::KvAdmissionOf(ServingEngine::kTensorRtLlmCpp),
            costmodel::KvAdmission::kReserveWholeRequest);
  // Other sources keep the engines' defaults and the steady state.
  EXPECT_EQ(cases[3].config.max_num_tokens, 0);
  EXPECT_EQ(cases[3].benchmark_requests, 0);
  EXPECT_EQ(cases[3].config.kv_cache, KvCacheDtype::kBf16);
  EXPECT_GT(PredictServingCase(cases[0]).predicted, 0);
}

TEST(ServingCases, AiconfiguratorIdLayoutOverridesContradictingColumns) {
  // The 2026-04-06 dump's columns for "tp8_ep8" (8 GPUs, TensorRT-LLM's
  // tp_size 8 and moe_ep_size 8): tp 64 or attention DP 64 on 64 GPUs.
  const std::string aic =
      "ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/systems/"
      "silicon_sample.csv,x,deepseek-ai/DeepSeek-R1,H200-SXM-141GB,";
  const std::string tail =
      "fp8,TensorRT-LLM 1.1.0rc2.post2,8192,1024,4,tpot_ms,8.5861,\"";
  const auto cases =
      Map(aic + "64,64,1,8,1," + tail +
          "id=2026_04_06_x_c4_tp8_ep8_947; aggregated; moe_tp=8; batch_size "
          "field=4\"\n" +
          aic + "64,1,1,8,64," + tail +
          "id=2026_04_06_x_c64_tp8_ep8_941; aggregated; moe_tp=8; batch_size "
          "field=1\"\n" +
          // Columns that agree with the id (2026-03-25: "tp8_0_ep8_0"), an id
          // without E > 1, and one naming no layout keep their columns.
          aic + "8,8,1,8,1," + tail +
          "id=2026_03_25_x_c4_tp8_0_ep8_0_1254; aggregated; moe_tp=1\"\n" +
          aic + "16,16,1,1,1," + tail +
          "id=2026_04_06_x_c4_tp16_ep1_3; aggregated; moe_tp=16\"\n" + aic +
          "64,64,1,8,1," + tail + "id=dsr1_x_cfg181; aggregated\"\n");
  ASSERT_EQ(cases.size(), 5u);
  for (const ServingCase& c : cases) ASSERT_EQ(c.skipped_reason, "");
  EXPECT_EQ(cases[0].num_gpus, 8);
  EXPECT_EQ(cases[0].config.tp, 8);
  EXPECT_EQ(cases[0].config.attention_dp, 1);
  EXPECT_EQ(cases[0].config.ep, 8);
  EXPECT_EQ(cases[1].num_gpus, 8);
  EXPECT_EQ(cases[1].config.tp, 1);
  EXPECT_EQ(cases[1].config.attention_dp, 8);
  EXPECT_EQ(cases[1].config.ep, 8);
  EXPECT_EQ(cases[2].num_gpus, 8);
  EXPECT_EQ(cases[2].config.tp, 8);
  EXPECT_EQ(cases[3].config.tp, 16);
  EXPECT_EQ(cases[4].num_gpus, 64);
  EXPECT_EQ(cases[4].config.tp, 64);
  // The corrected point and the 2026-03-25 one it duplicates price alike.
  EXPECT_DOUBLE_EQ(PredictServingCase(cases[0]).predicted,
                   PredictServingCase(cases[2]).predicted);
}

TEST(ServingCases, ClosedLoopBeyondTheCacheQueues) {
  // 4096 clients of 1000 + 1000 tokens on one H100 with LLaMA-3 8B: more
  // than its KV cache holds (about 900 such sequences), so the rest wait
  // for a slot: the benchmark's mean TTFT spans several requests' decodes
  // (each about 1000 steps), far above one prefill.
  const auto cases =
      Map("x,x,Llama-3.1-8B,H100-SXM-80GB,1,1,1,1,1,BF16,vLLM,1000,1000,4096,"
          "ttft_ms,1000,\n"
          "x,x,Llama-3.1-8B,H100-SXM-80GB,1,1,1,1,1,BF16,vLLM,1000,1000,4,"
          "ttft_ms,100,\n");
  ASSERT_EQ(cases.size(), 2u);
  const ServingPrediction queued = PredictServingCase(cases[0]);
  const ServingPrediction light = PredictServingCase(cases[1]);
  ASSERT_EQ(queued.skipped_reason, "");
  ASSERT_EQ(light.skipped_reason, "");
  EXPECT_GT(queued.predicted, 20 * light.predicted);
}

TEST(ServingCases, SkipsWithReasons) {
  const auto cases = Map(
      "mlperf,x,Llama-2-70B,H200-SXM-141GB,8,,,,,FP8,TensorRT-LLM,,,,"
      "output_tokens_per_s,30000,\n"
      "x,x,Llama-3.1-8B,H800,1,1,1,,,FP8,TensorRT-LLM,1,1,,ttft_ms,1,\n"
      "x,x,Falcon-40B,H100-SXM-80GB,1,1,1,,,FP8,TensorRT-LLM,1,1,,ttft_ms,1,\n"
      "x,x,Llama-3.1-8B,H100-SXM-80GB,1,1,1,,,int2,TensorRT-LLM,1,1,,ttft_ms,"
      "1,\n"
      "x,x,Llama-3.1-8B,H100-SXM-80GB,1,,,,,FP8,TensorRT-LLM,1,1,,ttft_ms,1,\n"
      "x,x,Llama-3.1-8B,H100-SXM-80GB,1,1,1,,,FP8,TensorRT-LLM,1,1,,e2e_ms,1,"
      "\n");
  ASSERT_EQ(cases.size(), 6u);
  EXPECT_EQ(cases[0].skipped_reason,
            "isl/osl not stated (a variable-length dataset)");
  EXPECT_EQ(cases[1].skipped_reason, "no cluster preset for GPU 'H800'");
  EXPECT_EQ(cases[2].skipped_reason, "no model preset for 'Falcon-40B'");
  EXPECT_EQ(cases[3].skipped_reason,
            "unknown precision 'int2' (known: bf16, fp16, fp8, fp4/nvfp4)");
  EXPECT_EQ(cases[4].skipped_reason, "parallel layout not stated (blank tp)");
  EXPECT_EQ(cases[5].skipped_reason.rfind("metric 'e2e_ms' is not one", 0), 0u);
  const ServingSummary s = SummarizeServing(PredictServingRows(cases));
  EXPECT_EQ(s.all.rows, 6);
  EXPECT_EQ(s.all.predicted, 0);
  EXPECT_EQ(s.skipped.size(), 6u);
}

TEST(ServingCases, SpeculativeDecodingAtAStatedAcceptanceOnly) {
  // A run with MTP drafts is priced with them where the notes give the
  // acceptance (a mean acceptance length L: L − 1 accepted drafts), skipped
  // where they do not; "no MTP" is no speculation.
  const std::string row =
      "blog,x,DeepSeek-R1,H200-SXM-141GB,8,8,1,4,,FP8,TensorRT-LLM,1024,"
      "2048,1,output_tokens_per_s,158,\"min-latency, MTP nextn=3";
  const auto cases =
      Map(row + "\"\n" + row + "; acceptance length 2.5\"\n" +
          "blog,x,DeepSeek-R1,H200-SXM-141GB,8,8,1,4,,FP8,TensorRT-LLM,1024,"
          "2048,1,output_tokens_per_s,100,\"max-throughput, no MTP\"\n");
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_EQ(cases[0].skipped_reason,
            "ran MTP speculative decoding (nextn=3) at an acceptance the "
            "source does not state");
  EXPECT_EQ(cases[1].skipped_reason, "");
  EXPECT_EQ(cases[1].config.nextn, 3);
  EXPECT_DOUBLE_EQ(cases[1].workload.nextn_accepted, 1.5);
  EXPECT_EQ(cases[2].skipped_reason, "");
  EXPECT_EQ(cases[2].config.nextn, 0);
  // The drafts pay for themselves at that acceptance: one user's tokens
  // come faster than without them.
  const ServingPrediction with = PredictServingCase(cases[1]);
  ServingCase off = cases[1];
  off.config.nextn = 0;
  off.workload.nextn_accepted = 0;
  const ServingPrediction without = PredictServingCase(off);
  EXPECT_GT(with.predicted, without.predicted);
}

TEST(ServingCases, FileLevelErrors) {
  auto no_isl = ParseCsv("source,model,value\nx,y,1\n", "t.csv");
  ASSERT_TRUE(no_isl.ok());
  EXPECT_FALSE(IsServingCsv(no_isl.value()));
  auto missing = ParseCsv("source,model,isl,osl\nx,y,1,1\n", "t.csv");
  ASSERT_TRUE(missing.ok());
  EXPECT_TRUE(IsServingCsv(missing.value()));
  EXPECT_EQ(MapServingRows(missing.value()).status().message(),
            "t.csv: serving CSV has no column 'gpu'");
  auto table = ParseCsv(std::string(kHeader) +
                            "x,x,Llama-3.1-8B,H100,1,1,1,,,FP8,T,1,1,,"
                            "ttft_ms,fast,\n",
                        "t.csv");
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(MapServingRows(table.value()).status().message(),
            "t.csv:2: value 'fast' is not a positive number");
}

TEST(ServingSummary, MapePerKind) {
  std::vector<ServingRowResult> rows(3);
  rows[0].c.metric = ServingMetric::kOutputTokensPerS;
  rows[0].c.line = 2;
  rows[0].p.error_pct = -10;
  rows[1].c.metric = ServingMetric::kTtftMs;
  rows[1].c.line = 3;
  rows[1].p.error_pct = 30;
  rows[2].c.metric = ServingMetric::kTpotMs;
  rows[2].c.line = 4;
  rows[2].p.error_pct = -20;
  const ServingSummary s = SummarizeServing(rows);
  EXPECT_DOUBLE_EQ(s.throughput.mape_pct, 10.0);
  EXPECT_DOUBLE_EQ(s.latency.mape_pct, 25.0);
  EXPECT_DOUBLE_EQ(s.latency.worst_pct, 30.0);
  EXPECT_EQ(s.latency.worst_line, 3);
  EXPECT_DOUBLE_EQ(s.all.mape_pct, 20.0);
}

}  // namespace
}  // namespace meshtune::tuner
