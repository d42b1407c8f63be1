#include "costmodel/closed_loop.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <deque>
#include <vector>

namespace meshtune::costmodel {

namespace {

// A request between passes. `generated` tokens were emitted before it was
// preempted (0 for a new request): its prompt to (re)compute is then
// isl + generated tokens, and its first token came at `first_token_s`.
struct Request {
  double arrival_s = 0;
  int64_t index = 0;  // in the order the clients sent them
  int64_t isl = 1;
  int64_t osl = 1;
  int64_t generated = 0;
  double first_token_s = 0;
  int64_t ready_pass = 0;  // the first pass that may schedule it
};

struct Prefilling {
  Request request;
  int64_t left = 0;      // prompt tokens still to prefill
  int64_t admitted = 0;  // admission order (the newest is preempted)
};

struct Decoding {
  Request request;
  int64_t last_pass = 0;  // the pass that emits its last token
  // Its cached tokens before pass p are offset + progress · p (Cached).
  double offset = 0;
  int64_t admitted = 0;
  int64_t first_pass = 0;  // the pass that emitted its first token now
};

// The benchmark's state between passes.
class Loop {
 public:
  Loop(const ClosedLoopBenchmark& b, const PassTimes& times)
      : b_(b), times_(times) {
    if (b_.open_loop) {  // Arrive() issues them
      arrivals_ = ArrivalTimes(b_.arrivals, b_.arrival_interval_s, b_.requests);
      return;
    }
    for (int64_t i = 0; i < b_.clients; ++i) waiting_.push_back(New(0.0, i));
    issued_ = b_.clients;
  }

  ClosedLoopResult Run() {
    while (completed_ < b_.requests) {
      if (b_.open_loop) Arrive();
      if (b_.kv_policy == KvAdmission::kPreemptNewest) PreemptToFit();
      Admit();
      if (prefilling_.empty()) {
        DecodeStretch();
      } else {
        MixedPass();
      }
    }
    ClosedLoopResult r;
    const double n = static_cast<double>(b_.requests);
    const double measured = static_cast<double>(b_.requests - b_.warmup);
    r.mean_ttft_s = ttft_sum_s_ / measured;
    r.mean_tpot_s = tpot_requests_ > 0
                        ? tpot_sum_s_ / static_cast<double>(tpot_requests_)
                        : 0.0;
    r.mean_itl_s =
        itl_gaps_ > 0 ? itl_sum_s_ / static_cast<double>(itl_gaps_) : 0.0;
    r.makespan_s = now_s_;
    r.requests_per_s = now_s_ > 0 ? n / now_s_ : 0.0;
    r.output_tokens_per_s =
        now_s_ > 0 ? static_cast<double>(output_tokens_) / now_s_ : 0.0;
    r.passes = passes_;
    r.preemptions = preemptions_;
    return r;
  }

 private:
  // Request `index`, sent at `arrival_s`, with its lengths.
  Request New(double arrival_s, int64_t index) const {
    Request r{arrival_s, index, b_.isl, b_.osl};
    const auto at = [index](const std::vector<int64_t>& v) {
      return v[static_cast<size_t>(index) % v.size()];
    };
    if (!b_.input_lengths.empty()) r.isl = at(b_.input_lengths);
    if (!b_.output_lengths.empty()) r.osl = at(b_.output_lengths);
    return r;
  }

  double ArrivalOf(int64_t index) const {
    return arrivals_[static_cast<size_t>(index)];
  }

  // Open loop: queues the requests that arrived by now; an idle engine
  // waits for the next one.
  void Arrive() {
    if (Running() == 0 && waiting_.empty() && issued_ < b_.requests) {
      now_s_ = std::max(now_s_, ArrivalOf(issued_));
    }
    while (issued_ < b_.requests && ArrivalOf(issued_) <= now_s_) {
      waiting_.push_back(New(ArrivalOf(issued_), issued_));
      ++issued_;
    }
  }

  double Host_s(int64_t requests) const {
    return times_.host_s ? times_.host_s(requests) : 0.0;
  }

