#include "tuner/accuracy/report.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>

#include "search_spaces/cluster_spec.h"
#include "search_spaces/parallel_config.h"
#include "tuner/accuracy/best.h"
#include "tuner/render/report_json.h"

namespace meshtune::tuner {
namespace {

std::string Format(const char* format, ...)
    __attribute__((format(printf, 1, 2)));
std::string Format(const char* format, ...) {
  char buf[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  return buf;
}

nlohmann::ordered_json StatsToJson(const ErrorStats& s) {
  nlohmann::ordered_json j;
  j["n"] = s.n;
  if (s.n > 0) {
    j["mape_pct"] = s.mape_pct;
    j["max_abs_pct"] = s.max_abs_pct;
    j["worst_pct"] = s.worst_pct;
    j["worst_line"] = s.worst_line;
  } else {
    j["mape_pct"] = nullptr;
    j["max_abs_pct"] = nullptr;
    j["worst_pct"] = nullptr;
    j["worst_line"] = nullptr;
  }
  return j;
}

nlohmann::ordered_json GroupToJson(const std::vector<SourceStats>& per_source,
                                   const ErrorStats& all) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const SourceStats& s : per_source) j[s.source] = StatsToJson(s.stats);
  j["all"] = StatsToJson(all);
  return j;
}

// "Korthikanti2022_Table5" fits the column; longer names are cut.
std::string Fit(const std::string& s, size_t width) {
  return s.size() <= width ? s : s.substr(0, width - 1) + "~";
}

std::string ErrorCell(const ErrorStats& s, double value) {
  return s.n > 0 ? Format("%+.1f %%", value) : "-";
}

// The --with-best keys of one row (BestPlan in tuner/accuracy/cases.h): the
// plan as `tune search --json` writes configs (ConfigToJson) and as one line
// (ToString, which also names etp and uneven layouts), or nulls and the
// reason.
// REQUIRES: r.best is set; r.prediction too when r.best->config is.
void AddBestPlanJson(const AccuracyResult& r, nlohmann::ordered_json* j) {
  const AccuracyCase& c = r.row;
  const BestPlan& b = *r.best;
  if (b.config) {
    (*j)["best_config"] = nlohmann::ordered_json(
        ConfigToJson(*b.config, c.training.global_batch_size,
                     search_spaces::ToString(c.training.precision)));
    (*j)["best_config_text"] = search_spaces::ToString(*b.config);
    (*j)["best_step_s"] = b.step_s;
    (*j)["best_gain_pct"] = b.gain_pct;
    (*j)["best_time_s"] = TimeBreakdownToJson(b.time);
    const TermSaving saving = LargestSaving(r.prediction->time, b.time);
    (*j)["best_term"] = saving.term;
    (*j)["best_term_saved_s"] = saving.saved_s;
    (*j)["best_reason"] = nullptr;
  } else {
    for (const char* key :
         {"best_config", "best_config_text", "best_step_s", "best_gain_pct",
          "best_time_s", "best_term", "best_term_saved_s"}) {
      (*j)[key] = nullptr;
    }
    (*j)["best_reason"] = b.reason;
  }
}

nlohmann::ordered_json WithBestToJson(
    const std::vector<AccuracyResult>& results, const WithBestSummary& w) {
  nlohmann::ordered_json j;
  j["searched"] = w.searched;
  j["problems"] = w.problems;
  j["found"] = w.found;
  j["no_plan"] = w.no_plan;
  j["bar_pct"] = kBestGainBarPct;
  j["within"] = w.within;
  if (w.found > 0) {
    j["within_share_pct"] = w.within_share_pct;
    j["median_gain_pct"] = w.median_gain_pct;
    j["max_gain_pct"] = w.max_gain_pct;
    j["max_gain_line"] = w.max_gain_line;
  } else {
    for (const char* key : {"within_share_pct", "median_gain_pct",
                            "max_gain_pct", "max_gain_line"}) {
      j[key] = nullptr;
    }
  }
  nlohmann::ordered_json beyond = nlohmann::ordered_json::array();
  for (size_t i : w.beyond) {
    const AccuracyResult& r = results[i];
    nlohmann::ordered_json b;
    b["line"] = r.row.line;
    b["model"] = r.row.model_name;
    b["gpu"] = r.row.gpu_name;
    b["num_gpus"] = r.row.num_gpus;
    b["config"] = search_spaces::ToString(r.row.config);
    b["best_config"] = search_spaces::ToString(*r.best->config);
    b["gain_pct"] = r.best->gain_pct;
    const TermSaving saving = LargestSaving(r.prediction->time, r.best->time);
    b["term"] = saving.term;
    b["term_saved_s"] = saving.saved_s;
    beyond.push_back(std::move(b));
  }
  j["beyond"] = std::move(beyond);
  return j;
}

// The footer of --with-best: rows searched, the share within the bar, the
// median and largest gain, and every row beyond the bar.
void PrintWithBest(std::ostream& out,
                   const std::vector<AccuracyResult>& results,
                   const WithBestSummary& w) {
  out << "#\n# Best plan (--with-best): each step-time row's problem searched "
         "over tune's default space with the same cost model, keeping 5% of "
         "the usable memory free (or the row's own margin if smaller); gain = "
         "(row predicted - best) / row predicted\n";
  out << Format("# Rows searched       : %lld (%lld distinct problems)",
                static_cast<long long>(w.searched),
                static_cast<long long>(w.problems));
  if (w.no_plan > 0) {
    out << Format(", %lld with no feasible plan",
                  static_cast<long long>(w.no_plan));
  }
  out << "\n";
  if (w.found == 0) return;
  out << Format("# Gain <= %.0f %%        : %lld of %lld (%.1f %%)\n",
                kBestGainBarPct, static_cast<long long>(w.within),
                static_cast<long long>(w.found), w.within_share_pct);
  out << Format("# Median gain         : %+.1f %%\n", w.median_gain_pct);
  out << Format("# Max gain            : %+.1f %% (line %lld)\n",
                w.max_gain_pct, static_cast<long long>(w.max_gain_line));
  out << Format("# Rows beyond %.0f %%    : %zu\n", kBestGainBarPct,
                w.beyond.size());
  if (w.beyond.empty()) return;
  // "largest saving": the term the best plan saves most on (LargestSaving)
  // and the seconds per step it saves there.
  out << Format("#   %5s %-26s %-9s %5s %-52s %-52s %7s  %s\n", "line", "model",
                "gpu", "gpus", "row config", "best config", "gain",
                "largest saving");
  for (size_t i : w.beyond) {
    const AccuracyResult& r = results[i];
    const TermSaving saving = LargestSaving(r.prediction->time, r.best->time);
    out << Format(
        "#   %5lld %-26s %-9s %5lld %-52s %-52s %+6.1f%%  %s %.3g s\n",
        static_cast<long long>(r.row.line), Fit(r.row.model_name, 26).c_str(),
        r.row.cluster.name.c_str(), static_cast<long long>(r.row.num_gpus),
        search_spaces::ToString(r.row.config).c_str(),
        search_spaces::ToString(*r.best->config).c_str(), r.best->gain_pct,
        saving.term, saving.saved_s);
  }
}

}  // namespace

