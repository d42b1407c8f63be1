#include "costmodel/serving_loads.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <utility>
#include <vector>

#include "costmodel/closed_loop.h"
#include "costmodel/serving_internal.h"

namespace meshtune::costmodel {

using internal::AttentionLayers;
using internal::AttentionLayersOf;
using internal::ChunkContextOf_s;
using internal::ServingOptions;
using search_spaces::ClusterSpec;
using search_spaces::ModelSpec;
using search_spaces::ServingConfig;
using search_spaces::ServingWorkload;

namespace {

// The context a decode step is priced at: a request's mean over its
// decodes, isl + osl / 2 tokens.
int64_t MeanContext(int64_t isl, int64_t osl) { return isl + osl / 2; }

// Tokens of a step's budget each running decode takes: its token and,
// under speculative decoding, the drafts it verifies
// (search_spaces::VerifiedTokens; TensorRT-LLM, vLLM and SGLang count them
// in max_num_tokens).
int64_t DecodeWidth(const ModelSpec& m, const ServingConfig& c) {
  return search_spaces::VerifiedTokens(m, c);
}

// Output tokens a step emits per request on average: 1 plus the accepted
// drafts where the deployment speculates (search_spaces::DecodeProgress).
double Progress(const ModelSpec& m, const ServingWorkload& w,
                const ServingConfig& c) {
  return search_spaces::DecodeProgress(w, search_spaces::ServedDrafts(m, c));
}

// The prefill of `sequences` of the workload's prompts together: their
// isl − prefix new tokens each, attending to the cached prefix too
// (PromptsPrefillTime_s).
double Prompts_s(const ModelSpec& m, const ClusterSpec& cluster,
                 const ServingConfig& c, const ServingWorkload& w,
                 int64_t sequences, const Calibration& cal,
                 const ModelOptions& o) {
  return PromptsPrefillTime_s(m, cluster, c, w.isl, w.prefix, sequences, cal,
                              o);
}

// The value memoised in `memo` under `key`, computed on the first call.
template <typename Compute>
double Memoised(std::map<std::pair<int64_t, int64_t>, double>* memo,
                std::pair<int64_t, int64_t> key, Compute compute) {
  const auto [it, missing] = memo->try_emplace(key, 0.0);
  if (missing) it->second = compute();
  return it->second;
}

// The prefill time an offline step carries on its critical path: B/osl
// new requests a step, prefilled in batches of S = ceil(B/osl) prompts every
// S / (B/osl) steps. With attention DP a prompt runs whole on its rank and
// a pass waits for the busiest rank (PrefillTime_s):
//   - TensorRT-LLM's attention-DP balance holds prompts back until every
//     rank has one, so S is rounded up to a prompt on every rank,
//     prefilled side by side: the `balanced` share.
//   - Without it (every engine's default) each prompt starts on its rank as
//     it arrives and the other ranks' decodes wait for it (TensorRT-LLM's
//     blog10_ADP_Balance_Strategy: "the iteration time is dominated by the
//     slowest rank"; a 1.33x throughput gain from balancing on 8 GB200s).
//     A rank is busy with a prompt chunk in a share k = (B/osl) · chunks /
//     adp of the steps (a prompt takes ceil(n / q) steps for its n =
//     isl − prefix new tokens, of the q prompt
//     tokens the rank's budget leaves beside its decodes), and a step pays
//     a chunk when any of the adp ranks is busy, 1 − (1 − k)^adp of them:
//     the balanced share times (1 − (1 − k)^adp) / k, at most the serial
//     share of S prompts a step on S ranks (k → 0: each prompt alone).
// `one_prompt_s` is Prompts_s of one prompt, which the caller has.
// Under speculative decoding a step finishes Progress times as many
// requests, B · progress / osl, and each decode takes DecodeWidth tokens of
// the budget.
double OfflinePrefillPerStep_s(const ModelSpec& m, const ClusterSpec& cluster,
                               const ServingConfig& c, const ServingWorkload& w,
                               int64_t batch, double one_prompt_s,
                               const Calibration& cal, const ModelOptions& o) {
  const double new_per_step =
      static_cast<double>(batch) * Progress(m, w, c) / w.osl;
  const double adp = static_cast<double>(c.attention_dp);
  const auto share = [&](double prompts) {
    const int64_t seqs = std::max<int64_t>(1, std::llround(prompts));
    if (seqs == 1) return one_prompt_s * new_per_step;
    return Prompts_s(m, cluster, c, w, seqs, cal, o) * new_per_step /
           static_cast<double>(seqs);
  };
  const double balanced = share(adp * std::ceil(new_per_step / adp));
  if (c.attention_dp == 1 || c.attention_dp_balance) return balanced;
  const double decodes =
      static_cast<double>(batch * DecodeWidth(m, c)) / (adp * c.pp);
  const double q =
      std::max(1.0, static_cast<double>(MaxNumTokens(c)) - decodes);
  const double chunks =
      std::ceil(static_cast<double>(search_spaces::PrefillTokens(w)) / q);
  const double k = std::min(1.0, new_per_step * chunks / adp);
  const double stalls = (1.0 - std::pow(1.0 - k, adp)) / k;
  return std::min(share(std::ceil(new_per_step)), balanced * stalls);
}

// EstimateServing, its closed loop's requests in cohorts (`cohorts`, with a
// concurrency) or spread over the steps as they come to an open loop at a
// rate (EstimateServingAtRate) and offline.
// The batch per replica of `est` (memory estimated): the workload's
// concurrency over the replicas, else as many sequences as the KV cache and
// the max batch allow, offline also within the step's token budget. Sets
// est->batch, and est->infeasible_reason when the concurrency does not fit;
// returns whether it does.
bool ChooseBatch(const ModelSpec& m, const ServingWorkload& w,
                 const ServingConfig& c, ServingEstimate* est) {
  int64_t batch = std::min(est->max_sequences, MaxBatch(c));
  if (w.concurrency == 0) {
    // Offline, the queue keeps every step full: each step carries its B
    // decode tokens and prefills B/osl new requests of n = isl − prefix
    // new tokens, within the step's token budget (TensorRT-LLM's
    // max_num_tokens, in-flight batching with chunked context:
    // docs/source/performance/perf-best-practices.md, "max_num_tokens"),
    // so B · (1 + n/osl) ≤ max_num_tokens per attention-DP rank and per
    // pipeline micro-batch (each of the pp in flight is scheduled with its
    // own budget). Speculative decoding: each decode takes DecodeWidth
    // tokens and a step finishes B · progress / osl requests, so
    // B · (width + n · progress / osl) ≤ max_num_tokens.
    const double osl = static_cast<double>(w.osl);
    const int64_t budget = static_cast<int64_t>(std::floor(
        static_cast<double>(MaxNumTokens(c)) * c.attention_dp * c.pp * osl /
        (static_cast<double>(search_spaces::PrefillTokens(w)) *
             Progress(m, w, c) +
         osl * DecodeWidth(m, c))));
    batch = std::min(batch, std::max<int64_t>(1, budget));
  }
  if (w.concurrency > 0) {
    const int64_t wanted =
        (w.concurrency + est->replicas - 1) / est->replicas;  // ceil
    if (wanted > batch) {
      est->infeasible_reason = "batch_limit: " + std::to_string(wanted) +
                               " sequences per replica exceed the " +
                               std::to_string(batch) + " that fit";
      est->batch = batch;
      return false;
    }
    batch = wanted;
  }
  est->batch = batch;
  return true;
}

// The requests one step prefills together. A closed loop of fixed-length
// requests keeps them in cohorts: the clients start together, and a
// cohort prefilled in one step finishes its osl tokens together, so its
// replacements arrive together and are prefilled in one step again, as
// many as the step's token budget holds (max_num_tokens per attention-DP
// rank: TensorRT-LLM's max_num_tokens, vLLM's max_num_batched_tokens,
// SGLang's chunked_prefill_size), one rank's share on each rank. The
// cohorts stay a step apart, so a request waits for its own cohort's
// prefill, not for the others'. Offline and open-loop
// (EstimateServingAtRate) arrivals are not in step: one.
int64_t CohortSize(const ServingWorkload& w, const ServingConfig& c,
                   int64_t batch, bool cohorts) {
  if (!cohorts) return 1;
  const int64_t per_rank = std::max<int64_t>(
      1,
      MaxNumTokens(c) / std::max<int64_t>(1, search_spaces::PrefillTokens(w)));
  return std::max<int64_t>(1, std::min(batch, per_rank * c.attention_dp));
}

// A cohort's TTFT: the pass that prefills it carries the other cohorts'
// decodes, not a step of the whole batch, with the host's work on every
// request beside it: the pass calendar's pass (closed_loop.h), the step
// overhead alone when the cohort is the whole batch. At one cohort whose
// prompts fit the budget this is the calendar's TTFT; a decode step of the
// whole batch on top of the prefill had put it 3-25 % above (LLaMA-3 8B on
// one H100 at one client and 1024 tokens: 32.4 ms against 26.0). Prompts
// that do not fit one pass beside the decodes (per attention-DP rank and
// micro-batch) take ceil(tokens / free budget) passes, each with the
// others' decodes: a lone 16 384-token prompt under an 8192-token budget
// takes two.
double CohortTtft_s(const ModelSpec& m, const ClusterSpec& cluster,
                    const ServingWorkload& w, const ServingConfig& c,
                    const ServingEstimate& est, int64_t group,
                    double group_prefill_s, const Calibration& cal,
                    const ModelOptions& o) {
  const int64_t batch = est.batch;
  const double others_gpu_s =
      batch > group ? DecodeStep(m, cluster, c, batch - group,
                                 MeanContext(w.isl, w.osl), cal, o)
                          .gpu_s()
                    : StepOverhead_s(c.engine);
  const int64_t adp = std::max<int64_t>(1, c.attention_dp);
  const double per_rank_prompt_tokens =
      std::ceil(static_cast<double>(group) / adp) *
      static_cast<double>(search_spaces::PrefillTokens(w));
  const double free_tokens =
      std::max(1.0, static_cast<double>(MaxNumTokens(c)) -
                        std::ceil(static_cast<double>(batch - group) *
                                  DecodeWidth(m, c) / (adp * c.pp)));
  const double passes = std::ceil(per_rank_prompt_tokens / free_tokens);
  return passes * PassWithHost_s(others_gpu_s + group_prefill_s / passes,
                                 est.decode.host_s, est.decode.host_after_gpu);
}

// A closed loop's replacements miss the pass in flight when they arrive
// (ClosedLoopBenchmark::next_request_misses_a_pass): with one cohort the
// engine is idle then and takes them at once; with n > 1 cohorts the pass
// they wait for is often another cohort's prefill, more often the more
// cohorts. The calendar's mean TTFT is the cohort's own pass times about
// 2 − 1/√n: matched to it (not to any measurement) over LLaMA-3 8B and
// 70B, Mixtral 8x7B and DeepSeek-V3 on H100 and H200 at 1 024 to 16 384
// prompt tokens, 128 and 1 024 output tokens and 1 to 512 clients, the
// closed form's TTFT is within a mean 7.0 % of the calendar's (15.5 %
// before the missed pass, which the closed form then left out too).
double MissedPassFactor(double cohorts) {
  return cohorts > 1.0 ? 2.0 - 1.0 / std::sqrt(cohorts) : 1.0;
}

ServingEstimate EstimateServingOf(const ModelSpec& m,
                                  const ClusterSpec& cluster,
                                  const ServingWorkload& w,
                                  const ServingConfig& c, int64_t num_gpus,
                                  const Calibration& cal, const ModelOptions& o,
                                  bool cohorts) {
  ServingEstimate est = EstimateServingMemory(m, cluster, w, c);
  est.replicas = std::max<int64_t>(1, num_gpus / c.gpus());
  if (!est.infeasible_reason.empty()) return est;
  if (!ChooseBatch(m, w, c, &est)) return est;
  est.fits = true;
  const int64_t batch = est.batch;

  est.prefill_s = Prompts_s(m, cluster, c, w, 1, cal, o);
  est.decode =
      DecodeStep(m, cluster, c, batch, MeanContext(w.isl, w.osl), cal, o);
  const int64_t group = CohortSize(w, c, batch, cohorts);
  const double group_prefill =
      group == 1 ? est.prefill_s : Prompts_s(m, cluster, c, w, group, cal, o);
  // The steps. With a pipeline the prefills of the steps fill its pp
  // micro-batches, which its stages work through as they do the decodes'
  // (DecodeStep): a round pays 1/pp of their latency on average (the pass
  // calendar pays its slowest micro-batch, closed_loop.h: a lone prompt's
  // whole latency, as the TTFT below does). The host works through the
  // step's requests beside it (its prefills included in the GPU's side):
  // the longer of the two; or after it (HostAfterGpu): their sum.
  const auto step = [&](double prefill_s) {
    return PassWithHost_s(est.decode.gpu_s() + prefill_s / c.pp,
                          est.decode.host_s, est.decode.host_after_gpu);
  };
  // A step emits `progress` tokens per request (1 without speculative
  // decoding), so a request's osl tokens take osl / progress steps and a
  // token costs a step over progress.
  const double progress = Progress(m, w, c);
  if (!cohorts) {
    // Offline and at a rate: new requests spread over the steps
    // (OfflinePrefillPerStep_s); TTFT one prefill and a step.
    est.step_s = step(OfflinePrefillPerStep_s(m, cluster, c, w, batch,
                                              est.prefill_s, cal, o));
    est.tpot_s = est.step_s / progress;
    est.ttft_s = group_prefill + est.decode.total_s();
  } else {
    // A closed loop: its n = batch / group cohorts are each prefilled once
    // every osl / progress steps, together. The mean step carries n of
    // those prefills per osl / progress steps; a request's decode steps
    // carry the other cohorts' n − 1, not its own. The spread-out offline
    // share instead, with attention DP its stalls on the busiest rank,
    // priced the 60 attention-DP rows of the aiconfigurator file at a TPOT
    // error of 161 %, against 28 % (the pass calendar's 30 %;
    // docs/serving.md §5).
    const double n = static_cast<double>(batch) / static_cast<double>(group);
    est.step_s =
        step(n * group_prefill * progress / static_cast<double>(w.osl));
    est.tpot_s = w.osl > 1 ? step(std::max(0.0, n - 1.0) * group_prefill *
                                  progress / static_cast<double>(w.osl - 1)) /
                                 progress
                           : est.step_s / progress;
    est.ttft_s =
        CohortTtft_s(m, cluster, w, c, est, group, group_prefill, cal, o) *
        MissedPassFactor(n);
  }
  const double per_replica = static_cast<double>(batch) * progress / est.step_s;
  est.output_tokens_per_s = per_replica * est.replicas;
  est.output_tokens_per_s_per_gpu =
      est.output_tokens_per_s / static_cast<double>(est.replicas * c.gpus());
  est.output_tokens_per_s_per_user = 1.0 / est.tpot_s;
  return est;
}

}  // namespace

ServingEstimate EstimateServing(const ModelSpec& m, const ClusterSpec& cluster,
                                const ServingWorkload& w,
                                const ServingConfig& c, int64_t num_gpus,
                                const Calibration& cal, const ModelOptions& o) {
  return EstimateServingOf(m, cluster, w, c, num_gpus, cal, o,
                           /*cohorts=*/w.concurrency > 0);
}

ServingEstimate EstimateServingAtRate(const ModelSpec& m,
                                      const ClusterSpec& cluster,
                                      const ServingWorkload& w,
                                      const ServingConfig& c, int64_t num_gpus,
                                      double rate, const Calibration& cal,
                                      const ModelOptions& o) {
  ServingWorkload at = w;
  at.concurrency = 0;
  ServingEstimate e = EstimateServing(m, cluster, at, c, num_gpus, cal, o);
  if (!e.fits) return e;
  const double capacity = e.output_tokens_per_s / static_cast<double>(w.osl);
  if (rate >= capacity) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "overloaded: %.3g requests/s reach the %.3g the "
                  "deployment serves",
                  rate, capacity);
    e.fits = false;
    e.infeasible_reason = buf;
    return e;
  }
  at.concurrency = 1;
  for (int i = 0; i < 30; ++i) {
    e = EstimateServingOf(m, cluster, at, c, num_gpus, cal, o,
                          /*cohorts=*/false);
    if (!e.fits) return e;
    // Random arrivals land anywhere in a step: a request waits for the
    // rest of the step in flight (half of one on average; the engine
    // schedules at step boundaries, TensorRT-LLM's and vLLM's in-flight
    // batching) and is prefilled in the next with the others that arrived
    // during it, rate · step of them on top of itself (at most a step's
    // token budget), not with a closed loop's group.
    const double arrivals = rate / static_cast<double>(e.replicas) * e.step_s;
    const int64_t group = std::max<int64_t>(
        1, std::min<int64_t>(
               std::llround(1.0 + arrivals),
               std::max<int64_t>(
                   1, MaxNumTokens(c) / search_spaces::PrefillTokens(w))));
    const double group_prefill =
        group == 1 ? e.prefill_s : Prompts_s(m, cluster, c, w, group, cal, o);
    e.ttft_s = 0.5 * e.step_s + group_prefill + e.decode.total_s();
    const double in_system =
        e.ttft_s + static_cast<double>(w.osl - 1) * e.tpot_s;
    const int64_t next =
        std::max<int64_t>(1, std::llround(std::ceil(rate * in_system)));
    if (next == at.concurrency) break;
    at.concurrency = next;
  }
  e.output_tokens_per_s = rate * static_cast<double>(w.osl);
  e.output_tokens_per_s_per_gpu =
      e.output_tokens_per_s / static_cast<double>(e.replicas * c.gpus());
  return e;
}

