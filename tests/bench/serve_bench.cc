// Speed of `tune serve`'s search (issue 22: under 2 s on one core for
// llama3-70b on 8 H100, isl 2048, osl 512, TPOT <= 50 ms).
//
//   BM_ServeLlama70bOn8H100        the whole aggregated search of that
//                                  problem: layouts, batch sweep,
//                                  bisection, front; counter points/s.
//   BM_ServeDeepSeekV3On64B200Disagg
//                                  DeepSeek-V3 nvfp4 on 64 B200 with
//                                  disaggregated splits (MoE layouts,
//                                  attention DP, every P/D split).
//
// Run: ./build/bench/serve_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>

#include "costmodel/datasheet_calibration.h"
#include "search_spaces/presets/presets.h"
#include "tuner/serve/serve_search.h"

namespace meshtune::tuner {
namespace {

ServeProblem Problem(const char* model, const char* gpu, int64_t gpus) {
  auto m = search_spaces::ResolveModel(model);
  auto c = search_spaces::ResolveCluster(gpu);
  if (!m.ok() || !c.ok()) {
    std::fprintf(stderr, "serve_bench: presets %s/%s missing\n", model, gpu);
    std::abort();
  }
  ServeProblem p;
  p.model = m.value();
  p.model.mtp_num_layers = 0;
  p.cluster = c.value();
  p.num_gpus = gpus;
  return p;
}

void Run(benchmark::State& state, const ServeProblem& p) {
  const costmodel::DatasheetCalibration cal(p.cluster);
  size_t points = 0;
  for (auto _ : state) {
    const ServeResult r = ServeSearch(p, cal);
    points = r.points.size();
    benchmark::DoNotOptimize(r.best);
  }
  state.counters["points"] = static_cast<double>(points);
  state.counters["points_per_s"] =
      benchmark::Counter(static_cast<double>(points),
                         benchmark::Counter::kIsIterationInvariantRate);
}

void BM_ServeLlama70bOn8H100(benchmark::State& state) {
  ServeProblem p = Problem("llama3-70b", "h100", 8);
  p.workload = {2048, 512, 0};
  p.tpot_target_s = 0.050;
  Run(state, p);
}
BENCHMARK(BM_ServeLlama70bOn8H100)->Unit(benchmark::kMillisecond);

void BM_ServeDeepSeekV3On64B200Disagg(benchmark::State& state) {
  ServeProblem p = Problem("deepseek-v3", "b200", 64);
  p.workload = {4096, 1024, 0};
  p.weights = search_spaces::Precision::kNvfp4;
  p.kv_cache = search_spaces::KvCacheDtype::kFp8;
  p.tpot_target_s = 0.030;
  p.disaggregated = true;
  Run(state, p);
}
BENCHMARK(BM_ServeDeepSeekV3On64B200Disagg)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace meshtune::tuner

BENCHMARK_MAIN();
