#include "costmodel/closed_loop.h"

#include <algorithm>
#include <deque>

namespace meshtune::costmodel {

namespace {

struct Waiting {
  double arrival_s = 0;
  int64_t index = 0;  // in the order the clients sent them
};

struct Prefilling {
  double arrival_s = 0;
  int64_t index = 0;
  int64_t left = 0;  // prompt tokens still to prefill
};

struct Decoding {
  double first_token_s = 0;
  int64_t index = 0;
  int64_t last_pass = 0;  // the pass that emits its last token
};

// The benchmark's state between passes.
class Loop {
 public:
  Loop(const ClosedLoopBenchmark& b, const PassTimes& times)
      : b_(b), times_(times) {
    for (int64_t i = 0; i < b_.clients; ++i) waiting_.push_back({0.0, i});
    issued_ = b_.clients;
  }

  ClosedLoopResult Run() {
    while (completed_ < b_.requests) {
      Admit();
      if (prefilling_.empty()) {
        DecodeUntilNextCompletion();
      } else {
        MixedPass();
      }
    }
    ClosedLoopResult r;
    const double n = static_cast<double>(b_.requests);
    const double measured = static_cast<double>(b_.requests - b_.warmup);
    r.mean_ttft_s = ttft_sum_s_ / measured;
    r.mean_tpot_s = b_.osl > 1 ? tpot_sum_s_ / measured : 0.0;
    r.makespan_s = now_s_;
    r.requests_per_s = now_s_ > 0 ? n / now_s_ : 0.0;
    r.output_tokens_per_s = r.requests_per_s * static_cast<double>(b_.osl);
    r.passes = passes_;
    return r;
  }

 private:
  int64_t Running() const {
    return static_cast<int64_t>(prefilling_.size() + decoding_.size());
  }

  // Tokens in the KV cache at the next pass: every admitted prompt, and
  // each decode's tokens so far (its first one included).
  int64_t CachedTokens() const {
    const int64_t decodes = static_cast<int64_t>(decoding_.size());
    return static_cast<int64_t>(prefilling_.size()) * b_.isl +
           decodes * (b_.isl + 1 + pass_) - decode_start_sum_;
  }

  void Admit() {
    while (!waiting_.empty() && Running() < b_.max_running) {
      // An empty cache always takes one request (the caller checked that
      // one sequence fits).
      if (b_.kv_tokens > 0 && Running() > 0 &&
          CachedTokens() + b_.isl > b_.kv_tokens) {
        break;
      }
      prefilling_.push_back(
          {waiting_.front().arrival_s, waiting_.front().index, b_.isl});
      waiting_.pop_front();
    }
  }

  // A request's last token arrived now: its client sends the next one.
  void Complete(double first_token_s, int64_t index) {
    ++completed_;
    if (b_.osl > 1 && index >= b_.warmup) {
      tpot_sum_s_ += (now_s_ - first_token_s) / static_cast<double>(b_.osl - 1);
    }
    if (issued_ < b_.requests) {
      waiting_.push_back({now_s_, issued_});
      ++issued_;
    }
  }

  // Decodes whose last token the pass just run (index pass_ − 1) emitted.
  void RetireDecodes() {
    while (!decoding_.empty() && decoding_.front().last_pass < pass_) {
      const Decoding d = decoding_.front();
      decode_start_sum_ -= d.last_pass - (b_.osl - 2);
      decoding_.pop_front();
      Complete(d.first_token_s, d.index);
    }
  }

  // No prompt to prefill: the same decode pass repeats until the oldest
  // decode's last token, so the stretch is priced at once.
  void DecodeUntilNextCompletion() {
    const int64_t batch = static_cast<int64_t>(decoding_.size());
    const int64_t repeats = decoding_.front().last_pass - pass_ + 1;
    now_s_ += static_cast<double>(repeats) * times_.decode_s(batch);
    pass_ += repeats;
    passes_ += repeats;
    RetireDecodes();
  }

  // One pass: every decode, then prompt chunks in arrival order.
  void MixedPass() {
    const int64_t decodes = static_cast<int64_t>(decoding_.size());
    int64_t budget = std::max<int64_t>(0, b_.step_tokens - decodes);
    int64_t tokens = 0, chunks = 0, finished = 0;
    for (Prefilling& p : prefilling_) {
      if (budget == 0) break;
      const int64_t chunk = std::min(p.left, budget);
      p.left -= chunk;
      budget -= chunk;
      tokens += chunk;
      ++chunks;
      if (p.left == 0) ++finished;
    }
    double pass_s =
        decodes > 0 ? times_.decode_s(decodes) : times_.empty_pass_s;
    if (tokens > 0) pass_s += times_.prefill_s(tokens, chunks);
    now_s_ += pass_s;
    const int64_t this_pass = pass_;
    ++pass_;
    ++passes_;
    RetireDecodes();
    // Finished prompts are at the front (chunks are taken in order).
    for (int64_t i = 0; i < finished; ++i) {
      const Prefilling p = prefilling_.front();
      prefilling_.pop_front();
      if (p.index >= b_.warmup) ttft_sum_s_ += now_s_ - p.arrival_s;
      if (b_.osl <= 1) {
        Complete(now_s_, p.index);
      } else {
        // Decodes from the next pass on: osl − 1 passes.
        decoding_.push_back({now_s_, p.index, this_pass + b_.osl - 1});
        decode_start_sum_ += this_pass + 1;
      }
    }
  }

  const ClosedLoopBenchmark b_;
  const PassTimes& times_;
  std::deque<Waiting> waiting_;
  std::deque<Prefilling> prefilling_;
  std::deque<Decoding> decoding_;  // in order of last_pass
  int64_t issued_ = 0;
  int64_t completed_ = 0;
  int64_t pass_ = 0;  // index of the next pass
  int64_t passes_ = 0;
  int64_t decode_start_sum_ = 0;  // Σ first decode pass over decoding_
  double now_s_ = 0;
  double ttft_sum_s_ = 0;
  double tpot_sum_s_ = 0;
};

}  // namespace

ClosedLoopResult SimulateClosedLoop(const ClosedLoopBenchmark& bench,
                                    const PassTimes& times) {
  ClosedLoopBenchmark b = bench;
  b.clients = std::max<int64_t>(1, b.clients);
  b.requests = std::max(b.clients, b.requests);
  b.warmup = std::clamp<int64_t>(b.warmup, 0, b.requests - 1);
  b.isl = std::max<int64_t>(1, b.isl);
  b.osl = std::max<int64_t>(1, b.osl);
  b.step_tokens = std::max<int64_t>(1, b.step_tokens);
  b.max_running = std::max<int64_t>(1, b.max_running);
  b.kv_tokens = std::max<int64_t>(0, b.kv_tokens);
  return Loop(b, times).Run();
}

}  // namespace meshtune::costmodel