namespace {

// The benchmark one replica runs: its share of the clients and requests,
// the step budget, the max batch and the KV cache in tokens of `e` (an
// offline estimate that fits), the work bounded (kMaxSimulatedPasses).
ClosedLoopBenchmark ReplicaBenchmark(const ModelSpec& m,
                                     const ServingEstimate& e,
                                     const ServingWorkload& w,
                                     const ServingConfig& c, int64_t clients,
                                     int64_t requests, int64_t warmup) {
  const int64_t replicas = e.replicas;
  ClosedLoopBenchmark b;
  b.clients = std::max<int64_t>(1, (clients + replicas - 1) / replicas);
  b.requests =
      std::max<int64_t>(b.clients, (requests + replicas - 1) / replicas);
  b.warmup = (warmup + replicas - 1) / replicas;
  b.isl = w.isl;
  b.osl = w.osl;
  b.prefix = w.prefix;
  b.shared_prefix = e.kv_shared_prefix_tokens;
  b.decode_width = DecodeWidth(m, c);
  b.decode_progress = Progress(m, w, c);
  b.next_request_misses_a_pass = true;
  b.step_tokens = MaxNumTokens(c) * c.attention_dp * c.pp;
  b.micro_batches = c.pp;
  // About one loop iteration per request and prompt chunk: beyond the
  // bound fewer requests are measured, never less than one wave.
  const double per_request = 1.0 + static_cast<double>(b.isl - b.prefix) /
                                       static_cast<double>(b.step_tokens);
  const int64_t affordable =
      static_cast<int64_t>(kMaxSimulatedPasses / per_request);
  const int64_t share = b.requests;
  b.requests = std::min(b.requests, std::max(b.warmup + b.clients, affordable));
  // A pool of K prefixes spread evenly over the requests, each routed to
  // any replica: a replica meets K · (1 − (1 − 1/R)^(N/K)) of them, each
  // cold at its first use but the test request's (in the share of them
  // that the simulated requests are of the replica's). Only a run measured
  // from its first request sees them: a steady state (a warm-up left out)
  // has every prefix cached.
  if (w.prefix > 0 && w.prefix_pool > 1 && warmup == 0) {
    const double pool = static_cast<double>(w.prefix_pool);
    const double met =
        pool * (1.0 - std::pow(1.0 - 1.0 / static_cast<double>(replicas),
                               static_cast<double>(requests) / pool));
    const double cold = std::max(0.0, met - 1.0) *
                        static_cast<double>(b.requests) /
                        static_cast<double>(share);
    b.cold_prefix_requests =
        std::min<int64_t>(b.requests - 1, std::llround(cold));
  }
  if (w.lengths == search_spaces::LengthSpread::kExponential) {
    b.input_lengths = ExponentialLengths(w.isl, b.requests, 1);
    b.output_lengths = ExponentialLengths(w.osl, b.requests, 0);
  }
  b.max_running = std::max<int64_t>(1, MaxBatch(c));
  b.kv_policy = KvAdmissionOf(c.engine);
  // The cache's tokens besides the shared prefix's pages, at each
  // sequence's own bytes per token.
  const double per_token =
      e.kv_bytes_per_sequence /
      static_cast<double>(w.isl + w.osl - e.kv_shared_prefix_tokens);
  if (per_token > 0) {
    const double own =
        std::max(0.0, e.kv_cache_bytes - e.kv_shared_prefix_bytes);
    b.kv_tokens = static_cast<int64_t>(std::min(
        std::floor(own / per_token) * static_cast<double>(c.attention_dp),
        1e15));
  }
  return b;
}

// The pass times of `b` from this model, memoised: a benchmark repeats
// few distinct passes. Holds references to its arguments.
class MemoisedPassTimes {
 public:
  MemoisedPassTimes(const ModelSpec& m, const ClusterSpec& cluster,
                    const ServingConfig& c, const ClosedLoopBenchmark& b,
                    const Calibration& cal, const ModelOptions& o)
      : m_(m),
        cluster_(cluster),
        c_(c),
        cal_(cal),
        o_(o),
        context_(MeanContext(b.isl, b.osl)),
        attention_(AttentionLayersOf(m, c)),
        serving_options_(ServingOptions(o)),
        decode_(static_cast<size_t>(std::min(b.clients, b.max_running) + 1),
                -1.0) {}