nlohmann::ordered_json AccuracyToJson(
    const std::vector<AccuracyResult>& results,
    const AccuracySummary& summary) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const AccuracyResult& r : results) {
    nlohmann::ordered_json j;
    j["line"] = r.row.line;
    j["source"] = r.row.source;
    j["model"] = r.row.model_name;
    j["gpu"] = r.row.gpu_name;
    j["num_gpus"] = r.row.num_gpus;
    j["metric"] = r.row.metric;
    j["unit"] = MetricUnit(r.row.kind);
    j["published_value"] = r.row.published_value;
    if (r.prediction) {
      j["published"] = r.row.published;
      j["predicted"] = r.prediction->predicted;
      j["error_pct"] = r.prediction->error_pct;
      j["predicted_step_s"] = r.prediction->predicted_step_s;
      if (r.row.kind == MetricKind::kStepTime) {
        j["published_step_s"] = r.row.published_step_s;
      } else {
        j["published_step_s"] = nullptr;
      }
      j["memory_gib"] = r.prediction->memory_gib;
      j["fits"] = r.prediction->fits;
      j["time_s"] = TimeBreakdownToJson(r.prediction->time);
      j["skipped_reason"] = nullptr;
    } else {
      for (const char* key :
           {"published", "predicted", "error_pct", "predicted_step_s",
            "published_step_s", "memory_gib", "fits", "time_s"}) {
        j[key] = nullptr;
      }
      j["skipped_reason"] = r.row.skipped_reason;
    }
    if (r.best) AddBestPlanJson(r, &j);
    rows.push_back(std::move(j));
  }
  nlohmann::ordered_json s;
  s["rows"] = summary.rows;
  s["predicted"] = summary.predicted;
  s["skipped"] = summary.skipped;
  s["out_of_memory"] = summary.out_of_memory;
  s["step_time"] = GroupToJson(summary.per_source, summary.all);
  s["layer_time"] =
      GroupToJson(summary.layer_time.per_source, summary.layer_time.all);
  s["memory"] = GroupToJson(summary.memory.per_source, summary.memory.all);
  nlohmann::ordered_json reasons = nlohmann::ordered_json::array();
  for (const SkipReasonCount& r : summary.skip_reasons) {
    nlohmann::ordered_json j;
    j["reason"] = r.reason;
    j["count"] = r.count;
    reasons.push_back(std::move(j));
  }
  s["skip_reasons"] = std::move(reasons);
  if (summary.with_best) {
    s["with_best"] = WithBestToJson(results, *summary.with_best);
  }
  nlohmann::ordered_json doc;
  doc["rows"] = std::move(rows);
  doc["summary"] = std::move(s);
  return doc;
}

