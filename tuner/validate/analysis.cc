#include "tuner/validate/analysis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

#include "search_spaces/status.h"

namespace meshtune::tuner {
namespace {

// Ranks 1..n of `x` (ties: the average of the ranks they span).
std::vector<double> AverageRanks(const std::vector<double>& x) {
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> ranks(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    const double avg = (static_cast<double>(i + j) / 2.0) + 1.0;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = avg;
    i = j + 1;
  }
  return ranks;
}

// REQUIRES: !x.empty().
double Median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  const size_t n = x.size();
  return n % 2 == 1 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

// q to two decimals without trailing zeros: "0", "0.25", "0.5", "0.33", "1".
std::string QuantileText(double q) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", q);
  std::string text = buf;
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text;
}

// Appends the spread's picks (analysis.h) to `out`, marking them in `taken`.
void AddSpread(const std::vector<costmodel::Estimate>& ranked, int64_t spread,
               const std::function<bool(const costmodel::Estimate&)>& trainable,
               std::vector<bool>* taken, std::vector<SelectedCandidate>* out) {
  if (spread == 0) return;
  // The feasible, trainable candidates by predicted step time, then rank.
  std::vector<size_t> pool;
  for (size_t i = 0; i < ranked.size(); ++i) {
    if (ranked[i].fits && trainable(ranked[i])) pool.push_back(i);
  }
  std::stable_sort(pool.begin(), pool.end(), [&](size_t a, size_t b) {
    return ranked[a].step_time_s < ranked[b].step_time_s;
  });
  if (pool.empty()) return;
  const size_t m = pool.size();
  const auto t = [&](size_t position) {
    return ranked[pool[position]].step_time_s;
  };
  for (int64_t i = 0; i < spread; ++i) {
    // h = q·(M−1) with q = i/(N−1): one division, exact at both ends.
    const double h = static_cast<double>(i) * static_cast<double>(m - 1) /
                     static_cast<double>(spread - 1);
    const size_t lo = std::min(static_cast<size_t>(std::floor(h)), m - 1);
    const size_t hi = std::min(lo + 1, m - 1);
    const double target =
        t(lo) + (h - static_cast<double>(lo)) * (t(hi) - t(lo));
    // The nearest not chosen yet; the pool's order breaks ties (faster,
    // then better ranked) because only a strictly nearer one replaces it.
    std::optional<size_t> best;
    double best_distance = 0;
    for (size_t position = 0; position < m; ++position) {
      if ((*taken)[pool[position]]) continue;
      const double distance = std::fabs(t(position) - target);
      if (!best.has_value() || distance < best_distance) {
        best = pool[position];
        best_distance = distance;
      }
    }
    if (!best.has_value()) return;  // every trainable candidate is chosen
    out->push_back({*best,
                    "spread q=" + QuantileText(static_cast<double>(i) /
                                               static_cast<double>(spread - 1)),
                    /*from_spread=*/true});
    (*taken)[*best] = true;
  }
}

}  // namespace

std::vector<SelectedCandidate> SelectCandidates(
    const std::vector<costmodel::Estimate>& ranked, int64_t top_k,
    int64_t extras,
    const std::function<bool(const costmodel::Estimate&)>& trainable,
    int64_t spread) {
  MESHTUNE_CHECK(top_k >= 1 && extras >= 0 && (spread == 0 || spread >= 2));
  std::vector<SelectedCandidate> out;
  std::vector<bool> taken(ranked.size(), false);
  for (size_t i = 0;
       i < ranked.size() && static_cast<int64_t>(out.size()) < top_k; ++i) {
    if (!ranked[i].fits || !trainable(ranked[i])) continue;
    out.push_back({i, "top " + std::to_string(out.size() + 1)});
    taken[i] = true;
  }
  if (out.empty()) return out;
  // Each axis maps a configuration to its value along that axis; an extra
  // must bring a value none of the chosen candidates has.
  using Key = std::function<std::string(const search_spaces::ParallelConfig&)>;
  const std::pair<const char*, Key> axes[] = {
      {"other tp/pp split",
       [](const search_spaces::ParallelConfig& c) {
         return std::to_string(c.tp) + "/" + std::to_string(c.pp);
       }},
      {"other recompute",
       [](const search_spaces::ParallelConfig& c) {
         return std::string(search_spaces::ToString(c.recompute.granularity));
       }},
      {"other micro-batch",
       [](const search_spaces::ParallelConfig& c) {
         return std::to_string(c.mbs);
       }},
  };
  int64_t added = 0;
  for (const auto& [reason, key] : axes) {
    if (added >= extras) break;
    std::vector<std::string> seen;
    for (const SelectedCandidate& p : out) {
      seen.push_back(key(ranked[p.index].config));
    }
    for (size_t i = 0; i < ranked.size(); ++i) {
      if (taken[i] || !ranked[i].fits ||
          std::find(seen.begin(), seen.end(), key(ranked[i].config)) !=
              seen.end() ||
          !trainable(ranked[i])) {
        continue;
      }
      out.push_back({i, reason});
      taken[i] = true;
      ++added;
      break;
    }
  }
  AddSpread(ranked, spread, trainable, &taken, &out);
  return out;
}

