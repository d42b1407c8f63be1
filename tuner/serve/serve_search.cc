#include "tuner/serve/serve_search.h"

#include <algorithm>
#include <cmath>

#include "costmodel/serving_loads.h"

namespace meshtune::tuner {

using search_spaces::ServingConfig;

namespace {

std::vector<int64_t> PowersOfTwo(int64_t max) {
  std::vector<int64_t> out;
  for (int64_t v = 1; v <= max; v *= 2) out.push_back(v);
  return out;
}

// The batches a layout is priced at: the concurrency's share, or a sweep.
std::vector<int64_t> Batches(const ServeProblem& p, int64_t replicas,
                             int64_t max_sequences) {
  if (p.workload.concurrency > 0) {
    return {(p.workload.concurrency + replicas - 1) / replicas};
  }
  std::vector<int64_t> out;
  for (int64_t b = 1; b < max_sequences; b *= 2) out.push_back(b);
  out.push_back(max_sequences);
  return out;
}

bool Meets(const ServeProblem& p, const costmodel::ServingEstimate& e) {
  return (p.ttft_target_s <= 0 || e.ttft_s <= p.ttft_target_s) &&
         (p.tpot_target_s <= 0 || e.tpot_s <= p.tpot_target_s);
}

// The first word of an infeasible reason ("out_of_memory: ..." ->
// "out_of_memory"), so that the counts group.
std::string ReasonKey(const std::string& reason) {
  return reason.substr(0, reason.find(':'));
}

// `c` at `clients` clients over its replicas, priced as a closed-loop
// benchmark's steady state on the pass calendar (docs/serving.md §4).
ServePoint OnCalendar(const ServeProblem& p, const costmodel::Calibration& cal,
                      const ServingConfig& c, int64_t clients) {
  search_spaces::ServingWorkload w = p.workload;
  w.concurrency = clients;
  ServePoint point;
  point.config = c;
  point.calendar = true;
  point.estimate = costmodel::EstimateClosedLoopSteadyState(
      p.model, p.cluster, w, c, p.num_gpus, clients, cal);
  point.meets_targets = point.estimate.fits && Meets(p, point.estimate);
  return point;
}

// A layout's candidate for best in a sweep: its largest batch that meets
// the targets on the closed form, point `index` of the result, and the
// most sequences a replica's cache holds.
struct Candidate {
  ServingConfig config;
  int64_t replicas = 1;
  int64_t batch = 1;
  size_t index = 0;
  int64_t max_batch = 1;
};

// The sweep's candidates checked on the pass calendar (serve_search.h).
void CheckOnCalendar(const ServeProblem& p, const costmodel::Calibration& cal,
                     std::vector<Candidate> candidates, ServeResult* r) {
  auto gpu = [&](const Candidate& c) {
    return r->points[c.index].estimate.output_tokens_per_s_per_gpu;
  };
  std::stable_sort(
      candidates.begin(), candidates.end(),
      [&](const Candidate& a, const Candidate& b) { return gpu(a) > gpu(b); });
  double best = 0;  // tokens/s per GPU of the best checked plan
  for (const Candidate& c : candidates) {
    if (gpu(c) < kCalendarCheckShare * best) break;
    auto price = [&](int64_t b) {
      return OnCalendar(p, cal, c.config, b * c.replicas);
    };
    // The largest batch that meets the targets on the calendar, between
    // `lo` (meets them; 0: none known) and `hi` (misses them): below the
    // closed form's when the calendar misses them there; else above it,
    // doubling on the calendar up to what the cache holds until a batch
    // misses them (the closed form's TTFT runs above the calendar's at a
    // few cohorts, so its first missed batch may meet them there).
    ServePoint kept = price(c.batch);
    r->points[c.index] = kept;
    int64_t lo = 0, hi = c.batch;
    if (kept.meets_targets) {
      lo = c.batch;
      hi = 0;
      while (hi == 0 && lo < c.max_batch) {
        const int64_t up = std::min(2 * lo, c.max_batch);
        ServePoint q = price(up);
        if (q.meets_targets) {
          lo = up;
          kept = std::move(q);
        } else {
          hi = up;
        }
      }
    }
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      ServePoint q = price(mid);
      if (q.meets_targets) {
        lo = mid;
        kept = std::move(q);
      } else {
        hi = mid;
      }
    }
    if (lo == 0) continue;  // not even one sequence per replica meets them
    best = std::max(best, kept.estimate.output_tokens_per_s_per_gpu);
    if (lo != c.batch) r->points.push_back(std::move(kept));
  }
}

// Whether point a comes before point b on the front's walk: more
// tokens/s per user, then more tokens/s per GPU, then the lower index (a
// strict order, so a sort and an insertion agree).
bool FrontBefore(const ServeResult& r, size_t a, size_t b) {
  const costmodel::ServingEstimate& x = r.points[a].estimate;
  const costmodel::ServingEstimate& y = r.points[b].estimate;
  if (x.output_tokens_per_s_per_user != y.output_tokens_per_s_per_user) {
    return x.output_tokens_per_s_per_user > y.output_tokens_per_s_per_user;
  }
  if (x.output_tokens_per_s_per_gpu != y.output_tokens_per_s_per_gpu) {
    return x.output_tokens_per_s_per_gpu > y.output_tokens_per_s_per_gpu;
  }
  return a < b;
}

// Every point's index in FrontBefore's order.
std::vector<size_t> FrontOrder(const ServeResult& r) {
  std::vector<size_t> order(r.points.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return FrontBefore(r, a, b); });
  return order;
}