  PassTimes Times() {
    PassTimes t;
    t.decode_s = [this](int64_t batch) { return Decode_s(batch); };
    t.prefill_s = [this](int64_t tokens, int64_t sequences) {
      return Prefill_s(tokens, sequences);
    };
    t.chunk_context_s = [this](int64_t chunk, int64_t prior) {
      return ChunkContext_s(chunk, prior);
    };
    t.empty_pass_s = StepOverhead_s(c_.engine);
    t.host_s = [this](int64_t running) {
      return HostStepTime_s(c_.engine, cluster_,
                            static_cast<double>(running) / c_.attention_dp);
    };
    t.host_after_gpu = HostAfterGpu(c_);
    return t;
  }

 private:
  double Decode_s(int64_t batch) {
    double& slot = decode_[static_cast<size_t>(
        std::min<int64_t>(batch, static_cast<int64_t>(decode_.size()) - 1))];
    if (slot < 0) {
      slot = DecodeStep(m_, cluster_, c_, batch, context_, cal_, o_).gpu_s();
    }
    return slot;
  }

  // One micro-batch's prompts through every pipeline stage: the calendar
  // charges a pass its slowest micro-batch (closed_loop.h).
  double Prefill_s(int64_t tokens, int64_t sequences) {
    return Memoised(&prefill_, {tokens, sequences}, [&] {
      return PrefillTime_s(m_, cluster_, c_, tokens, sequences, cal_, o_);
    });
  }

