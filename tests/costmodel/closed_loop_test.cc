// The closed-loop benchmark simulator against passes worked out by hand:
// one request, a burst chunked over the step budget, a KV cache that holds
// one request at a time, and a full cache under each admission policy.
#include "costmodel/closed_loop.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace meshtune::costmodel {
namespace {

PassTimes Times(double decode_per_row_s, double decode_fixed_s,
                double prefill_s, double empty_s) {
  PassTimes t;
  t.decode_s = [=](int64_t b) {
    return decode_fixed_s + decode_per_row_s * static_cast<double>(b);
  };
  t.prefill_s = [=](int64_t, int64_t) { return prefill_s; };
  t.empty_pass_s = empty_s;
  return t;
}

TEST(SimulateClosedLoop, OneRequestPrefillsThenDecodes) {
  // Pass 0: the step overhead 0.25 + the prefill 0.5 -> first token at
  // 0.75; passes 1 and 2 decode its other two tokens, 1 s each.
  const ClosedLoopBenchmark b{1, 1, 10, 3, 100, 8, 0};
  const ClosedLoopResult r = SimulateClosedLoop(b, Times(0, 1.0, 0.5, 0.25));
  EXPECT_DOUBLE_EQ(r.mean_ttft_s, 0.75);
  EXPECT_DOUBLE_EQ(r.mean_tpot_s, 1.0);  // (2.75 − 0.75) / 2
  EXPECT_DOUBLE_EQ(r.makespan_s, 2.75);
  EXPECT_DOUBLE_EQ(r.requests_per_s, 1 / 2.75);
  EXPECT_DOUBLE_EQ(r.output_tokens_per_s, 3 / 2.75);
  EXPECT_EQ(r.passes, 3);
}

TEST(SimulateClosedLoop, BurstIsChunkedOverTheStepBudget) {
  // Four 100-token prompts at t = 0, a 100-token budget, 2 output tokens;
  // a prefill chunk costs 1 s, a decode 0.1 s per row.
  //   pass 0: A's 100 tokens                     -> t 1.0, A's first token
  //   pass 1: A decodes, B's first 99 tokens     -> t 2.1, A done
  //   pass 2: B's last token, C's first 99       -> t 3.1, B's first token
  //   pass 3: B decodes, C's last, D's first 98  -> t 4.2, B done, C first
  //   pass 4: C decodes, D's last 2              -> t 5.3, C done, D first
  //   pass 5: D decodes                          -> t 5.4, D done
  const ClosedLoopBenchmark b{4, 4, 100, 2, 100, 64, 0};
  const ClosedLoopResult r = SimulateClosedLoop(b, Times(0.1, 0, 1.0, 0));
  EXPECT_NEAR(r.mean_ttft_s, (1.0 + 3.1 + 4.2 + 5.3) / 4, 1e-12);
  EXPECT_NEAR(r.mean_tpot_s, (1.1 + 1.1 + 1.1 + 0.1) / 4, 1e-12);
  EXPECT_NEAR(r.makespan_s, 5.4, 1e-12);
  EXPECT_EQ(r.passes, 6);
}

TEST(SimulateClosedLoop, ChunksAttendToTheirPromptsEarlierChunks) {
  // The burst above with chunk_context_s(c, p) = c · p / 10 000 s: a chunk
  // that continues its prompt also pays its queries against the prompt's
  // keys from earlier passes.
  //   pass 0: A's 100 tokens                           -> t 1.0
  //   pass 1: A decodes, B's first 99                  -> t 2.1
  //   pass 2: B's last token (1 · 99), C's first 99    -> t 3.1099
  //   pass 3: B decodes, C's last (1 · 99), D's 98     -> t 4.2198
  //   pass 4: C decodes, D's last 2 (2 · 98)           -> t 5.3394
  //   pass 5: D decodes                                -> t 5.4394
  PassTimes t = Times(0.1, 0, 1.0, 0);
  std::vector<std::pair<int64_t, int64_t>> calls;
  t.chunk_context_s = [&](int64_t chunk, int64_t prior) {
    calls.emplace_back(chunk, prior);
    return static_cast<double>(chunk * prior) / 10000.0;
  };
  const ClosedLoopBenchmark b{4, 4, 100, 2, 100, 64, 0};
  const ClosedLoopResult r = SimulateClosedLoop(b, t);
  const std::vector<std::pair<int64_t, int64_t>> want = {
      {1, 99}, {1, 99}, {2, 98}};
  EXPECT_EQ(calls, want);
  EXPECT_NEAR(r.mean_ttft_s, (1.0 + 3.1099 + 4.2198 + 5.3394) / 4, 1e-12);
  EXPECT_NEAR(r.makespan_s, 5.4394, 1e-12);
}

TEST(SimulateClosedLoop, ACachedPrefixIsNotPrefilledAgain) {
  // The burst above with the first 60 tokens of every prompt in the prefix
  // cache: each prefill computes 40 tokens, its first chunk attending to
  // the 60 cached ones (chunk_context_s(c, p) = c · p / 10 000 s).
  //   pass 0: A's 40, B's 40, C's first 20: 1 + 0.24 + 0.24 + 0.12 -> t 1.6
  //   pass 1: A, B decode (0.2), C's last 20 (prior 80: 0.16), D's 40
  //           (0.24): 0.2 + 1 + 0.4                                -> t 3.2
  //   pass 2: C, D decode                                          -> t 3.4
  PassTimes t = Times(0.1, 0, 1.0, 0);
  std::vector<std::pair<int64_t, int64_t>> calls;
  t.chunk_context_s = [&](int64_t chunk, int64_t prior) {
    calls.emplace_back(chunk, prior);
    return static_cast<double>(chunk * prior) / 10000.0;
  };
  ClosedLoopBenchmark b{4, 4, 100, 2, 100, 64, 0};
  b.prefix = 60;
  const ClosedLoopResult r = SimulateClosedLoop(b, t);
  const std::vector<std::pair<int64_t, int64_t>> want = {
      {40, 60}, {40, 60}, {20, 60}, {20, 80}, {40, 60}};
  EXPECT_EQ(calls, want);
  EXPECT_NEAR(r.mean_ttft_s, (1.6 + 1.6 + 3.2 + 3.2) / 4, 1e-12);
  EXPECT_NEAR(r.makespan_s, 3.4, 1e-12);
  EXPECT_EQ(r.passes, 3);
  // A prefix as long as the prompt still leaves its last token to compute.
  b.prefix = 1000;
  calls.clear();
  SimulateClosedLoop(b, t);
  EXPECT_EQ(calls.front(), std::make_pair(int64_t{1}, int64_t{99}));
}

TEST(SimulateClosedLoop, AColdPrefixIsComputedAtItsFirstUse) {
  // The burst above from a pool of two prefixes: request 0's is warm (the
  // benchmark's test request), request 1 (B) meets the other one first and
  // computes all its 100 tokens, its first chunk attending to nothing.
  //   pass 0: A's 40 (0.24), B's first 60                    -> t 1.24
  //   pass 1: A decodes (0.1), B's last 40 (prior 60: 0.24), C's 40
  //           (0.24), D's first 19 (0.114)                   -> t 2.934
  //   pass 2: B, C decode (0.2), D's last 21 (prior 79: 0.1659)
  //                                                          -> t 4.2999
  //   pass 3: D decodes                                      -> t 4.3999
  PassTimes t = Times(0.1, 0, 1.0, 0);
  std::vector<std::pair<int64_t, int64_t>> calls;
  t.chunk_context_s = [&](int64_t chunk, int64_t prior) {
    calls.emplace_back(chunk, prior);
    return static_cast<double>(chunk * prior) / 10000.0;
  };
  ClosedLoopBenchmark b{4, 4, 100, 2, 100, 64, 0};
  b.prefix = 60;
  b.cold_prefix_requests = 1;
  const ClosedLoopResult r = SimulateClosedLoop(b, t);
  const std::vector<std::pair<int64_t, int64_t>> want = {
      {40, 60}, {40, 60}, {40, 60}, {19, 60}, {21, 79}};
  EXPECT_EQ(calls, want);
  EXPECT_NEAR(r.mean_ttft_s, (1.24 + 2.934 + 2.934 + 4.2999) / 4, 1e-12);
  EXPECT_NEAR(r.makespan_s, 4.3999, 1e-12);
  EXPECT_EQ(r.passes, 4);
}

TEST(SimulateClosedLoop, APipelinePassPaysItsSlowestMicroBatch) {
  // Two micro-batches of 100 tokens each (a 200-token budget), a prefill
  // of t tokens costing t / 100 s through every stage, a decode 0.1 s per
  // row; three 100-token prompts at t = 0, 2 output tokens each.
  //   pass 0: A fills micro-batch 0, B micro-batch 1: max(1, 1) -> t 1.0
  //   pass 1: A, B decode (one per micro-batch, 0.2), C's first 99
  //           tokens beside A's decode                          -> t 2.19
  //   pass 2: C's last token                                   -> t 2.20
  //   pass 3: C decodes                                        -> t 2.30
  PassTimes t = Times(0.1, 0, 0, 0);
  std::vector<std::pair<int64_t, int64_t>> prefills;
  t.prefill_s = [&](int64_t tokens, int64_t sequences) {
    prefills.emplace_back(tokens, sequences);
    return static_cast<double>(tokens) / 100.0;
  };
  ClosedLoopBenchmark b{3, 3, 100, 2, 200, 8, 0};
  b.micro_batches = 2;
  const ClosedLoopResult r = SimulateClosedLoop(b, t);
  const std::vector<std::pair<int64_t, int64_t>> want = {
      {100, 1}, {100, 1}, {99, 1}, {1, 1}};
  EXPECT_EQ(prefills, want);
  EXPECT_NEAR(r.mean_ttft_s, (1.0 + 1.0 + 2.2) / 3, 1e-12);
  EXPECT_NEAR(r.mean_tpot_s, (1.19 + 1.19 + 0.1) / 3, 1e-12);
  EXPECT_NEAR(r.makespan_s, 2.3, 1e-12);
  EXPECT_EQ(r.passes, 4);
  // One micro-batch of the same budget prefills A and B together (2 s),
  // then C beside their decodes (0.2 + 1): its first token at 3.2 s.
  b.micro_batches = 1;
  EXPECT_NEAR(SimulateClosedLoop(b, t).mean_ttft_s, (2.0 + 2.0 + 3.2) / 3,
              1e-12);
  // A prompt takes one chunk a pass, however many micro-batches are free:
  // 250 tokens take three passes of 100, 100 and 50.
  ClosedLoopBenchmark lone{1, 1, 250, 1, 200, 8, 0};
  lone.micro_batches = 2;
  EXPECT_NEAR(SimulateClosedLoop(lone, t).mean_ttft_s, 2.5, 1e-12);
}

ClosedLoopBenchmark OpenLoop(int64_t requests, double interval_s, int64_t isl,
                             int64_t osl, int64_t step_tokens) {
  ClosedLoopBenchmark b;
  b.requests = requests;
  b.isl = isl;
  b.osl = osl;
  b.step_tokens = step_tokens;
  b.max_running = 64;
  b.open_loop = true;
  b.arrival_interval_s = interval_s;
  return b;
}

TEST(SimulateClosedLoop, OpenLoopAtAnInfiniteRateIsOneBurst) {
  // The four requests of the burst above, sent at once by an open loop:
  // the same passes, whatever the clients.
  const ClosedLoopResult r =
      SimulateClosedLoop(OpenLoop(4, 0.0, 100, 2, 100), Times(0.1, 0, 1.0, 0));
  EXPECT_NEAR(r.mean_ttft_s, (1.0 + 3.1 + 4.2 + 5.3) / 4, 1e-12);
  EXPECT_NEAR(r.mean_tpot_s, (1.1 + 1.1 + 1.1 + 0.1) / 4, 1e-12);
  EXPECT_NEAR(r.makespan_s, 5.4, 1e-12);
}

TEST(SimulateClosedLoop, OpenLoopArrivalsWaitForThePassInFlight) {
  // Requests every 1.5 s, 10-token prompts, 3 output tokens; a decode pass
  // 1 s, a prompt 0.5 s, an empty pass 0.25 s.
  //   pass 0: A's prompt (0.25 + 0.5)      -> t 0.75, A's first token
  //   pass 1: A decodes; B arrives at 1.5  -> t 1.75
  //   pass 2: A decodes, B's prompt        -> t 3.25, A done, B first (1.75)
  //   pass 3: B decodes, C's (at 3.0)      -> t 4.75, C first (1.75)
  //   pass 4: B and C decode               -> t 5.75, B done
  //   pass 5: C decodes                    -> t 6.75, C done
  const ClosedLoopResult r = SimulateClosedLoop(OpenLoop(3, 1.5, 10, 3, 100),
                                                Times(0, 1.0, 0.5, 0.25));
  EXPECT_NEAR(r.mean_ttft_s, (0.75 + 1.75 + 1.75) / 3, 1e-12);
  EXPECT_NEAR(r.mean_tpot_s, (1.25 + 1.25 + 1.0) / 3, 1e-12);
  EXPECT_NEAR(r.makespan_s, 6.75, 1e-12);
  EXPECT_NEAR(r.requests_per_s, 3 / 6.75, 1e-12);
}

TEST(SimulateClosedLoop, OpenLoopIdleEngineWaitsForTheNextArrival) {
  // Requests 10 s apart: A is done at 2.75 s, the engine idles until B
  // arrives and serves it alone as it served A.
  const ClosedLoopResult r = SimulateClosedLoop(OpenLoop(2, 10.0, 10, 3, 100),
                                                Times(0, 1.0, 0.5, 0.25));
  EXPECT_DOUBLE_EQ(r.mean_ttft_s, 0.75);
  EXPECT_DOUBLE_EQ(r.mean_tpot_s, 1.0);
  EXPECT_DOUBLE_EQ(r.makespan_s, 12.75);
  EXPECT_EQ(r.passes, 6);
}

TEST(ArrivalTimes, EvenAndPoisson) {
  EXPECT_EQ(ArrivalTimes(Arrivals::kEven, 1.5, 3),
            (std::vector<double>{0.0, 1.5, 3.0}));
  // Gaps −ln(1 − frac(i·φ)) · 2 s: frac(φ) = 0.618034 gives 1.924847,
  // frac(2φ) = 0.236068 gives 0.538553.
  const std::vector<double> t = ArrivalTimes(Arrivals::kPoisson, 2.0, 3);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_DOUBLE_EQ(t[0], 0.0);
  EXPECT_NEAR(t[1], 1.924847, 1e-6);
  EXPECT_NEAR(t[2], 2.463400, 1e-6);
  EXPECT_TRUE(ArrivalTimes(Arrivals::kPoisson, 0.0, 4) ==
              std::vector<double>(4, 0.0));  // an infinite rate
}

TEST(ArrivalTimes, PoissonGapsHaveTheExponentialsMeanAndSpread) {
  // An exponential's mean is its scale and its standard deviation too.
  const int n = 100000;
  const std::vector<double> t = ArrivalTimes(Arrivals::kPoisson, 0.5, n + 1);
  double sum = 0, sum_sq = 0;
  for (int i = 1; i <= n; ++i) {
    const double gap = t[i] - t[i - 1];
    ASSERT_GT(gap, 0.0);
    sum += gap;
    sum_sq += gap * gap;
  }
  const double mean = sum / n;
  const double var = sum_sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.5, 0.5 * 0.01);
  EXPECT_NEAR(std::sqrt(var), 0.5, 0.5 * 0.02);
  // Any 1000 consecutive gaps already average near the scale.
  EXPECT_NEAR((t[51000] - t[50000]) / 1000, 0.5, 0.5 * 0.05);
}

