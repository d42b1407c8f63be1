#include "tuner/regress/verdict.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace meshtune::tuner {
namespace {

std::string Format(const char* format, double a, double b = 0) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, a, b);
  return buf;
}

// One throughput row; returns true when it is a regression by the rule in
// the header (only meaningful for the gated metric).
bool ThroughputRow(const char* name, double base_median, double base_spread,
                   double cur_median, double cur_spread, double threshold_pct,
                   bool gated, RegressVerdictRow* row, double* change_pct) {
  const double change =
      base_median > 0 ? (cur_median - base_median) / base_median * 100 : 0;
  const bool below = change < -threshold_pct;
  const bool beyond_noise = base_median - cur_median > base_spread + cur_spread;
  const bool regressed = gated && below && beyond_noise;
  row->metric = name;
  row->baseline = Format("%.1f ± %.1f", base_median, base_spread);
  row->current = Format("%.1f ± %.1f", cur_median, cur_spread);
  row->change = Format("%+.1f%%", change);
  row->threshold = gated ? Format("-%.1f%%", threshold_pct) : "-";
  if (!gated) {
    row->verdict = "info";
  } else if (regressed) {
    row->verdict = "REGRESSION";
  } else if (below) {
    row->verdict = "pass (within noise)";
  } else {
    row->verdict = "pass";
  }
  if (gated) *change_pct = change;
  return regressed;
}

}  // namespace

RegressVerdict CompareRegress(const results::RegressResult& baseline,
                              const results::RegressResult& current,
                              double threshold_pct, double loss_rtol,
                              RegressMetric metric) {
  RegressVerdict v;
  RegressVerdictRow cpu_row, wall_row;
  // Both rows are always filled; only the gated one can regress.
  const bool cpu_regressed = ThroughputRow(
      "tokens per CPU second", baseline.cpu_tokens_per_s_median,
      baseline.cpu_tokens_per_s_spread, current.cpu_tokens_per_s_median,
      current.cpu_tokens_per_s_spread, threshold_pct,
      metric == RegressMetric::kCpu, &cpu_row, &v.change_pct);
  const bool wall_regressed =
      ThroughputRow("tokens per wall second", baseline.tokens_per_s_median,
                    baseline.tokens_per_s_spread, current.tokens_per_s_median,
                    current.tokens_per_s_spread, threshold_pct,
                    metric == RegressMetric::kWall, &wall_row, &v.change_pct);
  v.throughput_regressed = cpu_regressed || wall_regressed;
  v.rows.push_back(cpu_row);
  v.rows.push_back(wall_row);

  const size_t n = std::min(baseline.losses.size(), current.losses.size());
  v.steps_compared = static_cast<int64_t>(n);
  for (size_t i = 0; i < n; ++i) {
    const double base = baseline.losses[i], cur = current.losses[i];
    const double diff =
        std::fabs(cur - base) / std::max(std::fabs(base), 1e-30);
    if (i == 0 || diff > v.max_loss_rel_diff) {
      v.max_loss_rel_diff = diff;
      v.worst_step = static_cast<int64_t>(i) + 1;
    }
  }
  v.numerics_changed = n == 0 || v.max_loss_rel_diff > loss_rtol;
  RegressVerdictRow loss;
  loss.metric = "loss, " + std::to_string(n) + " steps";
  if (n > 0) {
    const size_t w = static_cast<size_t>(v.worst_step - 1);
    loss.baseline = Format("%.6e", baseline.losses[w]);
    loss.current = Format("%.6e", current.losses[w]);
    loss.change = Format("%.1e", v.max_loss_rel_diff) + " @" +
                  std::to_string(v.worst_step);
  } else {
    loss.baseline = loss.current = loss.change = "-";
  }
  loss.threshold = Format("%.0e", loss_rtol);
  loss.verdict = v.numerics_changed ? "NUMERICS CHANGED" : "pass";
  v.rows.push_back(loss);
  return v;
}

std::string FormatVerdictTable(const RegressVerdict& v) {
  std::vector<RegressVerdictRow> rows = {
      {"metric", "baseline", "current", "change", "threshold", "verdict"}};
  rows.insert(rows.end(), v.rows.begin(), v.rows.end());
  // Widths in characters: "±" is two bytes and one column.
  const auto width = [](const std::string& s) {
    size_t w = 0;
    for (unsigned char c : s) w += (c & 0xC0) != 0x80;
    return w;
  };
  size_t w[6] = {};
  for (const RegressVerdictRow& r : rows) {
    const std::string* f[6] = {&r.metric, &r.baseline,  &r.current,
                               &r.change, &r.threshold, &r.verdict};
    for (int i = 0; i < 6; ++i) w[i] = std::max(w[i], width(*f[i]));
  }
  std::string out;
  for (const RegressVerdictRow& r : rows) {
    const std::string* f[6] = {&r.metric, &r.baseline,  &r.current,
                               &r.change, &r.threshold, &r.verdict};
    std::string line;
    for (int i = 0; i < 6; ++i) {
      // Metric left-aligned, numbers right-aligned, verdict last and ragged.
      const std::string pad(w[i] - width(*f[i]), ' ');
      if (i == 0) {
        line += *f[i] + pad;
      } else if (i == 5) {
        line += "  " + *f[i];
      } else {
        line += "  " + pad + *f[i];
      }
    }
    out += line + "\n";
  }
  std::string verdict = "pass";
  if (v.throughput_regressed && v.numerics_changed) {
    verdict = "REGRESSION (throughput and numerics)";
  } else if (v.throughput_regressed) {
    verdict = "REGRESSION (throughput)";
  } else if (v.numerics_changed) {
    verdict = "REGRESSION (numerics changed)";
  }
  return out + "verdict: " + verdict + "\n";
}

}  // namespace meshtune::tuner