void PrintAccuracyTable(std::ostream& out, const std::string& csv_path,
                        const std::vector<AccuracyResult>& results,
                        const AccuracySummary& summary) {
  out << "# tune accuracy: " << csv_path << "\n";
  out << "# published value converted to the unit it is compared in (s per "
         "step, ms per layer, GiB allocated); predicted by the cost model "
         "(datasheet calibration); error = (predicted - published) / "
         "published\n#\n";
  out << Format(
      "%5s  %-25s %-14s %5s %-9s %-14s %-50s %-22s %10s %10s %10s %-3s "
      "%8s %s%13s\n",
      "line", "source", "model", "gpus", "cluster", "prec", "config", "metric",
      "published", "publ", "pred", "", "error",
      summary.with_best ? Format("%9s ", "best_gain").c_str() : "",
      "mem_GiB/cap");
  for (const AccuracyResult& r : results) {
    const AccuracyCase& c = r.row;
    const std::string lead =
        Format("%5lld  %-25s %-14s %5lld ", static_cast<long long>(c.line),
               Fit(c.source, 25).c_str(), Fit(c.model_name, 14).c_str(),
               static_cast<long long>(c.num_gpus));
    if (!r.prediction) {
      out << lead
          << Format("%-9s %-14s %-50s %-22s %10g  skipped: %s\n", "-", "-", "-",
                    Fit(c.metric, 22).c_str(), c.published_value,
                    c.skipped_reason.c_str());
      continue;
    }
    const AccuracyPrediction& p = *r.prediction;
    // --with-best: the gain of the best plan, "none fits" when the search
    // found nothing, "-" for rows not searched (per-layer, memory).
    std::string gain;
    if (summary.with_best) {
      const std::string cell = !r.best || !r.best->searched ? "-"
                               : r.best->config
                                   ? Format("%+.1f%%", r.best->gain_pct)
                                   : "none fits";
      gain = Format("%9s ", cell.c_str());
    }
    out << lead
        << Format(
               "%-9s %-14s %-50s %-22s %10g %10.4g %10.4g %-3s %+7.1f%% "
               "%s%6.1f/%-4.1f%s\n",
               c.cluster.name.c_str(),
               search_spaces::ToString(c.training.precision),
               Fit(search_spaces::ToString(c.config), 50).c_str(),
               Fit(c.metric, 22).c_str(), c.published_value, c.published,
               p.predicted, MetricUnit(c.kind), p.error_pct, gain.c_str(),
               p.memory_gib, p.capacity_gib, p.fits ? "" : " OOM");
  }
  auto stats_line = [&](const std::string& name, const ErrorStats& s) {
    const std::string worst = s.n > 0
                                  ? Format("%+.1f %% (%lld)", s.worst_pct,
                                           static_cast<long long>(s.worst_line))
                                  : "-";
    out << Format("# %-36s %5lld %12s %16s\n", Fit(name, 36).c_str(),
                  static_cast<long long>(s.n),
                  s.n > 0 ? Format("%.1f %%", s.mape_pct).c_str() : "-",
                  worst.c_str());
  };
  auto group = [&](const char* title, const std::vector<SourceStats>& list,
                   const ErrorStats& all) {
    out << "#\n";
    out << Format("# %-36s %5s %12s %16s\n", title, "rows", "mean |err|",
                  "worst (line)");
    for (const SourceStats& s : list) stats_line("  " + s.source, s.stats);
    stats_line("  all", all);
  };
  group("step time (s per step)", summary.per_source, summary.all);
  if (summary.layer_time.all.n > 0) {
    group("layer time (ms per layer)", summary.layer_time.per_source,
          summary.layer_time.all);
  }
  if (summary.memory.all.n > 0) {
    group("allocated memory (GiB)", summary.memory.per_source,
          summary.memory.all);
  }
  out << "#\n";
  out << Format("# Rows predicted      : %lld of %lld\n",
                static_cast<long long>(summary.predicted),
                static_cast<long long>(summary.rows));
  out << Format("# Rows skipped        : %lld%s\n",
                static_cast<long long>(summary.skipped),
                summary.skipped > 0 ? " (reasons below)" : "");
  for (const SkipReasonCount& r : summary.skip_reasons) {
    out << Format("#   %5lld  %s\n", static_cast<long long>(r.count),
                  r.reason.c_str());
  }
  out << Format("# Out of memory rows  : %lld %s\n",
                static_cast<long long>(summary.out_of_memory),
                summary.out_of_memory == 0 ? "OK" : "FAILED");
  auto error_lines = [&](const char* what, const ErrorStats& s) {
    out << Format("# %-20s: ", (std::string(what) + " MAPE").c_str())
        << (s.n > 0 ? Format("%.2f %% over %lld rows", s.mape_pct,
                             static_cast<long long>(s.n))
                    : "-")
        << "\n";
    out << Format("# %-20s: ", (std::string(what) + " worst").c_str())
        << (s.n > 0
                ? Format("%s (line %lld)", ErrorCell(s, s.worst_pct).c_str(),
                         static_cast<long long>(s.worst_line))
                : "-")
        << "\n";
  };
  error_lines("Step time", summary.all);
  if (summary.layer_time.all.n > 0) {
    error_lines("Layer time", summary.layer_time.all);
  }
  if (summary.memory.all.n > 0) error_lines("Memory", summary.memory.all);
  if (summary.with_best) PrintWithBest(out, results, *summary.with_best);
}