TEST(SimulateClosedLoop, PoissonArrivalsQueueWhereEvenOnesDoNot) {
  // One-token requests, each served alone in 0.75 s (0.25 empty pass +
  // 0.5 prompt). Every 2 s: never a queue, TTFT 0.75 each. Poisson at a
  // 2 s mean: arrivals 0, 1.9248, 2.4634 (ArrivalTimes above); C arrives
  // during B's pass (1.9248 .. 2.6748) and is served after it, done at
  // 3.424847: TTFT 0.961447, mean (0.75 + 0.75 + 0.961447) / 3.
  ClosedLoopBenchmark b = OpenLoop(3, 2.0, 10, 1, 100);
  const ClosedLoopResult even = SimulateClosedLoop(b, Times(0, 1.0, 0.5, 0.25));
  EXPECT_DOUBLE_EQ(even.mean_ttft_s, 0.75);
  b.arrivals = Arrivals::kPoisson;
  const ClosedLoopResult poisson =
      SimulateClosedLoop(b, Times(0, 1.0, 0.5, 0.25));
  EXPECT_NEAR(poisson.mean_ttft_s, (0.75 + 0.75 + 0.961447) / 3, 1e-6);
  EXPECT_NEAR(poisson.makespan_s, 3.424847, 1e-6);
}