  // A pass of `gpu_s` on the GPU for `requests` requests, with the host's
  // work beside it or after it.
  double Pass_s(double gpu_s, int64_t requests) const {
    return PassWithHost_s(gpu_s, Host_s(requests), times_.host_after_gpu);
  }

  int64_t Running() const {
    return static_cast<int64_t>(prefilling_.size() + decoding_.size());
  }

  int64_t Context(const Request& r) const { return r.isl + r.generated; }

  // The tokens of `r`'s context in its own KV pages: all but the shared
  // prefix's (ClosedLoopBenchmark::shared_prefix).
  int64_t Kv(const Request& r) const {
    return Context(r) - std::min(b_.shared_prefix, r.isl);
  }

  // What kReserveWholeRequest reserves for `r`: its own pages of isl + osl.
  int64_t Reserved(const Request& r) const {
    return r.isl + r.osl - std::min(b_.shared_prefix, r.isl);
  }

  // The tokens of `r`'s context its prefill computes: all but the cached
  // prefix (at most isl − 1 of them), which a cold prefix's first
  // admission computes too (ClosedLoopBenchmark::cold_prefix_requests).
  int64_t ToPrefill(const Request& r) const {
    const bool cold =
        r.generated == 0 && r.index >= 1 && r.index <= b_.cold_prefix_requests;
    return Context(r) - (cold ? 0 : std::min(b_.prefix, r.isl - 1));
  }

  // Tokens in the KV cache at the next pass: every admitted prompt, and
  // each decode's tokens so far with the one this pass feeds.
  int64_t CachedTokens() const {
    return prefill_context_sum_ +
           static_cast<int64_t>(std::llround(
               decode_offset_sum_ + b_.decode_progress *
                                        static_cast<double>(decoding_.size()) *
                                        static_cast<double>(pass_)));
  }

  // A decode whose context was `context` when pass `first` emitted a token
  // holds context + 1 + progress · (p − first − 1) tokens before pass p >
  // first: the token the next pass feeds, and `progress` more a pass.
  double Offset(int64_t context, int64_t first) const {
    return static_cast<double>(context) + 1.0 -
           b_.decode_progress * static_cast<double>(first + 1);
  }

  // Tokens `d` emitted before pass pass_, the first of this admission
  // included, at most its osl − 1.
  int64_t Generated(const Decoding& d) const {
    const double since =
        b_.decode_progress * static_cast<double>(pass_ - d.first_pass - 1);
    return std::min(
        d.request.osl - 1,
        d.request.generated + 1 + static_cast<int64_t>(std::llround(since)));
  }

  // Whether `r` may start now. An empty engine always takes one request
  // (the caller checked that one sequence fits).
  bool Fits(const Request& r) const {
    if (b_.kv_tokens == 0 || Running() == 0) return true;
    if (b_.kv_policy == KvAdmission::kReserveWholeRequest) {
      // Every running request holds its whole isl + osl.
      return reserved_tokens_ + Reserved(r) <= b_.kv_tokens;
    }
    return CachedTokens() + Kv(r) <= b_.kv_tokens;
  }

  // An idle engine takes every waiting request at once, ready or not: no
  // pass is in flight for them to miss.
  void Admit() {
    const bool idle = Running() == 0;
    while (!waiting_.empty() && Running() < b_.max_running &&
           (idle || waiting_.front().ready_pass <= pass_) &&
           Fits(waiting_.front())) {
      const Request r = waiting_.front();
      waiting_.pop_front();
      prefilling_.push_back({r, ToPrefill(r), next_admission_++});
      prefill_context_sum_ += Kv(r);
      reserved_tokens_ += Reserved(r);
    }
  }