  // The heaviest stage's block, once per pipeline stage it passes.
  double ChunkContext_s(int64_t chunk, int64_t prior) {
    return Memoised(&chunk_context_, {chunk, prior}, [&] {
      return static_cast<double>(c_.pp) *
             ChunkContextOf_s(attention_, cal_, chunk, prior, serving_options_);
    });
  }

  const ModelSpec& m_;
  const ClusterSpec& cluster_;
  const ServingConfig& c_;
  const Calibration& cal_;
  const ModelOptions& o_;
  const int64_t context_;  // MeanContext
  const AttentionLayers attention_;
  const ModelOptions serving_options_;  // ServingOptions(o_)
  std::vector<double> decode_;          // by batch; -1 = not priced yet
  std::map<std::pair<int64_t, int64_t>, double> prefill_;
  // by (chunk, prior) tokens
  std::map<std::pair<int64_t, int64_t>, double> chunk_context_;
};

// Runs one replica's benchmark `b` on this model's pass times and writes
// its means over `e` (an offline estimate that fits): TTFT, TPOT (and
// step), the throughputs over all replicas, the batch of `b.clients` and
// the decode step at it (at most the max batch).
void Simulate(const ModelSpec& m, const ClusterSpec& cluster,
              const ServingWorkload& w, const ServingConfig& c,
              const ClosedLoopBenchmark& b, const Calibration& cal,
              const ModelOptions& o, ServingEstimate* e) {
  MemoisedPassTimes times(m, cluster, c, b, cal, o);
  const ClosedLoopResult r = SimulateClosedLoop(b, times.Times());
  const double replicas = static_cast<double>(e->replicas);
  e->batch = b.clients;
  e->decode = DecodeStep(m, cluster, c, std::min(b.clients, b.max_running),
                         MeanContext(w.isl, w.osl), cal, o);
  e->step_s = r.mean_tpot_s;
  e->ttft_s = r.mean_ttft_s;
  e->tpot_s = r.mean_tpot_s;
  e->itl_s = r.mean_itl_s;
  e->output_tokens_per_s = r.output_tokens_per_s * replicas;
  e->output_tokens_per_s_per_gpu =
      e->output_tokens_per_s / (replicas * static_cast<double>(c.gpus()));
  e->output_tokens_per_s_per_user = e->tpot_s > 0 ? 1.0 / e->tpot_s : 0.0;
}

}  // namespace