TEST(SimulateClosedLoop, APassLastsTheLongerOfItsGpuAndHostSides) {
  // The burst above with a host that spends 0.4 s per request a pass runs:
  //   pass 0: A's prompt: GPU 1.0, host 0.4      -> t 1.0
  //   pass 1: A decodes, B's chunk: GPU 1.1, host 0.8 -> t 2.1
  //   pass 2: B's last token, C's chunk: GPU 1.0, host 0.8 -> t 3.1
  //   pass 3: B decodes, C's last, D's chunk: GPU 1.1, host 1.2 -> t 4.3
  //   pass 4: C decodes, D's last: GPU 1.1, host 0.8 -> t 5.4
  //   pass 5: D decodes: GPU 0.1, host 0.4       -> t 5.8
  PassTimes t = Times(0.1, 0, 1.0, 0);
  t.host_s = [](int64_t requests) { return 0.4 * requests; };
  const ClosedLoopResult r = SimulateClosedLoop({4, 4, 100, 2, 100, 64, 0}, t);
  EXPECT_NEAR(r.mean_ttft_s, (1.0 + 3.1 + 4.3 + 5.4) / 4, 1e-12);
  EXPECT_NEAR(r.makespan_s, 5.8, 1e-12);
}

TEST(SimulateClosedLoop, AHostAfterTheGpuAddsItsTimeToEveryPass) {
  // The same passes with the host's work after the GPU's (TensorRT-LLM
  // 1.0's pipeline loop): each lasts the sum.
  //   pass 0: 1.0 + 0.4 -> t 1.4; pass 1: 1.1 + 0.8 -> t 3.3;
  //   pass 2: 1.0 + 0.8 -> t 5.1; pass 3: 1.1 + 1.2 -> t 7.4;
  //   pass 4: 1.1 + 0.8 -> t 9.3; pass 5: 0.1 + 0.4 -> t 9.8
  PassTimes t = Times(0.1, 0, 1.0, 0);
  t.host_s = [](int64_t requests) { return 0.4 * requests; };
  t.host_after_gpu = true;
  const ClosedLoopResult r = SimulateClosedLoop({4, 4, 100, 2, 100, 64, 0}, t);
  EXPECT_NEAR(r.mean_ttft_s, (1.4 + 5.1 + 7.4 + 9.3) / 4, 1e-12);
  EXPECT_NEAR(r.makespan_s, 9.8, 1e-12);
}

