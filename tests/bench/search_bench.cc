// Speed of the search path (docs/design.md §9: speed lives in benchmarks).
//
//   BM_EstimateConfig   one cost-model call for GPT-3 175B on 1024 A100-80GB
//                       (tp8 pp8 vpp3 sp selective); counter estimates/s.
//   BM_Search175b1024   the whole default search for the same problem:
//                       enumeration + every estimate + ranking. The contract
//                       is < 0.2 s; counters report the configurations
//                       evaluated and estimated per run.
//   BM_SearchDeepSeekV3On1024H100
//                       the whole default search for DeepSeek-V3 (MTP) on
//                       1024 H100 in fp8: EP, ETP and uneven layouts
//                       included. The contract is < 1 s.
//
// Run: ./build/bench/search_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>

#include "costmodel/cost_model.h"
#include "costmodel/datasheet_calibration.h"
#include "search_spaces/presets/presets.h"
#include "tuner/search/search_driver.h"

namespace meshtune::tuner {
namespace {

struct Problem {
  search_spaces::ModelSpec model;
  search_spaces::ClusterSpec cluster;
  search_spaces::TrainingSpec training;
};

// `model` on 1024 GPUs of `gpu` with the recipe's gbs and seq; aborts if the
// presets are missing, since every number below would be meaningless.
Problem On1024(const char* model_name, const char* gpu) {
  auto model = search_spaces::ResolveModel(model_name);
  auto cluster = search_spaces::ResolveCluster(gpu);
  if (!model.ok() || !cluster.ok()) {
    std::fprintf(stderr, "search_bench: presets %s/%s missing\n", model_name,
                 gpu);
    std::abort();
  }
  Problem p{model.value(), cluster.value(), {}};
  p.training.num_gpus = 1024;
  p.training.global_batch_size = p.model.global_batch_size;
  p.training.seq_length = p.model.seq_length;
  return p;
}

Problem Gpt175bOn1024() { return On1024("gpt3-175b", "a100-80g"); }

void BM_EstimateConfig(benchmark::State& state) {
  const Problem p = Gpt175bOn1024();
  const costmodel::DatasheetCalibration calibration(p.cluster);
  search_spaces::ParallelConfig c;
  c.tp = 8;
  c.pp = 8;
  c.vpp = 3;
  c.dp = 16;
  c.sp = true;
  c.recompute.granularity = search_spaces::RecomputeGranularity::kSelective;
  for (auto _ : state) {
    costmodel::Estimate e = costmodel::EstimateConfig(
        p.model, p.cluster, p.training, c, calibration);
    benchmark::DoNotOptimize(e);
  }
  state.counters["estimates_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EstimateConfig);

void RunSearchBenchmark(benchmark::State& state, const Problem& p) {
  const costmodel::DatasheetCalibration calibration(p.cluster);
  const search_spaces::SearchSpace space;
  int64_t evaluated = 0, estimated = 0;
  for (auto _ : state) {
    SearchResult r =
        RunSearch(p.model, p.cluster, p.training, space, calibration);
    evaluated = r.evaluated;
    estimated = r.estimated;
    benchmark::DoNotOptimize(r);
  }
  state.counters["evaluated"] = static_cast<double>(evaluated);
  state.counters["estimated"] = static_cast<double>(estimated);
  state.counters["estimates_per_s"] =
      benchmark::Counter(static_cast<double>(estimated * state.iterations()),
                         benchmark::Counter::kIsRate);
}

void BM_Search175b1024(benchmark::State& state) {
  RunSearchBenchmark(state, Gpt175bOn1024());
}
BENCHMARK(BM_Search175b1024)->Unit(benchmark::kMillisecond);

void BM_SearchDeepSeekV3On1024H100(benchmark::State& state) {
  Problem p = On1024("deepseek-v3", "h100");
  p.training.precision = search_spaces::Precision::kFp8;
  RunSearchBenchmark(state, p);
}
BENCHMARK(BM_SearchDeepSeekV3On1024H100)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace meshtune::tuner

BENCHMARK_MAIN();