ServingEstimate EstimateClosedLoopBenchmark(
    const ModelSpec& m, const ClusterSpec& cluster, const ServingWorkload& w,
    const ServingConfig& c, int64_t num_gpus, int64_t clients, int64_t requests,
    int64_t warmup, const Calibration& cal, const ModelOptions& o) {
  ServingWorkload offline = w;
  offline.concurrency = 0;
  ServingEstimate e = EstimateServing(m, cluster, offline, c, num_gpus, cal, o);
  if (!e.fits) return e;
  const ClosedLoopBenchmark b =
      ReplicaBenchmark(m, e, w, c, clients, requests, warmup);
  if (b.clients > kMaxSimulatedClients) {
    e.fits = false;
    e.infeasible_reason = "batch_limit: " + std::to_string(b.clients) +
                          " clients per replica exceed the " +
                          std::to_string(kMaxSimulatedClients) +
                          " a benchmark is simulated with";
    return e;
  }
  Simulate(m, cluster, w, c, b, cal, o, &e);
  return e;
}

ServingEstimate EstimateOpenLoopBenchmark(
    const ModelSpec& m, const ClusterSpec& cluster, const ServingWorkload& w,
    const ServingConfig& c, int64_t num_gpus, double rate, int64_t requests,
    Arrivals arrivals, const Calibration& cal, const ModelOptions& o) {
  ServingWorkload offline = w;
  offline.concurrency = 0;
  ServingEstimate e = EstimateServing(m, cluster, offline, c, num_gpus, cal, o);
  if (!e.fits) return e;
  const int64_t n = std::max<int64_t>(1, requests);
  ClosedLoopBenchmark b = ReplicaBenchmark(m, e, w, c, n, n, 0);
  b.open_loop = true;
  b.arrival_interval_s = rate > 0 && std::isfinite(rate)
                             ? static_cast<double>(e.replicas) / rate
                             : 0.0;
  b.arrivals = arrivals;
  // The most running at once, which sizes the pass-time memo.
  b.clients = std::min(b.requests, b.max_running);
  Simulate(m, cluster, w, c, b, cal, o, &e);
  return e;
}