TEST(SimulateClosedLoop, RequestsBeyondTheKvCacheWait) {
  // Two clients, 10-token prompts, 5 output tokens, 1 s per pass. A cache
  // of 15 tokens holds one request: B waits for A (5 s), prefills in pass
  // 5 (TTFT 6 s) and finishes at 10 s. With room for both they share
  // every pass and finish at 5 s.
  const PassTimes t = Times(0, 1.0, 1.0, 0);
  const ClosedLoopResult tight =
      SimulateClosedLoop({2, 2, 10, 5, 100, 64, 15}, t);
  EXPECT_DOUBLE_EQ(tight.mean_ttft_s, (1.0 + 6.0) / 2);
  EXPECT_DOUBLE_EQ(tight.mean_tpot_s, 1.0);
  EXPECT_DOUBLE_EQ(tight.makespan_s, 10.0);
  const ClosedLoopResult roomy =
      SimulateClosedLoop({2, 2, 10, 5, 100, 64, 0}, t);
  EXPECT_DOUBLE_EQ(roomy.mean_ttft_s, 1.0);
  EXPECT_DOUBLE_EQ(roomy.makespan_s, 5.0);
  // The warm-up request (A, sent first) is left out of the means.
  const ClosedLoopResult measured =
      SimulateClosedLoop({2, 2, 10, 5, 100, 64, 15, 1}, t);
  EXPECT_DOUBLE_EQ(measured.mean_ttft_s, 6.0);
  EXPECT_DOUBLE_EQ(measured.makespan_s, 10.0);
  // max_running bounds the batch the same way.
  EXPECT_DOUBLE_EQ(SimulateClosedLoop({2, 2, 10, 5, 100, 1, 0}, t).makespan_s,
                   10.0);
}