// Marks the front anew from `order` (FrontOrder): a point is on it when it
// has more tokens/s per GPU than every faster-per-user point.
void MarkFrontInOrder(const std::vector<size_t>& order, ServeResult* r) {
  for (ServePoint& q : r->points) q.on_front = false;
  r->front.clear();
  double best_gpu = -1;
  for (size_t i : order) {
    const double gpu = r->points[i].estimate.output_tokens_per_s_per_gpu;
    if (gpu > best_gpu) {
      r->points[i].on_front = true;
      r->front.push_back(i);
      best_gpu = gpu;
    }
  }
}

void MarkFront(ServeResult* r) { MarkFrontInOrder(FrontOrder(*r), r); }

// A sweep's front as the benchmarks would measure it: each aggregated
// point of the front still priced by the closed form is repriced in place
// on the calendar, at its batch · replicas clients, and the front is
// marked again, until every aggregated point on it is a calendar point.
// Repricing moves a point (its TTFT most), so another may join the front;
// each point is repriced once at most, so this ends. A point the calendar
// refuses to simulate (kMaxSimulatedPasses) keeps its closed form.
void PriceFrontOnCalendar(const ServeProblem& p,
                          const costmodel::Calibration& cal, ServeResult* r) {
  std::vector<bool> tried(r->points.size(), false);
  std::vector<bool> moved(r->points.size(), false);
  // The walk's order, kept across rounds: the few repriced points are taken
  // out and put back where they now belong, not the whole sweep re-sorted.
  std::vector<size_t> order = FrontOrder(*r);
  for (;;) {
    std::vector<size_t> repriced;
    for (size_t i : r->front) {
      ServePoint& q = r->points[i];
      if (q.disaggregated || q.calendar || tried[i]) continue;
      tried[i] = true;
      ServePoint c =
          OnCalendar(p, cal, q.config, q.estimate.batch * q.estimate.replicas);
      if (!c.estimate.fits) continue;
      q = std::move(c);
      repriced.push_back(i);
      moved[i] = true;
    }
    if (repriced.empty()) return;
    order.erase(std::remove_if(order.begin(), order.end(),
                               [&](size_t i) { return moved[i]; }),
                order.end());
    for (size_t i : repriced) {
      moved[i] = false;
      order.insert(std::lower_bound(order.begin(), order.end(), i,
                                    [&](size_t a, size_t b) {
                                      return FrontBefore(*r, a, b);
                                    }),
                   i);
    }
    MarkFrontInOrder(order, r);
  }
}

}  // namespace

