// The search of `tune serve` (issue 22, docs/serving.md §6): every
// aggregated deployment of a model on N GPUs, priced by the serving cost
// model, its Pareto front of output tokens/s per GPU against tokens/s per
// user, and the best plan that meets the latency targets.
//
// Enumerated (ServeSearch):
//   tp            powers of two up to the NVLink domain and N
//   pp            1, 2, 4, 8 (at most the layers)
//   attention_dp  1 for dense models; powers of two for MoE models
//   ep            powers of two dividing tp·attention_dp and the experts
//                 (1 for dense models)
//   replicas      N / (tp·attention_dp·pp), which must be whole
//   nextn         the problem's draft length; with per-position acceptance
//                 rates (ServingWorkload::nextn_accept_rates) and no nextn,
//                 every length from 0 to the rates given
//   batch         the workload's concurrency over the replicas when given
//                 (refused beyond what the KV cache holds, else priced as
//                 a closed-loop benchmark's steady state,
//                 costmodel::EstimateClosedLoopBenchmark);
//                 with a request rate, the concurrency the rate holds
//                 (costmodel::EstimateServingAtRate);
//                 otherwise 1, 2, 4, ... up to what the KV cache holds
//                 (and that maximum), each one point of the front, plus,
//                 with targets, the largest batch that meets them (TTFT
//                 and TPOT grow with the batch: bisection between the
//                 last power of two that meets them and the first that
//                 does not)
// With `disaggregated`, also prefill and decode on separate workers
// (costmodel::EstimateDisaggregated): P prefill workers of a pp-1 layout
// and D decode workers of any layout with P·gpus_p + D·gpus_d = N, P over
// 1, 2, 3, 4, 6, 8, 12, ... (powers of two and three times them), the
// decode batch per worker swept as above (concurrency = D · batch) or the
// workload's concurrency. Each layout's prefill time and each (decode
// layout, batch)'s step are priced once; the worker counts only change
// the closed loop (costmodel::DisaggregatedClosedLoop).
// A layout ValidateServingConfig refuses, or whose weights or batch do not
// fit, is counted under its reason, not reported as an error.
// The swept batches are priced by the cost model's closed form
// (costmodel::EstimateServing), fast enough for every point but a step apart
// from the pass calendar that prices a benchmark at a concurrency: its cohorts'
// prompts straddle passes once the decodes take part of the step's budget,
// which put its TTFT up to 30 % under the calendar's on best plans
// (docs/serving.md §3). So the sweep's candidates for best are checked on the
// calendar (costmodel::EstimateClosedLoopSteadyState at batch · replicas
// clients): each layout's largest batch meeting the targets on the closed form
// (its largest batch without targets), in order of their tokens/s per GPU, each
// repriced in place; one that misses a target on the calendar is bisected down
// to the largest batch that meets it there, one that meets them is doubled on
// the calendar (up to what the cache holds) until a batch misses them and then
// bisected up, the batch found added as a point of its own (the closed form's
// TTFT runs above the calendar's at a few cohorts, so its first missed batch
// may meet them). The check stops at the first candidate below
// kCalendarCheckShare of the best checked plan's tokens/s per GPU (its tokens/s
// per GPU on the two prices agree within a few per cent, so it could not win).
// Then the front: each of its aggregated points still on the closed form is
// repriced in place on the calendar and the front marked again, until every
// aggregated point on it is a calendar point (a repriced point moves, so
// another may join it; the calendar's refusal of a run too long to simulate
// leaves the closed form). What the report shows is then what the benchmarks
// measure; the closed form prices the points off the front (its TTFT is the
// calendar's at one cohort within the budget, 0.5 to 1.7 times it beyond, and
// far below it where the prompts fill every pass: docs/serving.md §3). Points
// priced on the calendar say so (ServePoint::calendar).
// Best: among the points meeting TTFT ≤ ttft_target and TPOT ≤ tpot_target
// (0 = no target), the most output tokens/s per GPU; ties to the lower TPOT.
// Of a sweep's aggregated points only those checked on the calendar count.
#ifndef MESHTUNE_TUNER_SERVE_SERVE_SEARCH_H_
#define MESHTUNE_TUNER_SERVE_SERVE_SEARCH_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/serving_model.h"
#include "search_spaces/cluster_spec.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/serving_spec.h"