TEST(SimulateClosedLoop, AFullCacheSendsTheNewestRequestBack) {
  // Two clients, 10-token prompts, 5 output tokens, 1 s a pass; a 24-token
  // cache (kPreemptNewest) admits both prompts (20 tokens):
  //   pass 0: both prompts                -> t 1, first tokens (TTFT 1)
  //   passes 1, 2: both decode, 22 and 24 cached tokens -> t 3
  //   pass 3 would need 26: B (the newest, 3 tokens out) goes back; its
  //     13-token context does not fit beside A's 13, so A decodes alone
  //   passes 3, 4: A's last tokens        -> t 5, A done (TPOT 1)
  //   pass 5: B recomputes 13 tokens, emits its 4th -> t 6
  //   pass 6: B's last token              -> t 7 (TPOT (7 − 1) / 4)
  ClosedLoopBenchmark b{2, 2, 10, 5, 100, 64, 24};
  const ClosedLoopResult r = SimulateClosedLoop(b, Times(0, 1.0, 1.0, 0));
  EXPECT_DOUBLE_EQ(r.mean_ttft_s, 1.0);
  EXPECT_DOUBLE_EQ(r.mean_tpot_s, (1.0 + 1.5) / 2);
  EXPECT_DOUBLE_EQ(r.makespan_s, 7.0);
  EXPECT_EQ(r.preemptions, 1);
  EXPECT_EQ(r.passes, 7);
  // Reserving each request's whole 15 tokens (TensorRT-LLM) admits B only
  // after A: B prefills in pass 5 (TTFT 6) and finishes at 10.
  b.kv_policy = KvAdmission::kReserveWholeRequest;
  const ClosedLoopResult reserved =
      SimulateClosedLoop(b, Times(0, 1.0, 1.0, 0));
  EXPECT_DOUBLE_EQ(reserved.mean_ttft_s, (1.0 + 6.0) / 2);
  EXPECT_DOUBLE_EQ(reserved.mean_tpot_s, 1.0);
  EXPECT_DOUBLE_EQ(reserved.makespan_s, 10.0);
  EXPECT_EQ(reserved.preemptions, 0);
}

