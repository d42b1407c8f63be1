// The serving load models (issue 22; docs/serving.md §3-4): a replica of
// serving_model.h's times under a workload. A concurrency or an offline
// queue in closed form (EstimateServing), a request rate by Little's law
// (EstimateServingAtRate), a benchmark pass by pass on closed_loop.h's
// calendar (EstimateClosedLoopBenchmark, EstimateOpenLoopBenchmark,
// EstimateClosedLoopSteadyState), and disaggregated prefill and decode
// workers (EstimateDisaggregated).
//
// Serving a workload (continuous batching, aggregated prefill and decode):
//   every step emits a token for each of the B sequences and, on average,
//   prefills B/osl new requests. Offline they come spread over the steps:
//     step_s    = decode_step_s(B, isl + osl/2) + (B/osl) · prefill_s(isl)
//                 / pp (a pipeline's stages prefill other micro-batches'
//                 requests while they decode, as its decode steps overlap;
//                 with attention DP the busiest rank's share,
//                 OfflinePrefillPerStep_s in serving_loads.cc)
//     TPOT      = step_s (the time between two tokens of a sequence)
//   With a concurrency the closed loop's requests move in cohorts of
//   G = min(B, adp · ⌊max_num_tokens / isl⌋) that one step prefills
//   together (a cohort finishes together and its clients send the next
//   requests together), n = B / G of them, each prefilled once per osl
//   steps:
//     step_s    = decode_step_s(B, ·) + n · prefill_s(G · isl, G seqs)
//                 / (osl · pp)
//     TPOT      = decode_step_s(B, ·) + (n − 1)⁺ · prefill_s(G · isl, G)
//                 / ((osl − 1) · pp): a request's decode steps carry the
//                 other cohorts' prefills, not its own
//     TTFT      = the pass of its cohort's prefill, prefill_s(G · isl, G
//                 seqs) + decode_step_s(B − G, ·) (the step overhead alone
//                 when B = G), the host's work on all B beside it, times
//                 2 − 1/√n with n > 1 cohorts (a request misses the pass
//                 in flight when it arrives, often another cohort's
//                 prefill: ClosedLoopBenchmark::next_request_misses_a_pass);
//                 the pass calendar's (closed_loop.h) at one cohort within
//                 the budget;
//                 offline, prefill_s(isl) + decode_step_s(B, ·)
//     output tokens/s per replica = B / step_s.
//   With a cached prefix (ServingWorkload::prefix) every prefill above and
//   below computes the prompt's isl − prefix new tokens, their attention to
//   the cached ones included (PromptsPrefillTime_s), and so does the step's
//   token budget; the KV cache and the decode contexts keep the whole isl.
//   B = the workload's concurrency over the replicas when given, else the
//   most sequences the KV cache holds, capped by max_batch (or
//   kDefaultMaxBatch per attention-DP rank, TensorRT-LLM's default) and by
//   the step's token budget, B · (1 + isl/osl) ≤ adp · pp · max_num_tokens
//   (the config's, or kMaxNumTokens).
//   Speculative decoding (ServingConfig::nextn = N drafts, the workload's
//   nextn_accepted = A; serving_model.h prices the step that verifies and
//   drafts): a step emits p = 1 + A tokens per sequence, so every osl above
//   counts osl / p steps, TPOT and the tokens/s divide and multiply by p,
//   and each decode takes 1 + N tokens of the budget: offline
//   B · (1 + N + p · isl/osl) ≤ adp · pp · max_num_tokens. The calendar
//   does the same pass by pass (ClosedLoopBenchmark::decode_width,
//   decode_progress); a disaggregated decode worker's TPOT is its step / p.
// Units: seconds, bytes, tokens.
#ifndef MESHTUNE_COSTMODEL_SERVING_LOADS_H_
#define MESHTUNE_COSTMODEL_SERVING_LOADS_H_

#include <cstdint>

#include "costmodel/calibration.h"
#include "costmodel/closed_loop.h"
#include "costmodel/model_options.h"
#include "costmodel/serving_model.h"
#include "search_spaces/cluster_spec.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/serving_spec.h"

