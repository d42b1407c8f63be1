// A closed-loop serving benchmark, pass by pass (issue 22; docs/serving.md
// §4): `clients` clients each keep one request of isl prompt and osl output
// tokens in flight on one replica until `requests` requests have finished,
// as genai-perf, aiperf, vLLM's and SGLang's bench_serving run a
// "--concurrency C" point. Every client sends its first request at t = 0
// and its next one the moment the previous one's last token arrives. The
// same calendar runs an open loop too (ClosedLoopBenchmark::open_loop):
// requests arriving at a fixed rate, or all at once, whatever the engine
// does, as a request-rate benchmark sends them.
//
// Why simulate rather than use EstimateServing's steady state: a published
// TTFT at a concurrency is the mean over the benchmark's requests, and the
// first C all arrive together. That burst is prefilled a step budget at a
// time, so its mean TTFT grows with C (the i-th of the burst waits for the
// i − 1 before it), and with fixed lengths the cohorts it forms persist
// (requests that start together finish together and return together). A
// steady-state formula sees neither; aiconfigurator's queueing model
// (ai-dynamo/aiconfigurator docs/design/queueing_model.md: "transient
// window = initial concurrency burst", "cohort effects") makes the same
// point and evaluates the same pass calendar.
//
// The pass calendar (the fused, chunked-prefill step of vLLM v1,
// TensorRT-LLM's in-flight batching and SGLang's mixed chunks):
//   - a pass first gives each running decode one token of its budget;
//   - the rest of `step_tokens` goes to prompts in arrival order, each a
//     chunk of min(what is left of its prompt, what is left of the
//     budget); a request is admitted only while fewer than `max_running`
//     are running (prefilling or decoding) and the KV cache admits it
//     (`kv_tokens` under `kv_policy`, below); beyond that the client's
//     request waits in the queue;
//   - the pass takes decode_s(decodes) + prefill_s(chunk tokens, chunks),
//     plus, for a chunk that continues its prompt, chunk_context_s (its
//     queries against the prompt's keys from earlier passes);
//     with no decodes it still pays `empty_pass_s` (the step overhead);
//   - a pipeline of `micro_batches` stages keeps that many micro-batches
//     in flight (vLLM's and TensorRT-LLM's pipeline parallelism, each
//     scheduled with its own budget): a pass is one round of all of them,
//     each micro-batch its share of the decodes and of step_tokens, the
//     prompts taking one chunk each per pass, micro-batch after
//     micro-batch. Every pipeline slot runs each micro-batch on one stage,
//     so the slowest micro-batch's prompts lengthen every slot of the
//     round: the pass pays prefill_s + chunk_context_s of that micro-batch
//     alone, each priced through all stages, not the sum over
//     micro-batches (a lone prompt costs its whole latency; prompts filling
//     every micro-batch cost 1/micro_batches of theirs);
//   - a prompt's first `prefix` tokens are cached (ClosedLoopBenchmark::
//     prefix): its chunks cover the rest, the first attending to them;
//   - a prompt finished in a pass emits its first token at the pass's end
//     (TTFT = that end − arrival) and decodes osl − 1 more tokens, one per
//     pass; a request arriving at a pass's end is scheduled in the next, or,
//     a closed loop's next request with next_request_misses_a_pass, in the
//     one after (the next is already scheduled when it reaches the engine).
// KV policies (KvAdmission; `kv_tokens` = 0: an unbounded cache, neither
// applies):
//   - kPreemptNewest (vLLM v1, SGLang): cache blocks are taken as a
//     sequence grows; a request is admitted while its prompt fits beside
//     the running requests' contexts; when the next pass's contexts (one
//     token more per decode) do not fit, the newest running request goes
//     back to the queue's front, its cache freed, and is recomputed (a
//     prompt of isl + the tokens it had emitted, which emits its next
//     token) when it is admitted again. Its TTFT stays that of its first
//     admission; its TPOT includes the wait (vLLM's recompute preemption,
//     vllm/v1/core/sched/scheduler.py; SGLang's retracted decodes);
//   - kReserveWholeRequest (TensorRT-LLM's default GUARANTEED_NO_EVICT
//     capacity scheduler): a request is admitted only while every running
//     request's isl + osl fits, so none is ever preempted.
// Per-request TPOT = (last token − first token) / (osl − 1), averaged over
// the measured requests (all but the warm-up) with osl > 1 as the benchmarks
// report it; ITL is the mean gap between any two tokens of a measured
// request (vLLM's benchmark_serving.py pools every request's gaps), the same
// as TPOT when all outputs are one length and nearer the long requests'
// TPOT when they vary; throughput is over all requests and the whole run.
// Lengths: every request isl and osl, or its own (input_lengths,
// output_lengths: a dataset's spread, ExponentialLengths), request i taking
// entry i mod the list's size.
// Units: seconds, tokens, requests.
#ifndef MESHTUNE_COSTMODEL_CLOSED_LOOP_H_
#define MESHTUNE_COSTMODEL_CLOSED_LOOP_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