TEST(SimulateClosedLoop, ANextRequestMissesThePassInFlight) {
  // Two clients, 10-token prompts, 2 output tokens, a 10-token budget, a
  // prefill chunk 1 s, a decode 0.1 s per row; each client's next request
  // reaches the engine after the next pass was scheduled:
  //   pass 0: A's 10 tokens                             -> t 1.0
  //   pass 1: A decodes, B's first 9                    -> t 2.1, A done:
  //           A2 sent, too late for pass 2
  //   pass 2: B's last token                            -> t 3.1
  //   pass 3: B decodes, A2's first 9                   -> t 4.2, B done
  //   pass 4: A2's last token (TTFT 5.2 − 2.1)          -> t 5.2
  //   pass 5: A2 decodes, B2's first 9                  -> t 6.3
  //   pass 6: B2's last token (TTFT 7.3 − 4.2)          -> t 7.3
  //   pass 7: B2 decodes                                -> t 7.4
  ClosedLoopBenchmark b{2, 4, 10, 2, 10, 8, 0};
  b.next_request_misses_a_pass = true;
  const ClosedLoopResult r = SimulateClosedLoop(b, Times(0.1, 0, 1.0, 0));
  EXPECT_NEAR(r.mean_ttft_s, (1.0 + 3.1 + 3.1 + 3.1) / 4, 1e-12);
  EXPECT_NEAR(r.mean_tpot_s, (1.1 + 1.1 + 1.1 + 0.1) / 4, 1e-12);
  EXPECT_NEAR(r.makespan_s, 7.4, 1e-12);
  EXPECT_EQ(r.passes, 8);
  // An idle engine has no pass in flight to miss: one client's next
  // request is prefilled in the very next pass (TTFT 1 s both times).
  ClosedLoopBenchmark one{1, 2, 10, 2, 10, 8, 0};
  one.next_request_misses_a_pass = true;
  const ClosedLoopResult alone = SimulateClosedLoop(one, Times(0.1, 0, 1.0, 0));
  EXPECT_NEAR(alone.mean_ttft_s, 1.0, 1e-12);
  EXPECT_NEAR(alone.makespan_s, 2.2, 1e-12);
}

TEST(SimulateClosedLoop, LaterRequestsFollowTheirClientsCompletions) {
  // One client, three requests back to back: each request waits for the
  // previous one's last token, then prefills alone.
  const ClosedLoopResult r =
      SimulateClosedLoop({1, 3, 10, 4, 100, 8, 0}, Times(0, 1.0, 2.0, 0));
  EXPECT_DOUBLE_EQ(r.mean_ttft_s, 2.0);
  EXPECT_DOUBLE_EQ(r.mean_tpot_s, 1.0);
  EXPECT_DOUBLE_EQ(r.makespan_s, 3 * (2.0 + 3 * 1.0));
  EXPECT_DOUBLE_EQ(r.output_tokens_per_s, 12 / 15.0);
}