ServingEstimate EstimateClosedLoopSteadyState(
    const ModelSpec& m, const ClusterSpec& cluster, const ServingWorkload& w,
    const ServingConfig& c, int64_t num_gpus, int64_t clients,
    const Calibration& cal, const ModelOptions& o) {
  return EstimateClosedLoopBenchmark(m, cluster, w, c, num_gpus, clients,
                                     (1 + kMeasuredRequestsPerClient) * clients,
                                     clients, cal, o);
}

DisaggregatedEstimate EstimateDisaggregated(
    const ModelSpec& m, const ClusterSpec& cluster, const ServingWorkload& w,
    const ServingConfig& prefill, int64_t prefill_workers,
    const ServingConfig& decode, int64_t decode_workers, const Calibration& cal,
    const ModelOptions& o) {
  DisaggregatedEstimate d;
  const int64_t concurrency = std::max<int64_t>(1, w.concurrency);
  const int64_t workers = std::max<int64_t>(1, decode_workers);
  ServingWorkload share = w;
  share.concurrency = (concurrency + workers - 1) / workers;
  d.decode = EstimateServing(m, cluster, share, decode, decode.gpus(), cal, o);
  if (!d.decode.fits) {
    d.infeasible_reason = "decode: " + d.decode.infeasible_reason;
    return d;
  }
  d.fits = true;
  // One decode worker at its share steps without prefills: its decode step
  // alone (EstimateServing priced it at the same batch and context).
  d.tpot_s = DecodeWorkerTpot_s(m, share, decode, d.decode.decode);
  d.prefill_s = Prompts_s(m, cluster, prefill, w, prefill.attention_dp, cal, o);
  d.prefill_requests_per_s = static_cast<double>(prefill_workers) *
                             prefill.attention_dp /
                             std::max(d.prefill_s, 1e-12);
  const DisaggregatedLoop loop = DisaggregatedClosedLoop(
      d.prefill_s, d.prefill_requests_per_s, d.tpot_s, concurrency, w.osl);
  d.requests_per_s = loop.requests_per_s;
  d.ttft_s = loop.ttft_s;
  d.output_tokens_per_s = d.requests_per_s * w.osl;
  return d;
}