std::optional<PredictedRange> RangeOf(const std::vector<double>& predicted_s) {
  if (predicted_s.empty()) return std::nullopt;
  const auto [lo, hi] =
      std::minmax_element(predicted_s.begin(), predicted_s.end());
  MESHTUNE_CHECK(*lo > 0);
  return PredictedRange{*lo, *hi};
}

RepeatedRuns SummarizeRuns(const std::vector<double>& runs_s) {
  MESHTUNE_CHECK(!runs_s.empty());
  const auto [lo, hi] = std::minmax_element(runs_s.begin(), runs_s.end());
  MESHTUNE_CHECK(*lo > 0);
  RepeatedRuns r;
  r.median_s = Median(runs_s);
  r.spread_pct = 100.0 * (*hi - *lo) / r.median_s;
  return r;
}

std::vector<size_t> RoundOrder(size_t n, int64_t round) {
  std::vector<size_t> order(n);
  if (n == 0) return order;
  const size_t shift = static_cast<size_t>(round) % n;
  for (size_t i = 0; i < n; ++i) order[i] = (i + shift) % n;
  return order;
}

double SpearmanRho(const std::vector<double>& a, const std::vector<double>& b) {
  MESHTUNE_CHECK(a.size() == b.size());
  const std::vector<double> ra = AverageRanks(a), rb = AverageRanks(b);
  const double n = static_cast<double>(a.size());
  const double mean = (n + 1.0) / 2.0;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) * (ra[i] - mean);
    sbb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (saa == 0 || sbb == 0) return std::numeric_limits<double>::quiet_NaN();
  return sab / std::sqrt(saa * sbb);
}

double ErrorPercent(double predicted_s, double measured_s) {
  return 100.0 * (predicted_s - measured_s) / measured_s;
}

ValidationStats AnalyzeOutcomes(const std::vector<CandidateOutcome>& outcomes) {
  ValidationStats s;
  std::vector<double> predicted, measured;
  double abs_error_sum = 0;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const CandidateOutcome& o = outcomes[i];
    if (!o.measured_step_s.has_value()) continue;
    predicted.push_back(o.predicted_step_s);
    measured.push_back(*o.measured_step_s);
    abs_error_sum +=
        std::fabs(ErrorPercent(o.predicted_step_s, *o.measured_step_s));
    if (!s.measured_best.has_value() ||
        *o.measured_step_s < *outcomes[*s.measured_best].measured_step_s) {
      s.measured_best = i;
    }
  }
  s.measured = static_cast<int64_t>(measured.size());
  if (s.measured >= 1) {
    s.mape_pct = abs_error_sum / static_cast<double>(s.measured);
  }
  if (s.measured >= 2) {
    const double rho = SpearmanRho(predicted, measured);
    if (!std::isnan(rho)) s.spearman = rho;
  }
  std::vector<double> spreads;
  for (const CandidateOutcome& o : outcomes) {
    if (o.measured_step_s.has_value() && o.spread_pct.has_value()) {
      spreads.push_back(*o.spread_pct);
    }
  }
  if (!spreads.empty()) s.noise_pct = Median(spreads);
  const double noise = s.noise_pct.value_or(0.0);
  for (size_t i = 0; i < predicted.size(); ++i) {
    for (size_t j = i + 1; j < predicted.size(); ++j) {
      const double faster = std::min(predicted[i], predicted[j]);
      const double gap_pct =
          100.0 * std::fabs(predicted[i] - predicted[j]) / faster;
      if (gap_pct <= noise) continue;
      ++s.separated_pairs;
      if ((predicted[i] < predicted[j]) == (measured[i] < measured[j])) {
        ++s.separated_pairs_in_order;
      }
    }
  }
  if (!outcomes.empty() && outcomes[0].measured_step_s.has_value()) {
    const double top1 = *outcomes[0].measured_step_s;
    const double best = *outcomes[*s.measured_best].measured_step_s;
    s.top1_is_measured_best = *s.measured_best == 0;
    s.top1_loss_pct = 100.0 * (top1 - best) / best;
  }
  return s;
}

}  // namespace meshtune::tuner