namespace meshtune::costmodel {

// Estimates `config` serving `workload` on `num_gpus` GPUs of `cluster`
// (num_gpus / config.gpus() replicas; the caller checks divisibility and
// validity: ValidateServingConfig, ValidateServingWorkload).
ServingEstimate EstimateServing(const search_spaces::ModelSpec& model,
                                const search_spaces::ClusterSpec& cluster,
                                const search_spaces::ServingWorkload& workload,
                                const search_spaces::ServingConfig& config,
                                int64_t num_gpus,
                                const Calibration& calibration,
                                const ModelOptions& options = ModelOptions());

// Open loop: requests arrive at `requests_per_s` over the deployment (a
// serving benchmark's --request-rate; workload.concurrency is ignored).
// Below the offline capacity the deployment holds, by Little's law,
// rate · (TTFT + (osl − 1) · TPOT) requests in flight; that concurrency is
// found by fixed-point iteration from 1 (at most 30 rounds) and the
// estimate is EstimateServing's at it, its steps carrying the offline
// (spread-out) prefill share, as random arrivals form no cohorts, with
// output tokens/s = rate · osl
// and TTFT = step/2 (the rest of the step in flight) + the prefill of the
// request and the rate · step others that arrived during it + a step.
// At or above the capacity it does not fit: "overloaded: R requests/s
// reach the C the deployment serves".
ServingEstimate EstimateServingAtRate(
    const search_spaces::ModelSpec& model,
    const search_spaces::ClusterSpec& cluster,
    const search_spaces::ServingWorkload& workload,
    const search_spaces::ServingConfig& config, int64_t num_gpus,
    double requests_per_s, const Calibration& calibration,
    const ModelOptions& options = ModelOptions());

// The benchmark simulation's bounds: clients per replica (more are
// refused as batch_limit), and loop iterations (beyond them fewer requests
// are measured, at least one wave after the warm-up).
inline constexpr int64_t kMaxSimulatedClients = 1000000;
inline constexpr double kMaxSimulatedPasses = 2.0e7;

// A closed-loop benchmark of `requests` requests from `clients` clients,
// the first `warmup` of them left out of the means, over the deployment
// (split evenly over its replicas), priced pass by pass
// (closed_loop.h) with this model's times: DecodeStep at the mean context
// for the decodes, PrefillTime_s for a pass's prompt chunks, a token budget
// of the config's max_num_tokens (or kMaxNumTokens) per attention-DP rank,
// the KV cache's tokens under its engine's KvAdmissionOf, at most max_batch
// running; more wait in the queue. Memory and feasibility are EstimateServing's
// offline ones; ttft_s, tpot_s (and step_s) and the throughputs are the
// benchmark's means, batch is the clients per replica and decode the decode
// step at that batch (at most the max batch).
ServingEstimate EstimateClosedLoopBenchmark(
    const search_spaces::ModelSpec& model,
    const search_spaces::ClusterSpec& cluster,
    const search_spaces::ServingWorkload& workload,
    const search_spaces::ServingConfig& config, int64_t num_gpus,
    int64_t clients, int64_t requests, int64_t warmup,
    const Calibration& calibration,
    const ModelOptions& options = ModelOptions());

// An open-loop benchmark of `requests` requests sent at `rate` requests/s
// over the deployment (an infinite rate: all at once), split evenly over
// its replicas, priced pass by pass as above (closed_loop.h,
// ClosedLoopBenchmark::open_loop): arrivals at a finite rate as
// `arrivals` says (evenly spaced, or a Poisson process as the serving
// benchmarks send them), at most max_batch running and the KV cache's
// admission, the rest queued. Means over every request; the throughputs
// are the benchmark's, requests over its makespan, so above the
// deployment's capacity they are its capacity and the queue shows in
// ttft_s.
ServingEstimate EstimateOpenLoopBenchmark(
    const search_spaces::ModelSpec& model,
    const search_spaces::ClusterSpec& cluster,
    const search_spaces::ServingWorkload& workload,
    const search_spaces::ServingConfig& config, int64_t num_gpus, double rate,
    int64_t requests, Arrivals arrivals, const Calibration& calibration,
    const ModelOptions& options = ModelOptions());

// `clients` clients' closed loop at its steady state: the benchmark above
// with the first burst of `clients` requests as warm-up and
// kMeasuredRequestsPerClient requests per client measured after it (what
// tune serve --concurrency and tune accuracy's closed-loop rows price).
ServingEstimate EstimateClosedLoopSteadyState(
    const search_spaces::ModelSpec& model,
    const search_spaces::ClusterSpec& cluster,
    const search_spaces::ServingWorkload& workload,
    const search_spaces::ServingConfig& config, int64_t num_gpus,
    int64_t clients, const Calibration& calibration,
    const ModelOptions& options = ModelOptions());

// Disaggregated serving (prefill and decode on separate workers, the KV
// cache sent from one to the other): `prefill_workers` workers of layout
// `prefill` and `decode_workers` of `decode`, `workload.concurrency`
// requests in flight (a closed loop; at least 1). The decode workers step
// without prefills: TPOT is the decode step at concurrency / decode_workers
// sequences each. Each attention-DP rank of a prefill worker prefills its
// own request, so the prefill side serves prefill_workers · adp /
// prefill(isl) requests/s. The loop's throughput is the lower of that and
// concurrency / (prefill(isl) + (osl − 1) · TPOT), and Little's law gives
// TTFT = concurrency / throughput − (osl − 1) · TPOT, at least one
// prefill. The KV-cache transfer is not priced (it overlaps the decode
// of the previous requests).
struct DisaggregatedEstimate {
  bool fits = false;
  std::string infeasible_reason;  // "decode: ..." when it does not fit
  ServingEstimate decode;         // one decode worker at its share
  double prefill_s = 0;           // one prefill
  double prefill_requests_per_s = 0;
  double ttft_s = 0;
  double tpot_s = 0;
  double requests_per_s = 0;
  double output_tokens_per_s = 0;  // the whole deployment
};
DisaggregatedEstimate EstimateDisaggregated(
    const search_spaces::ModelSpec& model,
    const search_spaces::ClusterSpec& cluster,
    const search_spaces::ServingWorkload& workload,
    const search_spaces::ServingConfig& prefill, int64_t prefill_workers,
    const search_spaces::ServingConfig& decode, int64_t decode_workers,
    const Calibration& calibration,
    const ModelOptions& options = ModelOptions());

// The TPOT of a disaggregated decode worker of `decode` whose step is
// `step` (it runs no prefills): the step over the tokens it emits per
// request, more than one under speculative decoding
// (search_spaces::DecodeProgress). EstimateDisaggregated's, and the
// searches' that price the loop from its parts.
double DecodeWorkerTpot_s(const search_spaces::ModelSpec& model,
                          const search_spaces::ServingWorkload& workload,
                          const search_spaces::ServingConfig& decode,
                          const DecodeBreakdown& step);

// The closed loop of EstimateDisaggregated from its parts, for searches
// that price many worker counts of the same layouts: `concurrency`
// requests cycling through one prefill of `prefill_s` (the prefill side
// serving at most `prefill_requests_per_s`) and osl − 1 decode steps of
// `tpot_s`.
struct DisaggregatedLoop {
  double requests_per_s = 0;
  double ttft_s = 0;
};
DisaggregatedLoop DisaggregatedClosedLoop(double prefill_s,
                                          double prefill_requests_per_s,
                                          double tpot_s, int64_t concurrency,
                                          int64_t osl);

// The mean TTFT of a disaggregated closed-loop benchmark of `requests`
// requests from `clients` clients whose measurement starts with all of
// them at once (aiperf's: it drains its warm-up, then sends the first
// `clients` measured requests together; tuner/accuracy/serving_cases.h):
// the burst's prompts queue for the `prefill_ranks` prefill ranks (workers
// times attention DP), each prefilling one prompt per `prefill_s`, so
// prompt i's first token comes at (⌊i / ranks⌋ + 1) · prefill_s; the
// other requests − clients see the closed loop's steady `steady_ttft_s`
// (DisaggregatedClosedLoop): the burst leaves its prompts spread at the
// prefill side's pace, and they return at that pace. The aggregated
// benchmark's calendar (EstimateClosedLoopBenchmark) runs the same burst
// pass by pass. Seconds; requests below clients count as clients.
double DisaggregatedBenchmarkTtft_s(double prefill_s, int64_t prefill_ranks,
                                    int64_t clients, int64_t requests,
                                    double steady_ttft_s);

}  // namespace meshtune::costmodel

#endif  // MESHTUNE_COSTMODEL_SERVING_LOADS_H_
