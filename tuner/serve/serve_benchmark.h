// The benchmark that checks a `tune serve` plan (docs/serving.md §6): the
// load its targets were priced at, as one run of a serving benchmark client
// (vLLM's `vllm bench serve`, tuner/interop/bench_serve_command.h), and what
// the cost model predicts that run measures. A published serving number is
// a benchmark's mean over its requests, the first ones included, which a
// steady state leaves out; this is the prediction to compare with.
//
//   closed loop   the plan's sequences in flight (batch · replicas, or
//                 per decode worker · decode workers) as the client's
//                 concurrency, BenchmarkRequests of them, all clients
//                 starting at once: aggregated plans on
//                 the pass calendar (costmodel::EstimateClosedLoopBenchmark,
//                 no warm-up left out), disaggregated ones as
//                 EstimateDisaggregated with the first burst queueing for
//                 the prefill ranks (DisaggregatedBenchmarkTtft_s);
//   request rate  the plan's rate as Poisson arrivals, BenchmarkRequests of
//                 its mean sequences in flight on the calendar
//                 (EstimateOpenLoopBenchmark).
// Units: seconds, requests, tokens.
#ifndef MESHTUNE_TUNER_SERVE_SERVE_BENCHMARK_H_
#define MESHTUNE_TUNER_SERVE_SERVE_BENCHMARK_H_

#include <cstdint>
#include <string>

#include "costmodel/calibration.h"
#include "tuner/serve/serve_search.h"

namespace meshtune::tuner {

// Requests of the checking run: kBenchmarkRequestsPerClient per client
// (ten waves, so the first burst weighs a tenth of the means), at most
// kMaxBenchmarkRequests unless that leaves fewer than two waves (a run
// of 20 000 clients would otherwise send 200 000 requests), and at least
// kMinBenchmarkRequests.
inline constexpr int64_t kBenchmarkRequestsPerClient = 10;
inline constexpr int64_t kMaxBenchmarkRequests = 10000;
inline constexpr int64_t kMinBenchmarkRequests = 100;
// The requests of a run whose load is `in_flight` sequences.
int64_t BenchmarkRequests(int64_t in_flight);
// The prompts the run of `workload` sends: BenchmarkRequests, or with a pool
// of prefixes (ServingWorkload::prefix_pool > 1) the next multiple of the
// pool, at least one prompt per prefix (vLLM's prefix_repetition dataset
// makes num_prompts / pool of each).
int64_t BenchmarkPrompts(const search_spaces::ServingWorkload& workload,
                         int64_t in_flight);

struct ServeBenchmark {
  int64_t max_concurrency = 0;  // closed loop: clients; 0 = open loop
  double request_rate = 0;      // open loop: requests/s
  int64_t num_prompts = 0;      // requests the run sends
  // What the run reports, predicted: its means over every request; none
  // where the cost model refuses the run (`not_predicted` says why).
  std::string not_predicted;
  double ttft_s = 0;
  double tpot_s = 0;
  double output_tokens_per_s = 0;  // the whole deployment
};

// The run that checks `best`, a point of ServeSearch(problem, calibration).
ServeBenchmark PredictServeBenchmark(const ServeProblem& problem,
                                     const ServePoint& best,
                                     const costmodel::Calibration& calibration);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_SERVE_SERVE_BENCHMARK_H_