  // The pass about to run must fit the cache: the newest running request
  // goes back to the queue's front, its cache freed (vLLM's and SGLang's
  // recompute preemption), until it does or one request is left.
  void PreemptToFit() {
    while (b_.kv_tokens > 0 && Running() > 1 && CachedTokens() > b_.kv_tokens) {
      auto newest_decode = decoding_.end();
      for (auto it = decoding_.begin(); it != decoding_.end(); ++it) {
        if (newest_decode == decoding_.end() ||
            it->admitted > newest_decode->admitted) {
          newest_decode = it;
        }
      }
      const bool take_prefill =
          !prefilling_.empty() &&
          (newest_decode == decoding_.end() ||
           prefilling_.back().admitted > newest_decode->admitted);
      if (take_prefill) {
        const Request& r = prefilling_.back().request;
        prefill_context_sum_ -= Kv(r);
        reserved_tokens_ -= Reserved(r);
        waiting_.push_front(r);
        prefilling_.pop_back();
      } else {
        Request r = newest_decode->request;
        r.generated = Generated(*newest_decode);
        decode_offset_sum_ -= newest_decode->offset;
        reserved_tokens_ -= Reserved(r);
        decoding_.erase(newest_decode);
        waiting_.push_front(r);
      }
      ++preemptions_;
    }
  }

  // A request's last token arrived now: its client sends the next one.
  void Complete(const Request& r) {
    ++completed_;
    output_tokens_ += r.osl;
    reserved_tokens_ -= Reserved(r);
    if (r.osl > 1 && r.index >= b_.warmup) {
      const double decode_s = now_s_ - r.first_token_s;
      tpot_sum_s_ += decode_s / static_cast<double>(r.osl - 1);
      ++tpot_requests_;
      itl_sum_s_ += decode_s;
      itl_gaps_ += r.osl - 1;
    }
    if (!b_.open_loop && issued_ < b_.requests) {
      waiting_.push_back(New(now_s_, issued_));
      // pass_ is the pass about to be scheduled without it.
      if (b_.next_request_misses_a_pass) {
        waiting_.back().ready_pass = pass_ + 1;
      }
      ++issued_;
    }
  }

  // Decodes whose last token the pass just run (index pass_ − 1) emitted.
  void RetireDecodes() {
    while (!decoding_.empty() && decoding_.front().last_pass < pass_) {
      const Decoding d = decoding_.front();
      decode_offset_sum_ -= d.offset;
      decoding_.pop_front();
      Complete(d.request);
    }
  }

  // No prompt to prefill: the same decode pass repeats until the oldest
  // decode's last token, or until the growing contexts fill the cache
  // (each pass adds a token per decode), so the stretch is priced at once.
  void DecodeStretch() {
    const int64_t batch = static_cast<int64_t>(decoding_.size());
    int64_t repeats = decoding_.front().last_pass - pass_ + 1;
    if (b_.kv_policy == KvAdmission::kPreemptNewest && b_.kv_tokens > 0 &&
        batch > 1) {
      repeats = std::min<int64_t>(
          repeats, static_cast<int64_t>(std::floor(
                       static_cast<double>(b_.kv_tokens - CachedTokens()) /
                       (static_cast<double>(batch) * b_.decode_progress))) +
                       1);
    }
    if (!waiting_.empty() && waiting_.front().ready_pass > pass_) {
      repeats = std::min(repeats, waiting_.front().ready_pass - pass_);
    }
    const double pass_s = Pass_s(times_.decode_s(batch), batch);
    if (b_.open_loop && issued_ < b_.requests && pass_s > 0) {
      // Up to the pass in which the next request arrives.
      const double until = ArrivalOf(issued_) - now_s_;
      const int64_t to_arrival =
          std::max<int64_t>(1, static_cast<int64_t>(std::ceil(until / pass_s)));
      repeats = std::min(repeats, to_arrival);
    }
    now_s_ += static_cast<double>(repeats) * pass_s;
    pass_ += repeats;
    passes_ += repeats;
    RetireDecodes();
  }

