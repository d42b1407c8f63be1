#include "tuner/accuracy/serving_report.h"

#include <cmath>
#include <cstdio>

#include "search_spaces/yaml_util.h"

namespace meshtune::tuner {

namespace {

void Add(const ServingRowResult& r, ServingErrorStats* s, double* abs_sum) {
  ++s->rows;
  if (!r.p.skipped_reason.empty()) return;
  ++s->predicted;
  *abs_sum += std::fabs(r.p.error_pct);
  if (s->predicted == 1 || std::fabs(r.p.error_pct) > std::fabs(s->worst_pct)) {
    s->worst_pct = r.p.error_pct;
    s->worst_line = r.c.line;
  }
}

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string Short(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}

std::string StatsLine(const ServingErrorStats& s) {
  return std::to_string(s.predicted) + "/" + std::to_string(s.rows) +
         " predicted, MAPE " + Fixed(s.mape_pct, 1) + "%, worst " +
         Fixed(s.worst_pct, 1) + "% (line " + std::to_string(s.worst_line) +
         ")";
}

nlohmann::json StatsJson(const ServingErrorStats& s) {
  return {{"rows", s.rows},
          {"predicted", s.predicted},
          {"mape_pct", s.mape_pct},
          {"worst_pct", s.worst_pct},
          {"worst_line", s.worst_line}};
}

}  // namespace

std::vector<ServingRowResult> PredictServingRows(
    std::vector<ServingCase> cases) {
  std::vector<ServingRowResult> rows;
  rows.reserve(cases.size());
  for (ServingCase& c : cases) {
    ServingPrediction p = PredictServingCase(c);
    rows.push_back({std::move(c), std::move(p)});
  }
  return rows;
}

ServingSummary SummarizeServing(const std::vector<ServingRowResult>& rows) {
  ServingSummary s;
  double all = 0, thr = 0, lat = 0;
  std::map<std::pair<std::string, std::string>, double> sums;
  for (const ServingRowResult& r : rows) {
    Add(r, &s.all, &all);
    if (r.c.metric != ServingMetric::kUnknown) {
      if (IsThroughputMetric(r.c.metric)) {
        Add(r, &s.throughput, &thr);
      } else {
        Add(r, &s.latency, &lat);
      }
    }
    const auto key = std::make_pair(r.c.source, r.c.metric_name);
    Add(r, &s.groups[key], &sums[key]);
    if (!r.p.skipped_reason.empty()) ++s.skipped[r.p.skipped_reason];
  }
  auto finish = [](ServingErrorStats* st, double sum) {
    st->mape_pct = st->predicted > 0 ? sum / st->predicted : 0.0;
  };
  finish(&s.all, all);
  finish(&s.throughput, thr);
  finish(&s.latency, lat);
  for (auto& [key, st] : s.groups) finish(&st, sums[key]);
  return s;
}

void PrintServingAccuracy(std::ostream& out, const std::string& csv,
                          const std::vector<ServingRowResult>& rows,
                          const ServingSummary& s) {
  out << "serving rows of " << csv << " against the serving cost model "
      << "(datasheet calibration)\n";
  out << "line  model                 gpu              gpus  layout"
         "                    metric                        published  "
         "predicted    err%\n";
  for (const ServingRowResult& r : rows) {
    if (!r.p.skipped_reason.empty()) continue;
    char buf[512];
    std::snprintf(
        buf, sizeof buf,
        "%4lld  %-20s  %-15s  %4lld  %-24s  %-28s %10.4g %10.4g  "
        "%+6.1f\n",
        static_cast<long long>(r.c.line), Short(r.c.model_name, 20).c_str(),
        Short(r.c.gpu_name, 15).c_str(), static_cast<long long>(r.c.num_gpus),
        Short(r.c.disaggregated
                  ? "disagg " + std::to_string(r.c.prefill_workers) + "P+" +
                        std::to_string(r.c.decode_workers) + "D"
                  : search_spaces::ToString(r.c.config),
              24)
            .c_str(),
        Short(r.c.metric_name, 28).c_str(), r.c.published, r.p.predicted,
        r.p.error_pct);
    out << buf;
  }
  out << "\nper source and metric:\n";
  for (const auto& [key, st] : s.groups) {
    out << "  " << Short(key.first, 70) << " | " << key.second << ": "
        << StatsLine(st) << "\n";
  }
  out << "\nthroughput rows: " << StatsLine(s.throughput) << "\n";
  out << "latency rows:    " << StatsLine(s.latency) << "\n";
  out << "all rows:        " << StatsLine(s.all) << "\n";
  if (!s.skipped.empty()) {
    out << "\nskipped:\n";
    for (const auto& [reason, n] : s.skipped) {
      out << "  " << n << " x " << reason << "\n";
    }
  }
}

nlohmann::json ServingAccuracyToJson(const std::vector<ServingRowResult>& rows,
                                     const ServingSummary& s) {
  nlohmann::json out;
  out["rows"] = nlohmann::json::array();
  for (const ServingRowResult& r : rows) {
    nlohmann::json j = {
        {"line", r.c.line},          {"source", r.c.source},
        {"model", r.c.model_name},   {"gpu", r.c.gpu_name},
        {"num_gpus", r.c.num_gpus},  {"metric", r.c.metric_name},
        {"published", r.c.published}};
    if (r.p.skipped_reason.empty()) {
      j["predicted"] = r.p.predicted;
      j["error_pct"] = r.p.error_pct;
      j["layout"] =
          r.c.disaggregated
              ? "prefill " + search_spaces::ToString(r.c.prefill_config) +
                    " x" + std::to_string(r.c.prefill_workers) + ", decode " +
                    search_spaces::ToString(r.c.config) + " x" +
                    std::to_string(r.c.decode_workers)
              : search_spaces::ToString(r.c.config);
    } else {
      j["skipped"] = r.p.skipped_reason;
    }
    out["rows"].push_back(std::move(j));
  }
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& [key, st] : s.groups) {
    nlohmann::json g = StatsJson(st);
    g["source"] = key.first;
    g["metric"] = key.second;
    groups.push_back(std::move(g));
  }
  nlohmann::json skipped = nlohmann::json::object();
  for (const auto& [reason, n] : s.skipped) skipped[reason] = n;
  out["summary"] = {{"all", StatsJson(s.all)},
                    {"throughput", StatsJson(s.throughput)},
                    {"latency", StatsJson(s.latency)},
                    {"groups", groups},
                    {"skipped", skipped}};
  return out;
}

}  // namespace meshtune::tuner
