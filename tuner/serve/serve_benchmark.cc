#include "tuner/serve/serve_benchmark.h"

#include <algorithm>

#include "costmodel/serving_loads.h"

namespace meshtune::tuner {

namespace {

// The run's means from the cost model's estimate of it.
void Means(const costmodel::ServingEstimate& e, ServeBenchmark* b) {
  if (!e.fits) b->not_predicted = e.infeasible_reason;
  b->ttft_s = e.ttft_s;
  b->tpot_s = e.tpot_s;
  b->output_tokens_per_s = e.output_tokens_per_s;
}

}  // namespace

int64_t BenchmarkRequests(int64_t in_flight) {
  const int64_t c = std::max<int64_t>(1, in_flight);
  return std::max(
      {2 * c, std::min(kBenchmarkRequestsPerClient * c, kMaxBenchmarkRequests),
       kMinBenchmarkRequests});
}

int64_t BenchmarkPrompts(const search_spaces::ServingWorkload& w,
                         int64_t in_flight) {
  const int64_t n = BenchmarkRequests(in_flight);
  if (w.prefix <= 0 || w.prefix_pool <= 1) return n;
  const int64_t pool = w.prefix_pool;
  return (std::max(n, pool) + pool - 1) / pool * pool;
}

ServeBenchmark PredictServeBenchmark(const ServeProblem& p,
                                     const ServePoint& best,
                                     const costmodel::Calibration& cal) {
  ServeBenchmark b;
  // The sequences in flight the plan was priced at: per replica (or decode
  // worker) times their number.
  const int64_t in_flight =
      std::max<int64_t>(1, best.estimate.batch * best.estimate.replicas);
  const search_spaces::ServingWorkload& workload = p.workload;
  search_spaces::ServingWorkload w = workload;
  b.num_prompts = BenchmarkPrompts(workload, in_flight);
  if (p.request_rate > 0) {
    b.request_rate = p.request_rate;
    w.concurrency = 0;
    const costmodel::ServingEstimate e = costmodel::EstimateOpenLoopBenchmark(
        p.model, p.cluster, w, best.config, p.num_gpus, p.request_rate,
        b.num_prompts, costmodel::Arrivals::kPoisson, cal);
    Means(e, &b);
    return b;
  }
  b.max_concurrency = in_flight;
  w.concurrency = in_flight;
  if (best.disaggregated) {
    const costmodel::DisaggregatedEstimate d = costmodel::EstimateDisaggregated(
        p.model, p.cluster, w, best.prefill, best.prefill_workers, best.config,
        best.estimate.replicas, cal);
    if (!d.fits) b.not_predicted = d.infeasible_reason;
    b.ttft_s = costmodel::DisaggregatedBenchmarkTtft_s(
        d.prefill_s, best.prefill_workers * best.prefill.attention_dp,
        in_flight, b.num_prompts, d.ttft_s);
    b.tpot_s = d.tpot_s;
    b.output_tokens_per_s = d.output_tokens_per_s;
    return b;
  }
  // The engine is told this batch (--max-num-seqs and its kin).
  search_spaces::ServingConfig c = best.config;
  c.max_batch = best.estimate.batch;
  const costmodel::ServingEstimate e = costmodel::EstimateClosedLoopBenchmark(
      p.model, p.cluster, w, c, p.num_gpus, in_flight, b.num_prompts,
      /*warmup=*/0, cal);
  Means(e, &b);
  return b;
}

}  // namespace meshtune::tuner