  // One pass: every decode, then prompt chunks in arrival order, one chunk
  // per prompt, filling the micro-batches one after the other, each to its
  // share of the budget beside its share of the decodes. The pass pays the
  // slowest micro-batch's prompts (closed_loop.h).
  void MixedPass() {
    const int64_t decodes = static_cast<int64_t>(decoding_.size());
    const int64_t micro = b_.micro_batches;
    const int64_t micro_tokens = std::max<int64_t>(1, b_.step_tokens / micro);
    double prefill_s = 0;  // the slowest micro-batch's prompts
    int64_t chunks = 0;
    size_t next = 0;  // prompts before it got their chunk this pass
    for (int64_t j = 0; j < micro && next < prefilling_.size(); ++j) {
      const int64_t own_decodes = decodes / micro + (j < decodes % micro);
      int64_t budget =
          std::max<int64_t>(0, micro_tokens - own_decodes * b_.decode_width);
      int64_t tokens = 0, own_chunks = 0;
      double context_s = 0;  // chunks attending to their prompts' earlier ones
      for (; budget > 0 && next < prefilling_.size(); ++next) {
        Prefilling& p = prefilling_[next];
        const int64_t chunk = std::min(p.left, budget);
        const int64_t prior = Context(p.request) - p.left;
        if (prior > 0 && times_.chunk_context_s) {
          context_s += times_.chunk_context_s(chunk, prior);
        }
        p.left -= chunk;
        budget -= chunk;
        tokens += chunk;
        ++own_chunks;
      }
      if (tokens > 0) {
        prefill_s = std::max(prefill_s,
                             times_.prefill_s(tokens, own_chunks) + context_s);
      }
      chunks += own_chunks;
    }
    double pass_s =
        decodes > 0 ? times_.decode_s(decodes) : times_.empty_pass_s;
    pass_s = Pass_s(pass_s + prefill_s, decodes + chunks);
    now_s_ += pass_s;
    const int64_t this_pass = pass_;
    ++pass_;
    ++passes_;
    RetireDecodes();
    // The prompts that got a chunk lead the queue; those left unfinished
    // (the last of a micro-batch) stay at its front, in order, and each
    // finished one emits its next token: a new request its first.
    finished_.clear();
    unfinished_.clear();
    for (size_t i = 0; i < next; ++i) {
      (prefilling_[i].left == 0 ? finished_ : unfinished_)
          .push_back(prefilling_[i]);
    }
    prefilling_.erase(prefilling_.begin(),
                      prefilling_.begin() + static_cast<std::ptrdiff_t>(next));
    prefilling_.insert(prefilling_.begin(), unfinished_.begin(),
                       unfinished_.end());
    for (const Prefilling& p : finished_) {
      prefill_context_sum_ -= Kv(p.request);
      Request r = p.request;
      if (r.generated == 0) {
        r.first_token_s = now_s_;
        if (r.index >= b_.warmup) ttft_sum_s_ += now_s_ - r.arrival_s;
      }
      const int64_t left = r.osl - r.generated - 1;  // tokens after this
      if (left <= 0) {
        Complete(r);
        continue;
      }
      // The decode passes those take, `progress` tokens each.
      const int64_t passes = std::max<int64_t>(
          1, static_cast<int64_t>(std::ceil(
                 static_cast<double>(left) / b_.decode_progress - 1e-9)));
      Decoding d{r, this_pass + passes, Offset(Kv(r), this_pass), p.admitted,
                 this_pass};
      decode_offset_sum_ += d.offset;
      // A resumed request may finish before those decoding longer.
      auto at = std::upper_bound(
          decoding_.begin(), decoding_.end(), d.last_pass,
          [](int64_t pass, const Decoding& x) { return pass < x.last_pass; });
      decoding_.insert(at, d);
    }
  }

