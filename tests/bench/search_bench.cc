// Speed of the search path (docs/design.md §9: speed lives in benchmarks).
//
//   BM_EstimateConfig   one cost-model call for GPT-3 175B on 1024 A100-80GB
//                       (tp8 pp8 vpp3 sp selective); counter estimates/s.
//   BM_Search175b1024   the whole default search for the same problem:
//                       enumeration + every estimate + ranking. The contract
//                       is < 1 s (costmodel/cost_model.h); counters report the
//                       configurations evaluated and estimated per run.
//
// Run: ./build/bench/search_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>

#include "costmodel/cost_model.h"
#include "costmodel/datasheet_calibration.h"
#include "search_spaces/presets.h"
#include "tuner/search_driver.h"

namespace meshtune::tuner {
namespace {

struct Problem {
  search_spaces::ModelSpec model;
  search_spaces::ClusterSpec cluster;
  search_spaces::TrainingSpec training;
};

// GPT-3 175B on 1024 A100-80GB with the recipe's gbs and seq; aborts if the
// presets are missing, since every number below would be meaningless.
Problem Gpt175bOn1024() {
  auto model = search_spaces::ResolveModel("gpt3-175b");
  auto cluster = search_spaces::ResolveCluster("a100-80g");
  if (!model.ok() || !cluster.ok()) {
    std::fprintf(stderr, "search_bench: presets gpt3-175b/a100-80g missing\n");
    std::abort();
  }
  Problem p{model.value(), cluster.value(), {}};
  p.training.num_gpus = 1024;
  p.training.global_batch_size = p.model.global_batch_size;
  p.training.seq_length = p.model.seq_length;
  return p;
}

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

void BM_Search175b1024(benchmark::State& state) {
  const Problem p = Gpt175bOn1024();
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
BENCHMARK(BM_Search175b1024)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace meshtune::tuner

BENCHMARK_MAIN();