// 1, 2, 3, 4, 6, 8, 12, 16, ... up to `max`.
std::vector<int64_t> WorkerCounts(int64_t max) {
  std::vector<int64_t> out;
  for (int64_t v = 1; v <= max; v *= 2) {
    out.push_back(v);
    if (3 * v / 2 > v && 3 * v / 2 <= max && v >= 2) out.push_back(3 * v / 2);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The disaggregated points (serve_search.h): `layouts` are the valid
// layouts whose weights fit, with their offline estimates.
void SearchDisaggregated(
    const ServeProblem& p, const costmodel::Calibration& cal,
    const std::vector<std::pair<ServingConfig, costmodel::ServingEstimate>>&
        layouts,
    ServeResult* r) {
  struct Prefill {
    ServingConfig config;
    double prefill_s = 0;
  };
  std::vector<Prefill> prefills;
  for (const auto& [c, e] : layouts) {
    if (c.pp != 1) continue;
    prefills.push_back({c, costmodel::PromptsPrefillTime_s(
                               p.model, p.cluster, c, p.workload.isl,
                               p.workload.prefix, c.attention_dp, cal)});
  }
  for (const auto& [d, top] : layouts) {
    const int64_t gd = d.gpus();
    for (int64_t b : Batches(p, 1, top.batch)) {
      // One decode worker at b sequences: its memory and its step.
      search_spaces::ServingWorkload w = p.workload;
      w.concurrency = b;
      const costmodel::ServingEstimate dec =
          costmodel::EstimateServing(p.model, p.cluster, w, d, gd, cal);
      if (!dec.fits) continue;
      const costmodel::DecodeBreakdown& step = dec.decode;
      const double tpot_s = costmodel::DecodeWorkerTpot_s(p.model, w, d, step);
      for (const Prefill& pf : prefills) {
        // Both sides run the same drafter (the prefill drafts the first
        // decode's tokens; TensorRT-LLM sizes both caches for it).
        if (pf.config.nextn != d.nextn) continue;
        const int64_t gp = pf.config.gpus();
        for (int64_t workers : WorkerCounts(p.num_gpus / gp)) {
          const int64_t left = p.num_gpus - workers * gp;
          if (left < gd || left % gd != 0) continue;
          const int64_t decoders = left / gd;
          int64_t concurrency = b * decoders;
          if (p.workload.concurrency > 0) {
            // A fixed load: this (layout, batch) only where it is the
            // decode workers' share.
            if ((p.workload.concurrency + decoders - 1) / decoders != b) {
              continue;
            }
            concurrency = p.workload.concurrency;
          }
          const double rate = static_cast<double>(workers) *
                              pf.config.attention_dp / pf.prefill_s;
          const costmodel::DisaggregatedLoop loop =
              costmodel::DisaggregatedClosedLoop(pf.prefill_s, rate, tpot_s,
                                                 concurrency, p.workload.osl);
          ServePoint point;
          point.disaggregated = true;
          point.config = d;
          point.prefill = pf.config;
          point.prefill_workers = workers;
          point.estimate = dec;
          point.estimate.replicas = decoders;
          point.estimate.batch = b;
          point.estimate.decode = step;
          point.estimate.step_s = step.total_s();
          point.estimate.prefill_s = pf.prefill_s;
          point.estimate.tpot_s = tpot_s;
          point.estimate.ttft_s = loop.ttft_s;
          point.estimate.output_tokens_per_s =
              loop.requests_per_s * p.workload.osl;
          point.estimate.output_tokens_per_s_per_gpu =
              point.estimate.output_tokens_per_s / p.num_gpus;
          point.estimate.output_tokens_per_s_per_user = 1.0 / tpot_s;
          point.meets_targets = Meets(p, point.estimate);
          r->points.push_back(std::move(point));
        }
      }
    }
  }
}

bool SweepsBatch(const ServeProblem& p) {
  return p.workload.concurrency == 0 && p.request_rate <= 0;
}

namespace {

// The draft lengths every layout is priced at: the problem's nextn, or
// with per-position acceptance rates and no nextn, each length from 0 to
// the rates given (the search picks the draft length too).
std::vector<int64_t> DraftLengths(const ServeProblem& p) {
  if (p.nextn > 0 || p.workload.nextn_accept_rates.empty()) return {p.nextn};
  std::vector<int64_t> lengths;
  for (int64_t n = 0;
       n <= static_cast<int64_t>(p.workload.nextn_accept_rates.size()); ++n) {
    lengths.push_back(n);
  }
  return lengths;
}

// Every layout of the enumeration (serve_search.h) at every draft length.
std::vector<ServingConfig> Layouts(const ServeProblem& p) {
  std::vector<ServingConfig> layouts;
  const int64_t domain = std::max(1, p.cluster.nvlink_domain_gpus);
  const bool moe = p.model.is_moe();
  for (int64_t tp : PowersOfTwo(std::min<int64_t>(domain, p.num_gpus))) {
    for (int64_t pp : PowersOfTwo(std::min<int64_t>(8, p.num_gpus / tp))) {
      const int64_t max_adp = moe ? p.num_gpus / (tp * pp) : 1;
      for (int64_t adp : PowersOfTwo(max_adp)) {
        for (int64_t ep : PowersOfTwo(moe ? tp * adp : 1)) {
          for (int64_t nextn : DraftLengths(p)) {
            ServingConfig c;
            c.tp = tp;
            c.pp = pp;
            c.attention_dp = adp;
            c.ep = ep;
            c.weights = p.weights;
            c.kv_cache = p.kv_cache;
            c.nextn = nextn;
            c.drafter = p.drafter;
            c.draft_head = p.draft_head;
            c.draft_topk = p.draft_topk;
            c.draft_tokens = p.draft_tokens;
            layouts.push_back(c);
          }
        }
      }
    }
  }
  return layouts;
}

}  // namespace

Status ValidateServeProblem(const ServeProblem& p) {
  if (p.num_gpus < 1) {
    return Status::InvalidArgument(
        "--gpus must be at least 1, got " + std::to_string(p.num_gpus),
        "give the number of GPUs to serve on");
  }
  MESHTUNE_RETURN_IF_ERROR(search_spaces::ValidateServingWorkload(p.workload));
  if (!(p.request_rate >= 0) || !std::isfinite(p.request_rate)) {
    return Status::InvalidArgument(
        "--request-rate must be a non-negative number of requests/s",
        "give the arrival rate, e.g. --request-rate 8");
  }
  if (p.request_rate > 0 && p.workload.concurrency > 0) {
    return Status::InvalidArgument(
        "--request-rate and --concurrency cannot be combined",
        "give the load as one or the other");
  }
  if (p.request_rate > 0 && p.disaggregated) {
    return Status::InvalidArgument(
        "--request-rate prices aggregated deployments only",
        "drop --disagg, or give --concurrency");
  }
  if (p.ttft_target_s < 0 || p.tpot_target_s < 0) {
    return Status::InvalidArgument("--ttft-ms and --tpot-ms must be positive",
                                   "leave a target out to have none");
  }
  MESHTUNE_RETURN_IF_ERROR(search_spaces::ValidateSpeculation(
      p.model, p.workload, p.nextn, p.drafter, p.draft_head));
  return search_spaces::ValidateDraftTree(
      p.nextn, p.draft_topk, p.draft_tokens,
      /*searched_lengths=*/p.nextn == 0 &&
          !p.workload.nextn_accept_rates.empty());
}

ServeResult ServeSearch(const ServeProblem& p,
                        const costmodel::Calibration& cal) {
  ServeResult r;
  std::vector<std::pair<ServingConfig, costmodel::ServingEstimate>> fitting;
  // A sweep's aggregated points are checked on the calendar (above).
  const bool sweep = SweepsBatch(p);
  std::vector<Candidate> candidates;
  for (const ServingConfig& c : Layouts(p)) {
    // A layout whose GPUs do not divide N cannot fill the GPUs with
    // replicas, but can be one side of a disaggregated split (8
    // prefill + 16 decode GPUs of 24).
    const bool divides = p.num_gpus % c.gpus() == 0;
    if (!divides && !p.disaggregated) continue;
    ++r.layouts;
    const Status valid =
        search_spaces::ValidateServingConfig(p.model, p.cluster.gpu, c);
    if (!valid.ok()) {
      ++r.rejected[valid.message()];
      continue;
    }
    // The most sequences the cache holds, from an offline estimate.
    search_spaces::ServingWorkload offline = p.workload;
    offline.concurrency = 0;
    const costmodel::ServingEstimate top = costmodel::EstimateServing(
        p.model, p.cluster, offline, c, divides ? p.num_gpus : c.gpus(), cal);
    if (!top.fits) {
      ++r.rejected[ReasonKey(top.infeasible_reason)];
      continue;
    }
    fitting.emplace_back(c, top);
    if (!divides) continue;  // a disaggregated worker only
    if (p.request_rate > 0) {
      ServePoint point;
      point.config = c;
      point.estimate = costmodel::EstimateServingAtRate(
          p.model, p.cluster, p.workload, c, p.num_gpus, p.request_rate, cal);
      if (!point.estimate.fits) {
        ++r.rejected[ReasonKey(point.estimate.infeasible_reason)];
        continue;
      }
      point.meets_targets = Meets(p, point.estimate);
      r.points.push_back(std::move(point));
      continue;
    }
    auto price = [&](int64_t b) {
      search_spaces::ServingWorkload w = p.workload;
      w.concurrency = b * top.replicas;
      ServePoint point;
      point.config = c;
      point.estimate =
          costmodel::EstimateServing(p.model, p.cluster, w, c, p.num_gpus, cal);
      // A fixed concurrency that fits is a closed-loop benchmark: its
      // pass calendar at the steady state, as tune accuracy prices
      // one; the sweep keeps the closed form. A concurrency the KV
      // cache cannot hold stays refused: a plan should not queue its
      // own clients.
      if (p.workload.concurrency > 0 && point.estimate.fits) {
        return OnCalendar(p, cal, c, w.concurrency);
      }
      point.meets_targets = point.estimate.fits && Meets(p, point.estimate);
      return point;
    };
    int64_t met = 0, missed = 0;  // largest met, smallest missed batch
    size_t met_index = 0;         // its point
    for (int64_t b : Batches(p, top.replicas, top.batch)) {
      ServePoint point = price(b);
      if (!point.estimate.fits) {
        ++r.rejected[ReasonKey(point.estimate.infeasible_reason)];
        continue;
      }
      if (point.meets_targets) {
        met = b;
        met_index = r.points.size();
      } else if (missed == 0 && met > 0) {
        missed = b;
      }
      r.points.push_back(std::move(point));
    }
    // Swept with targets: TTFT and TPOT grow with the batch, so the
    // largest batch that meets them lies between the last met and the
    // first missed power of two; bisect for it.
    if (p.workload.concurrency == 0 && met > 0 && missed > met + 1) {
      while (missed > met + 1) {
        const int64_t mid = met + (missed - met) / 2;
        (price(mid).meets_targets ? met : missed) = mid;
      }
      met_index = r.points.size();
      r.points.push_back(price(met));
    }
    if (sweep && met > 0) {
      candidates.push_back({c, top.replicas, met, met_index, top.batch});
    }
  }
  if (sweep) CheckOnCalendar(p, cal, std::move(candidates), &r);
  if (p.disaggregated) SearchDisaggregated(p, cal, fitting, &r);
  MarkFront(&r);
  if (sweep) PriceFrontOnCalendar(p, cal, &r);
  for (size_t i = 0; i < r.points.size(); ++i) {
    const ServePoint& q = r.points[i];
    if (!q.meets_targets) continue;
    if (sweep && !q.disaggregated && !q.calendar) continue;
    if (!r.best) {
      r.best = i;
      continue;
    }
    const auto& b = r.points[*r.best].estimate;
    const auto& e = q.estimate;
    if (e.output_tokens_per_s_per_gpu > b.output_tokens_per_s_per_gpu ||
        (e.output_tokens_per_s_per_gpu == b.output_tokens_per_s_per_gpu &&
         e.tpot_s < b.tpot_s)) {
      r.best = i;
    }
  }
  return r;
}

}  // namespace meshtune::tuner