TEST(SimulateClosedLoop, RequestsOfTheirOwnLengths) {
  // Two requests sent at once with outputs of 2 and 4 tokens; a decode
  // pass costs 1 s per row, a pass without decodes 1 s.
  //   pass 0: both prompts         -> t 1, both first tokens
  //   pass 1: both decode (2 s)    -> t 3, A done
  //   passes 2-3: B alone (1 s)    -> t 5, B done
  ClosedLoopBenchmark b = OpenLoop(2, 0.0, 1, 1, 100);
  b.output_lengths = {2, 4};
  const ClosedLoopResult r = SimulateClosedLoop(b, Times(1.0, 0, 0, 1.0));
  EXPECT_DOUBLE_EQ(r.mean_ttft_s, 1.0);
  // TPOT per request, (3 − 1)/1 and (5 − 1)/3; ITL pools the 4 gaps.
  EXPECT_DOUBLE_EQ(r.mean_tpot_s, (2.0 + 4.0 / 3) / 2);
  EXPECT_DOUBLE_EQ(r.mean_itl_s, (2.0 + 4.0) / 4);
  EXPECT_DOUBLE_EQ(r.makespan_s, 5.0);
  EXPECT_DOUBLE_EQ(r.output_tokens_per_s, 6 / 5.0);
  EXPECT_DOUBLE_EQ(r.requests_per_s, 2 / 5.0);
}

TEST(SimulateClosedLoop, ReservationsAddUpEachRequestsOwnLength) {
  // One-token prompts with outputs of 8 and 2 tokens in a 10-token cache:
  // TensorRT-LLM's reservation of A's 9 tokens leaves no room for B's 3,
  // so B starts when A is done (t 8): its prompt at t 9, done at 10.
  ClosedLoopBenchmark b = OpenLoop(2, 0.0, 1, 1, 100);
  b.output_lengths = {8, 2};
  b.kv_tokens = 10;
  b.kv_policy = KvAdmission::kReserveWholeRequest;
  const ClosedLoopResult r = SimulateClosedLoop(b, Times(1.0, 0, 0, 1.0));
  EXPECT_DOUBLE_EQ(r.mean_ttft_s, (1.0 + 9.0) / 2);
  EXPECT_DOUBLE_EQ(r.makespan_s, 10.0);
  EXPECT_DOUBLE_EQ(r.output_tokens_per_s, 10 / 10.0);
  // A cache for both (9 + 3 tokens) runs them side by side: B is done at
  // t 3 (pass 1 of two rows), A at 3 + 6.
  b.kv_tokens = 12;
  const ClosedLoopResult both = SimulateClosedLoop(b, Times(1.0, 0, 0, 1.0));
  EXPECT_DOUBLE_EQ(both.mean_ttft_s, 1.0);
  EXPECT_DOUBLE_EQ(both.makespan_s, 9.0);
}

TEST(ExponentialLengths, DeterministicQuantilesOfTheMean) {
  // Quantiles −ln(1 − frac(i·(√2 − 1))) of 0.534800, 1.762747 and
  // 0.277917, scaled by 300 / 2.575464 to average 100.
  EXPECT_EQ(ExponentialLengths(100, 3, 0), (std::vector<int64_t>{62, 205, 32}));
  // The other stream (√3 − 1) is another sequence.
  EXPECT_NE(ExponentialLengths(100, 3, 1), ExponentialLengths(100, 3, 0));
  // 500 of them average the mean, spread as an exponential does (standard
  // deviation = mean) and reach several times it; none is below 1 token.
  const std::vector<int64_t> v = ExponentialLengths(214, 500, 0);
  double sum = 0, sum_sq = 0;
  int64_t longest = 0, shortest = 1 << 30;
  for (int64_t n : v) {
    sum += static_cast<double>(n);
    sum_sq += static_cast<double>(n) * static_cast<double>(n);
    longest = std::max(longest, n);
    shortest = std::min(shortest, n);
  }
  const double mean = sum / 500;
  EXPECT_NEAR(mean, 214, 1.0);
  EXPECT_NEAR(std::sqrt(sum_sq / 500 - mean * mean), 214, 214 * 0.1);
  EXPECT_GT(longest, 4 * 214);
  EXPECT_GE(shortest, 1);
  EXPECT_TRUE(ExponentialLengths(214, 0, 0).empty());
}