void PrintAblationTable(std::ostream& out, const std::string& csv_path,
                        const std::vector<AblationLine>& lines) {
  out << "# tune accuracy --ablation: " << csv_path << "\n";
  out << "# each line switches one cost-model refinement off; MAPE and worst "
         "error over the predicted rows, change of MAPE vs all on\n#\n";
  out << Format("%-28s %5s %9s %9s %9s  %s\n", "refinement off", "rows", "MAPE",
                "worst", "dMAPE", "description");
  const double base = lines.empty() ? 0 : lines.front().summary.all.mape_pct;
  for (size_t i = 0; i < lines.size(); ++i) {
    const ErrorStats& s = lines[i].summary.all;
    const std::string delta = i == 0 ? "-" : Format("%+.2f", s.mape_pct - base);
    out << Format("%-28s %5lld %8.2f%% %+8.1f%% %9s  %s\n",
                  Fit(lines[i].name, 28).c_str(), static_cast<long long>(s.n),
                  s.mape_pct, s.worst_pct, delta.c_str(),
                  lines[i].description.c_str());
  }
}

nlohmann::ordered_json AblationToJson(const std::vector<AblationLine>& lines) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  const double base = lines.empty() ? 0 : lines.front().summary.all.mape_pct;
  for (const AblationLine& line : lines) {
    nlohmann::ordered_json j = StatsToJson(line.summary.all);
    j["delta_mape_pct"] = line.summary.all.mape_pct - base;
    nlohmann::ordered_json entry;
    entry["refinement_off"] = line.name;
    for (auto it = j.begin(); it != j.end(); ++it) entry[it.key()] = it.value();
    list.push_back(std::move(entry));
  }
  nlohmann::ordered_json doc;
  doc["ablation"] = std::move(list);
  return doc;
}

}  // namespace meshtune::tuner