  const ClosedLoopBenchmark b_;
  const PassTimes& times_;
  std::vector<double> arrivals_;  // open loop: each request's, seconds
  std::deque<Request> waiting_;
  std::deque<Prefilling> prefilling_;
  std::deque<Decoding> decoding_;  // in order of last_pass
  // MixedPass's prompts that got a chunk, finished or not (kept to reuse
  // their storage pass after pass).
  std::vector<Prefilling> finished_;
  std::vector<Prefilling> unfinished_;
  int64_t issued_ = 0;
  int64_t completed_ = 0;
  int64_t pass_ = 0;  // index of the next pass
  int64_t passes_ = 0;
  int64_t preemptions_ = 0;
  int64_t next_admission_ = 0;
  int64_t prefill_context_sum_ = 0;  // Σ Kv over prefilling_
  double decode_offset_sum_ = 0;     // Σ offset over decoding_
  int64_t reserved_tokens_ = 0;      // Σ Reserved over running requests
  int64_t output_tokens_ = 0;        // of the completed requests
  double now_s_ = 0;
  double ttft_sum_s_ = 0;
  double tpot_sum_s_ = 0;
  int64_t tpot_requests_ = 0;  // measured requests with osl > 1
  double itl_sum_s_ = 0;
  int64_t itl_gaps_ = 0;  // their token gaps
};

}  // namespace

std::vector<double> ArrivalTimes(Arrivals arrivals, double interval_s,
                                 int64_t requests) {
  std::vector<double> t(static_cast<size_t>(std::max<int64_t>(0, requests)));
  if (arrivals == Arrivals::kEven) {
    for (size_t i = 0; i < t.size(); ++i) {
      t[i] = static_cast<double>(i) * interval_s;
    }
    return t;
  }
  const double phi = (std::sqrt(5.0) - 1.0) / 2.0;
  for (size_t i = 1; i < t.size(); ++i) {
    const double u = std::fmod(static_cast<double>(i) * phi, 1.0);
    t[i] = t[i - 1] - std::log1p(-u) * interval_s;
  }
  return t;
}

std::vector<int64_t> ExponentialLengths(int64_t mean, int64_t count,
                                        int stream) {
  const double alpha = stream == 0 ? std::sqrt(2.0) - 1 : std::sqrt(3.0) - 1;
  const size_t n = static_cast<size_t>(std::max<int64_t>(0, count));
  std::vector<double> quantiles(n);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const double u = std::fmod(static_cast<double>(i + 1) * alpha, 1.0);
    quantiles[i] = -std::log1p(-u);
    sum += quantiles[i];
  }
  // Scaled so the lengths average `mean` (before rounding): a sample's
  // quantiles average slightly under 1.
  const double scale =
      sum > 0 ? static_cast<double>(mean) * static_cast<double>(n) / sum : 0.0;
  std::vector<int64_t> lengths(n);
  for (size_t i = 0; i < n; ++i) {
    lengths[i] = std::max<int64_t>(1, std::llround(quantiles[i] * scale));
  }
  return lengths;
}

ClosedLoopResult SimulateClosedLoop(const ClosedLoopBenchmark& bench,
                                    const PassTimes& times) {
  ClosedLoopBenchmark b = bench;
  b.clients = std::max<int64_t>(1, b.clients);
  b.requests = b.open_loop ? std::max<int64_t>(1, b.requests)
                           : std::max(b.clients, b.requests);
  b.arrival_interval_s = std::max(0.0, b.arrival_interval_s);
  b.warmup = std::clamp<int64_t>(b.warmup, 0, b.requests - 1);
  b.isl = std::max<int64_t>(1, b.isl);
  b.osl = std::max<int64_t>(1, b.osl);
  for (int64_t& n : b.input_lengths) n = std::max<int64_t>(1, n);
  for (int64_t& n : b.output_lengths) n = std::max<int64_t>(1, n);
  b.step_tokens = std::max<int64_t>(1, b.step_tokens);
  b.micro_batches = std::clamp<int64_t>(b.micro_batches, 1, b.step_tokens);
  b.max_running = std::max<int64_t>(1, b.max_running);
  b.kv_tokens = std::max<int64_t>(0, b.kv_tokens);
  b.prefix = std::max<int64_t>(0, b.prefix);
  b.shared_prefix = std::clamp<int64_t>(b.shared_prefix, 0, b.prefix);
  b.decode_width = std::max<int64_t>(1, b.decode_width);
  b.decode_progress =
      std::isfinite(b.decode_progress) ? std::max(1.0, b.decode_progress) : 1.0;
  return Loop(b, times).Run();
}

}  // namespace meshtune::costmodel