namespace meshtune::tuner {

struct ServeProblem {
  search_spaces::ModelSpec model;
  search_spaces::ClusterSpec cluster;
  int64_t num_gpus = 0;
  // concurrency 0: sweep the batch (the whole front).
  search_spaces::ServingWorkload workload;
  search_spaces::Precision weights = search_spaces::Precision::kBf16;
  search_spaces::KvCacheDtype kv_cache = search_spaces::KvCacheDtype::kBf16;
  // Speculative decoding's draft tokens per step on every layout
  // (ServingConfig::nextn; 0 = off, or searched from 0 to the workload's
  // nextn_accept_rates where it gives them); its acceptance is the
  // workload's nextn_accepted or nextn_accept_rates.
  int64_t nextn = 0;
  // What drafts (ServingConfig::drafter, draft_head), on every layout.
  search_spaces::Drafter drafter = search_spaces::Drafter::kMtp;
  search_spaces::DraftHead draft_head;
  // A draft tree (ServingConfig::draft_topk, draft_tokens): 1 and 0 = a
  // chain.
  int64_t draft_topk = 1;
  int64_t draft_tokens = 0;
  double ttft_target_s = 0;    // 0 = none
  double tpot_target_s = 0;    // 0 = none
  bool disaggregated = false;  // also search disaggregated deployments
  // Open-loop requests/s over the deployment instead of a concurrency
  // (costmodel::EstimateServingAtRate): one point per layout, none where
  // the layout cannot keep up. 0 = none. Aggregated deployments only.
  double request_rate = 0;
};

// One priced point: a layout at one batch. Disaggregated: `config` is the
// decode workers' layout and `estimate` one decode worker's memory and step,
// with the deployment's TTFT, TPOT and tokens/s, replicas = decode workers
// and batch = sequences per decode worker.
struct ServePoint {
  search_spaces::ServingConfig config;
  costmodel::ServingEstimate estimate;
  bool disaggregated = false;
  search_spaces::ServingConfig prefill;  // disaggregated only
  int64_t prefill_workers = 0;
  bool meets_targets = false;
  bool on_front = false;  // not dominated in (tokens/s/GPU, tokens/s/user)
  // Priced on the pass calendar (a fixed concurrency, or a sweep's
  // candidate checked there), not the closed form.
  bool calendar = false;
};

// The share of the best checked plan's tokens/s per GPU below which the
// sweep stops checking candidates on the calendar (above).
inline constexpr double kCalendarCheckShare = 0.9;

struct ServeResult {
  std::vector<ServePoint> points;  // every fitting point, in search order
  int64_t layouts = 0;             // layouts enumerated
  std::map<std::string, int64_t> rejected;  // reason -> layouts or points
  std::vector<size_t> front;   // indices into points, by tokens/s/user desc
  std::optional<size_t> best;  // index into points; none meets the targets
};

// Checks a problem (positive GPUs, the workload's lengths, non-negative
// targets, a finite non-negative rate, not both a rate and a concurrency,
// no rate with disaggregation, nextn in range with a drafter the model can
// run and its acceptance within it: search_spaces::ValidateSpeculation);
// InvalidArgument with the flag's name.
Status ValidateServeProblem(const ServeProblem& problem);

// Whether the search sweeps the batch (no concurrency, no request rate):
// the search whose candidates for best are checked on the calendar.
bool SweepsBatch(const ServeProblem& problem);

ServeResult ServeSearch(const ServeProblem& problem,
                        const costmodel::Calibration& calibration);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_SERVE_SERVE_SEARCH_H_