double DecodeWorkerTpot_s(const ModelSpec& m, const ServingWorkload& w,
                          const ServingConfig& decode,
                          const DecodeBreakdown& step) {
  return step.total_s() / Progress(m, w, decode);
}

DisaggregatedLoop DisaggregatedClosedLoop(double prefill_s,
                                          double prefill_requests_per_s,
                                          double tpot_s, int64_t concurrency,
                                          int64_t osl) {
  DisaggregatedLoop loop;
  const double c = static_cast<double>(std::max<int64_t>(1, concurrency));
  const double decode_s = static_cast<double>(osl - 1) * tpot_s;
  loop.requests_per_s =
      std::min(c / (prefill_s + decode_s), prefill_requests_per_s);
  loop.ttft_s = std::max(prefill_s, c / loop.requests_per_s - decode_s);
  return loop;
}

double DisaggregatedBenchmarkTtft_s(double prefill_s, int64_t prefill_ranks,
                                    int64_t clients, int64_t requests,
                                    double steady_ttft_s) {
  const int64_t c = std::max<int64_t>(1, clients);
  const int64_t ranks = std::max<int64_t>(1, prefill_ranks);
  const int64_t n = std::max(c, requests);
  // Σ_{i<c} (⌊i / ranks⌋ + 1): k full rounds of `ranks` prompts, then the
  // remainder in round k + 1.
  const double k = static_cast<double>(c / ranks);
  const double rest = static_cast<double>(c % ranks);
  const double rounds =
      static_cast<double>(ranks) * k * (k + 1.0) / 2.0 + rest * (k + 1.0);
  return (rounds * prefill_s + static_cast<double>(n - c) * steady_ttft_s) /
         static_cast<double>(n);
}

}  // namespace meshtune::costmodel