namespace meshtune::costmodel {

// Requests per client measured after the first burst's warm-up to price a
// closed loop's steady state: enough waves of the calendar for its cohorts
// to settle (docs/serving.md §4).
inline constexpr int64_t kMeasuredRequestsPerClient = 10;

// How requests enter the KV cache (above).
enum class KvAdmission { kPreemptNewest, kReserveWholeRequest };

// How an open loop's requests arrive at a finite rate.
//   - kEven: request i at i · arrival_interval_s;
//   - kPoisson: a Poisson process of that mean gap, as vLLM's
//     benchmark_serving.py sends a --request-rate (exponential gaps; its
//     forks in SGLang and TensorRT-LLM, and the tables they print, do the
//     same). Arrivals bunch, so requests queue below the capacity, which
//     evenly spaced arrivals never do. The gaps are drawn without a random
//     generator, to keep the calendar the same on every machine: gap i is
//     the exponential quantile −ln(1 − u_i) · interval at u_i = frac((i + 1)
//     · φ), φ = (√5 − 1)/2, the golden-ratio sequence, whose points fill
//     (0, 1) evenly in a scrambled order (Weyl's equidistribution), so
//     every run of gaps has the exponential's spread and its mean.
enum class Arrivals { kEven, kPoisson };

struct ClosedLoopBenchmark {
  int64_t clients = 1;      // concurrency on this replica
  int64_t requests = 1;     // requests the benchmark completes, >= clients
                            // counts the first burst too
  int64_t isl = 1;          // prompt tokens per request
  int64_t osl = 1;          // output tokens per request (the first included)
  int64_t step_tokens = 1;  // a pass's token budget (max_num_tokens),
                            // over all its micro-batches
  int64_t max_running = 1;  // requests running at once (max batch)
  int64_t kv_tokens = 0;    // tokens the KV cache holds; 0 = unbounded
  // The first `warmup` requests sent (the first burst when it is
  // `clients`) run but are left out of the mean TTFT and TPOT, as a
  // benchmark's warm-up requests are; at most requests − 1.
  int64_t warmup = 0;
  KvAdmission kv_policy = KvAdmission::kPreemptNewest;
  // Open loop instead (a request-rate benchmark: TensorRT-LLM's and
  // vLLM's serving benchmarks at a QPS, or every request at once at an
  // infinite rate): requests arrive `arrival_interval_s` apart on average
  // (`arrivals`: evenly or as a Poisson process) whatever the engine does,
  // and no client waits for a completion (`clients` is ignored); a request
  // that arrives during a pass is scheduled in the next, and an idle engine
  // waits for the next arrival.
  bool open_loop = false;
  double arrival_interval_s = 0;
  Arrivals arrivals = Arrivals::kEven;  // at a finite rate (above)
  // Per-request lengths instead of isl and osl (above); empty = isl and
  // osl for every request.
  std::vector<int64_t> input_lengths = {};
  std::vector<int64_t> output_lengths = {};
  // Pipeline micro-batches a pass runs (pp; above), each with
  // step_tokens / micro_batches of the budget.
  int64_t micro_batches = 1;
  // Tokens at the start of every prompt that the engine's prefix cache
  // holds (ServingWorkload::prefix), at most the prompt's length − 1: a
  // request's prefill starts after them, its first chunk attending to
  // them (chunk_context_s), as it does again when a preempted request is
  // recomputed (its prefix stays cached). They count in its KV cache.
  int64_t prefix = 0;
  // Requests 1 to cold_prefix_requests compute their prefix too at their
  // first admission: the first use of each prefix of a pool other than
  // request 0's (a benchmark's initial test request warms that one; a
  // shuffled pool meets the others early, so they are placed first).
  int64_t cold_prefix_requests = 0;
  // Tokens at the start of every prompt whose KV pages all requests share,
  // stored once beside the running requests (a shared prefix's whole
  // pages, ServingEstimate::kv_shared_prefix_tokens; kv_tokens excludes
  // them): a request's cache counts its context less these.
  int64_t shared_prefix = 0;
  // A closed loop's client sends its next request when the last token of
  // the previous one arrives, and that request reaches the engine while
  // the next pass, scheduled the moment the previous one ended, already
  // runs: it is scheduled in the pass after (an idle engine takes it at
  // once). The token's way out, the new request's way in and its
  // tokenization take longer than zero, and every engine schedules its
  // next step as soon as one ends (vLLM's engine-core busy loop, SGLang's
  // scheduler event loop, TensorRT-LLM's executor loop). So a cohort's
  // replacements wait for the pass in flight, which with more than one
  // cohort is often another cohort's prefill. false: the request joins the
  // very next pass (the hand-worked calendars of the tests).
  bool next_request_misses_a_pass = false;
  // Speculative decoding (ServingConfig::nextn): a running decode takes
  // `decode_width` tokens of a pass's budget (its token and its drafts to
  // verify, search_spaces::VerifiedTokens) and emits `decode_progress`
  // tokens a pass on average (1 + nextn_accepted), so a request's osl − 1
  // tokens after its first take ceil((osl − 1) / progress) decode passes
  // and its cache grows by `decode_progress` a pass. 1 and 1: one token a
  // pass.
  int64_t decode_width = 1;
  double decode_progress = 1.0;
};

// The arrival time of each of `requests` requests of an open loop at mean
// gap `interval_s` under `arrivals` (above), the first at 0; all at 0 when
// interval_s is 0 (an infinite rate). Seconds, nondecreasing.
std::vector<double> ArrivalTimes(Arrivals arrivals, double interval_s,
                                 int64_t requests);

// `count` lengths of mean `mean` (before rounding) drawn from an
// exponential law, the law of largest entropy for a positive length of
// known mean (a dataset whose spread is not stated), at least 1 token
// each. Deterministic like ArrivalTimes: length i is round(−ln(1 − u_i) ·
// s) at u_i = frac((i + 1) · α), α = √2 − 1 for `stream` 0 and √3 − 1 for
// stream 1, so input and output lengths and the golden-ratio arrivals are
// independent sequences (1, √2, √3 and √5 are rationally independent); s
// makes the quantiles average `mean`.
std::vector<int64_t> ExponentialLengths(int64_t mean, int64_t count,
                                        int stream);

// A pass (or a step) of `gpu_s` on the GPU whose host works `host_s`
// through its requests: beside the GPU, so the longer of the two, or after
// it (`host_after_gpu`), so their sum.
inline double PassWithHost_s(double gpu_s, double host_s, bool host_after_gpu) {
  return host_after_gpu ? gpu_s + host_s : std::max(gpu_s, host_s);
}

// Pass times. decode_s(b): `b` decode tokens of running requests, b >= 1,
// over all micro-batches. prefill_s(t, s): `t` prompt tokens of `s`
// requests in one micro-batch of a pass, each chunk attending to itself,
// through every pipeline stage. chunk_context_s(c, p) (optional): what a
// chunk of `c` tokens adds by attending to the `p` tokens of its prompt
// that earlier passes prefilled, through every stage, added once per such
// chunk of the micro-batch. host_s(r)
// (optional): the host's work for the `r` requests a pass runs, beside the
// GPU's or after it (host_after_gpu; PassWithHost_s).
struct PassTimes {
  std::function<double(int64_t decodes)> decode_s;
  std::function<double(int64_t tokens, int64_t sequences)> prefill_s;
  std::function<double(int64_t chunk, int64_t prior)> chunk_context_s;
  double empty_pass_s = 0;  // a pass without decodes pays this on top
  std::function<double(int64_t requests)> host_s;
  bool host_after_gpu = false;
};

struct ClosedLoopResult {
  double mean_ttft_s = 0;
  double mean_tpot_s = 0;          // 0 when osl == 1
  double mean_itl_s = 0;           // token-weighted (above); 0 when osl == 1
  double makespan_s = 0;           // last token of the last request
  double requests_per_s = 0;       // requests / makespan
  double output_tokens_per_s = 0;  // every request's tokens / makespan
  int64_t passes = 0;              // passes simulated (for tests)
  int64_t preemptions = 0;         // requests sent back to the queue
};

// Runs the benchmark; sizes are clamped to at least 1 (requests to at
// least clients in a closed loop). Deterministic, no randomness. Cost: one loop
// iteration per pass that prefills, one per completion otherwise (decode-only
// stretches are jumped over), so O(requests · (1 + isl / step_tokens));
// under kPreemptNewest a full cache also ends a stretch, and each
// preemption scans the running requests for the newest.
ClosedLoopResult SimulateClosedLoop(const ClosedLoopBenchmark& bench,
                                    const PassTimes& times);

}  // namespace meshtune::costmodel

#endif  // MESHTUNE_COSTMODEL_CLOSED_LOOP_H_
