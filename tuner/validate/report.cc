#include "tuner/validate/report.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "tuner/io/text_format.h"
#include "tuner/render/report_json.h"

namespace meshtune::tuner {
namespace {

std::string Signed(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%+.1f", v);
  return buf;
}

// The table, two spaces between columns: each column as wide as its widest
// cell, text columns (config, why) left-aligned, numbers right-aligned, the
// last (status, free text) unpadded.
std::string AlignColumns(const std::vector<std::vector<std::string>>& cells) {
  constexpr bool kLeft[] = {false, true,  true,  false,
                            false, false, false, true};
  std::vector<size_t> width(std::size(kLeft), 0);
  for (const std::vector<std::string>& row : cells) {
    for (size_t c = 0; c < row.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  std::string text;
  for (const std::vector<std::string>& row : cells) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      if (c > 0) line += "  ";
      const std::string pad(width[c] - row[c].size(), ' ');
      if (c + 1 == row.size()) {
        line += row[c];
      } else {
        line += kLeft[c] ? row[c] + pad : pad + row[c];
      }
    }
    text += line + "\n";
  }
  return text;
}

nlohmann::json OptionalJson(const std::optional<double>& v) {
  return v.has_value() ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// The predicted range of the spread's picks and of every measured
// candidate (the ones the statistics are over).
struct SpreadRanges {
  int64_t chosen = 0;
  std::optional<PredictedRange> spread;
  int64_t measured = 0;
  std::optional<PredictedRange> all_measured;
};

SpreadRanges RangesOf(const std::vector<ValidatedCandidate>& rows) {
  std::vector<double> spread, measured;
  for (const ValidatedCandidate& r : rows) {
    if (r.pick.from_spread) spread.push_back(r.estimate.step_time_s);
    if (r.ok()) measured.push_back(r.estimate.step_time_s);
  }
  SpreadRanges s;
  s.chosen = static_cast<int64_t>(spread.size());
  s.spread = RangeOf(spread);
  s.measured = static_cast<int64_t>(measured.size());
  s.all_measured = RangeOf(measured);
  return s;
}

std::string RangeText(const PredictedRange& r) {
  return Fixed(r.min_s, 3) + " to " + Fixed(r.max_s, 3) + " s/step (max/min " +
         Fixed(r.ratio(), 2) + "x)";
}

nlohmann::json RangeJson(const std::optional<PredictedRange>& r) {
  if (!r.has_value()) return nullptr;
  return {{"min_s", r->min_s}, {"max_s", r->max_s}, {"ratio", r->ratio()}};
}

// With --spread: how many candidates it added and the predicted range they
// span, then the range of every measured candidate.
void PrintSpread(std::ostream& out, int64_t requested,
                 const std::vector<ValidatedCandidate>& rows) {
  const SpreadRanges s = RangesOf(rows);
  const std::string asked = "of --spread " + std::to_string(requested);
  if (s.chosen == 0) {
    out << "spread: no candidate added (" << asked
        << ": every trainable candidate is already chosen)\n";
  } else {
    out << "spread: " << s.chosen
        << (s.chosen == 1 ? " candidate" : " candidates");
    if (s.chosen < requested) {
      out << " (" << asked
          << ": every other trainable candidate is already chosen)";
    }
    out << " across the predicted range, " << RangeText(*s.spread) << "\n";
  }
  if (s.all_measured.has_value()) {
    out << "the statistics above are over all " << s.measured
        << " measured candidates, spread ones included: predicted "
        << RangeText(*s.all_measured) << "\n";
  }
}

}  // namespace

void PrintValidationTable(std::ostream& out, const ValidationRequest& request,
                          const ValidationResult& v,
                          const std::string& train_flags) {
  const std::vector<ValidatedCandidate>& rows = v.candidates;
  const ValidationStats& stats = v.stats;
  const std::optional<costmodel::FitResult>& fit = v.fit;
  const int64_t search_id = v.search_id;
  const int64_t repeats = request.repeats;
  out << "validation " << v.validation_id << " of search " << search_id
      << " (calibration " << v.calibration << ", " << request.steps
      << " steps per run, first 2 are warm-up; " << repeats
      << (repeats == 1 ? " run" : " interleaved runs")
      << " per candidate, their median)\n";
  // Column widths come from the content: a long configuration (vpp, etp,
  // an uneven layout, full:block:N, dist_opt) or reason would otherwise push
  // its row's later columns out of line with the header.
  std::vector<std::vector<std::string>> cells = {{"rank", "config", "why",
                                                  "pred_s", "meas_s", "spread%",
                                                  "err%", "status"}};
  for (size_t i = 0; i < rows.size(); ++i) {
    const ValidatedCandidate& r = rows[i];
    const std::string meas = r.ok() ? Fixed(r.measured_s(), 3) : "-";
    const std::string spread = r.ok() && r.runs_s.size() >= 2
                                   ? Fixed(r.measured().spread_pct, 1)
                                   : "-";
    const std::string errp =
        r.ok() ? Signed(ErrorPercent(r.estimate.step_time_s, r.measured_s()))
               : "-";
    std::string status = r.ok() ? "ok" : "failed: " + r.error;
    if (stats.measured_best.has_value() && *stats.measured_best == i) {
      status += " (measured best)";
    }
    cells.push_back({std::to_string(r.pick.index + 1),
                     search_spaces::ToString(r.estimate.config), r.pick.reason,
                     Fixed(r.estimate.step_time_s, 3), meas, spread, errp,
                     status});
  }
  out << AlignColumns(cells);
  out << "measured " << stats.measured << " of " << rows.size();
  if (stats.mape_pct.has_value()) {
    out << "; mean absolute error " << Fixed(*stats.mape_pct, 1) << "%";
  }
  if (stats.spearman.has_value()) {
    out << "; Spearman rank correlation " << Fixed(*stats.spearman, 2);
  }
  out << "\n";
  if (request.spread > 0) PrintSpread(out, request.spread, rows);
  if (stats.noise_pct.has_value()) {
    out << "run-to-run spread " << Fixed(*stats.noise_pct, 1)
        << "% (median over candidates); of the " << stats.separated_pairs
        << " candidate pairs predicted further apart than that, "
        << stats.separated_pairs_in_order
        << " were measured in the predicted order\n";
  }
  if (stats.top1_loss_pct.has_value()) {
    if (stats.top1_is_measured_best) {
      out << "the analytical top-1 is the measured best\n";
    } else {
      out << "the analytical top-1 is " << Fixed(*stats.top1_loss_pct, 1)
          << "% slower than the measured best\n";
    }
  } else {
    out << "the analytical top-1 failed to run\n";
  }
  if (stats.measured_best.has_value()) {
    const ValidatedCandidate& best = rows[*stats.measured_best];
    out << "recommended (measured best): rank " << best.pick.index + 1 << " "
        << search_spaces::ToString(best.estimate.config) << ", "
        << Fixed(best.measured_s(), 3) << " s/step\n"
        << "  train it: tune train --from-search " << search_id << " --rank "
        << best.pick.index + 1 << train_flags << "\n";
  }
  if (fit.has_value()) {
    out << "learned for this machine from " << fit->runs
        << " measured runs: compute x" << Fixed(fit->factors.compute, 2)
        << ", memory x" << Fixed(fit->factors.memory, 2) << ", collective x"
        << Fixed(fit->factors.collective, 2) << " (their error "
        << Fixed(fit->mape_before_pct, 1) << "% -> "
        << Fixed(fit->mape_after_pct, 1) << "%); later searches use them\n";
  }
}

void PrintValidationJson(std::ostream& out, const ValidationRequest& request,
                         const ValidationResult& v) {
  const std::vector<ValidatedCandidate>& rows = v.candidates;
  const ValidationStats& stats = v.stats;
  const std::optional<costmodel::FitResult>& fit = v.fit;
  const Inputs& in = request.inputs;
  nlohmann::json j;
  j["search_id"] = v.search_id;
  j["validation_id"] = v.validation_id;
  j["calibration"] = v.calibration;
  j["candidates"] = nlohmann::json::array();
  for (const ValidatedCandidate& r : rows) {
    nlohmann::json c;
    c["rank"] = r.pick.index + 1;
    c["reason"] = r.pick.reason;
    c["config"] = ConfigToJson(r.estimate.config, in.training.global_batch_size,
                               search_spaces::ToString(in.training.precision));
    c["predicted_step_s"] = r.estimate.step_time_s;
    c["measured_step_s"] =
        r.ok() ? nlohmann::json(r.measured_s()) : nlohmann::json(nullptr);
    c["measured_runs_s"] = r.runs_s;
    c["spread_pct"] = r.ok() && r.runs_s.size() >= 2
                          ? nlohmann::json(r.measured().spread_pct)
                          : nlohmann::json(nullptr);
    c["error_pct"] = r.ok() ? nlohmann::json(ErrorPercent(
                                  r.estimate.step_time_s, r.measured_s()))
                            : nlohmann::json(nullptr);
    c["status"] = r.ok() ? "ok" : "failed";
    c["error"] = r.ok() ? nlohmann::json(nullptr) : nlohmann::json(r.error);
    if (request.spread > 0) c["from_spread"] = r.pick.from_spread;
    j["candidates"].push_back(c);
  }
  j["repeats"] = request.repeats;
  if (request.spread > 0) {
    const SpreadRanges s = RangesOf(rows);
    j["spread"] = {{"requested", request.spread},
                   {"chosen", s.chosen},
                   {"predicted_range", RangeJson(s.spread)},
                   {"measured_candidates", s.measured},
                   {"measured_predicted_range", RangeJson(s.all_measured)}};
  }
  j["spearman"] = OptionalJson(stats.spearman);
  j["noise_pct"] = OptionalJson(stats.noise_pct);
  j["separated_pairs"] = stats.separated_pairs;
  j["separated_pairs_in_order"] = stats.separated_pairs_in_order;
  j["mape_pct"] = OptionalJson(stats.mape_pct);
  j["top1_is_measured_best"] = stats.top1_is_measured_best;
  j["top1_loss_pct"] = OptionalJson(stats.top1_loss_pct);
  j["recommended_rank"] =
      stats.measured_best.has_value()
          ? nlohmann::json(rows[*stats.measured_best].pick.index + 1)
          : nlohmann::json(nullptr);
  if (fit.has_value()) {
    j["learned"] = {{"runs", fit->runs},
                    {"compute", fit->factors.compute},
                    {"memory", fit->factors.memory},
                    {"collective", fit->factors.collective},
                    {"mape_before_pct", fit->mape_before_pct},
                    {"mape_after_pct", fit->mape_after_pct}};
  } else {
    j["learned"] = nullptr;
  }
  out << j.dump(2) << "\n";
}

}  // namespace meshtune::tuner