TEST(SimulateClosedLoop, SpeculativeDecodesEmitTheirAcceptedTokens) {
  // One request of 7 tokens whose decode passes emit 2.5 tokens each on
  // average: its 6 tokens after the first take ceil(6 / 2.5) = 3 passes.
  //   pass 0: overhead 0.25 + prefill 0.5 -> first token at 0.75
  //   passes 1-3: a decode each, 1 s    -> done at 3.75
  ClosedLoopBenchmark b{1, 1, 10, 7, 100, 8, 0};
  b.decode_progress = 2.5;
  const ClosedLoopResult r = SimulateClosedLoop(b, Times(0, 1.0, 0.5, 0.25));
  EXPECT_DOUBLE_EQ(r.mean_ttft_s, 0.75);
  EXPECT_DOUBLE_EQ(r.mean_tpot_s, 0.5);  // 3 s over 6 tokens
  EXPECT_DOUBLE_EQ(r.makespan_s, 3.75);
  EXPECT_DOUBLE_EQ(r.output_tokens_per_s, 7 / 3.75);
  EXPECT_EQ(r.passes, 4);
}

TEST(SimulateClosedLoop, SpeculativeDecodesTakeTheirDraftsOfTheBudget) {
  // Two 9-token prompts at t = 0, a 10-token budget, 3 output tokens; a
  // prefill chunk costs 1 s, a decode 0.1 s per row. Each decode verifies
  // its token and 2 drafts (decode_width 3), so beside A's decode only 7
  // of B's 8 remaining tokens fit:
  //   pass 0: A's 9 tokens, B's first 1    -> t 1.0, A's first token
  //   pass 1: A decodes, B's next 7        -> t 2.1
  //   pass 2: A decodes, B's last 1        -> t 3.2, A done, B's first
  //   passes 3-4: B decodes                -> t 3.4, B done
  // With one token a decode (width 1) B's 8 fit pass 1: B's first token at
  // 2.1, A and B done at 2.3 and 2.4.
  ClosedLoopBenchmark b{2, 2, 9, 3, 10, 8, 0};
  const PassTimes t = Times(0.1, 0, 1.0, 0);
  const ClosedLoopResult plain = SimulateClosedLoop(b, t);
  EXPECT_NEAR(plain.mean_ttft_s, (1.0 + 2.1) / 2, 1e-12);
  EXPECT_NEAR(plain.makespan_s, 2.4, 1e-12);
  b.decode_width = 3;
  const ClosedLoopResult wide = SimulateClosedLoop(b, t);
  EXPECT_NEAR(wide.mean_ttft_s, (1.0 + 3.2) / 2, 1e-12);
  EXPECT_NEAR(wide.makespan_s, 3.4, 1e-12);
  EXPECT_EQ(wide.passes, 5);
}

TEST(SimulateClosedLoop, ASharedPrefixIsHeldOnce) {
  // Two 10-token prompts whose first 8 tokens are a cached prefix, 2
  // output tokens, a cache of 6 tokens beside the prefix. Shared, each
  // request holds its 2 other tokens (and its first output), so both run:
  //   pass 0: both prompts' 2 new tokens  -> t 1.0, both first tokens
  //   pass 1: both decode (6 tokens held) -> t 1.2, both done
  // Held by each request, the second waits for the first:
  //   pass 0: A's 2 new tokens -> t 1.0;  pass 1: A decodes -> t 1.1
  //   pass 2: B's 2 new tokens -> t 2.1;  pass 3: B decodes -> t 2.2
  ClosedLoopBenchmark b{2, 2, 10, 2, 100, 8, 6};
  b.prefix = 8;
  const PassTimes t = Times(0.1, 0, 1.0, 0);
  const ClosedLoopResult own = SimulateClosedLoop(b, t);
  EXPECT_NEAR(own.mean_ttft_s, (1.0 + 2.1) / 2, 1e-12);
  EXPECT_NEAR(own.makespan_s, 2.2, 1e-12);
  b.shared_prefix = 8;
  const ClosedLoopResult shared = SimulateClosedLoop(b, t);
  EXPECT_NEAR(shared.mean_ttft_s, 1.0, 1e-12);
  EXPECT_NEAR(shared.makespan_s, 1.2, 1e-12);
  EXPECT_EQ(shared.preemptions, 0);
}

}  // namespace
}  // namespace meshtune::costmodel
