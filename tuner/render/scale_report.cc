#include "tuner/render/scale_report.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "search_spaces/parallel_config.h"
#include "tuner/io/text_format.h"
#include "tuner/render/model_facts.h"
#include "tuner/render/report_table.h"

namespace meshtune::tuner {
void FinishScaleRows(ScaleReport* report) {
  // The baseline is the smallest size that has a configuration at all: a
  // size too small to hold the model has no throughput to compare with.
  double base_per_gpu = 0;
  for (const ScaleRow& row : report->rows) {
    if (row.feasible) {
      base_per_gpu = row.best.tokens_per_s_per_gpu;
      break;
    }
  }
  for (ScaleRow& row : report->rows) {
    if (!row.feasible) continue;
    row.scaling_efficiency =
        base_per_gpu > 0 ? row.best.tokens_per_s_per_gpu / base_per_gpu : 0;
    if (report->price_per_gpu_hour) {
      row.cost_usd = row.best.days_to_train * 24.0 *
                     static_cast<double>(row.gpus) *
                     *report->price_per_gpu_hour;
    }
  }
}

void PrintScaleTable(std::ostream& out, const ScaleReport& report) {
  const Inputs& in = report.first;
  out << Fmt("model        %s (%s): %s parameters\n",
             in.model.display_name.c_str(), in.model.name.c_str(),
             FormatParameterCount(in.model).c_str());
  out << Fmt("gpu          %s (%s)%s\n", in.cluster.name.c_str(),
             in.cluster.gpu.display_name.c_str(),
             in.gpu_defaulted ? " (default)" : "");
  out << Fmt(
      "batch        global batch %lld sequences of %lld tokens, "
      "fixed at every size (%s)\n",
      static_cast<long long>(in.training.global_batch_size),
      static_cast<long long>(in.training.seq_length),
      report.gbs_from_flag ? "--gbs" : "model default; set --gbs");
  out << Fmt("training     %s tokens, %s\n",
             FormatTokenCount(in.training.train_tokens).c_str(),
             search_spaces::ToString(in.training.precision));
  if (report.price_per_gpu_hour) {
    out << Fmt("price        %.4g USD per GPU-hour\n",
               *report.price_per_gpu_hour);
  }
  out << "\n";
  const bool cost = report.price_per_gpu_hour.has_value();
  // The configuration as `tune search` spells it (search_spaces::ToString,
  // cp and ep included), so a row pastes into --config; the column is as
  // wide as its widest cell.
  int config_width = static_cast<int>(std::strlen("best config"));
  for (const ScaleRow& row : report.rows) {
    if (!row.feasible) continue;
    config_width = std::max(
        config_width,
        static_cast<int>(search_spaces::ToString(row.best.config).size()));
  }
  out << Fmt("%6s  %-*s %8s %10s %8s %6s %6s %8s", "gpus", config_width,
             "best config", "step s", "tokens/s", "tok/s/gpu", "MFU %", "eff %",
             "days");
  if (cost) out << Fmt(" %13s", "cost USD");
  out << "\n";
  for (const ScaleRow& row : report.rows) {
    out << Fmt("%6lld  ", static_cast<long long>(row.gpus));
    if (!row.feasible) {
      out << "no feasible configuration (" << row.reason << ")\n";
      continue;
    }
    const costmodel::Estimate& e = row.best;
    out << Fmt("%-*s %8.3f %10.0f %9.1f %6.1f %6.1f %8.1f", config_width,
               search_spaces::ToString(e.config).c_str(), e.step_time_s,
               e.tokens_per_s, e.tokens_per_s_per_gpu, 100.0 * e.mfu,
               100.0 * row.scaling_efficiency, e.days_to_train);
    if (row.cost_usd) out << Fmt(" %13.0f", *row.cost_usd);
    out << "\n";
  }
  out << "\neff %: tokens/s per GPU relative to the smallest feasible size.";
  if (cost) out << " cost: days x 24 x gpus x price.";
  out << "\n";
}

nlohmann::json ScaleToJson(const ScaleReport& report) {
  const Inputs& in = report.first;
  nlohmann::json j;
  j["model"] = in.model.name;
  j["gpu"] = in.cluster.name;
  j["global_batch_size"] = in.training.global_batch_size;
  j["gbs_fixed_by"] = report.gbs_from_flag ? "flag" : "model_default";
  j["seq_length"] = in.training.seq_length;
  j["train_tokens"] = in.training.train_tokens;
  j["price_per_gpu_hour"] = report.price_per_gpu_hour
                                ? nlohmann::json(*report.price_per_gpu_hour)
                                : nlohmann::json(nullptr);
  nlohmann::json rows = nlohmann::json::array();
  for (const ScaleRow& row : report.rows) {
    nlohmann::json r;
    r["gpus"] = row.gpus;
    r["feasible"] = row.feasible;
    r["reason"] = row.reason;
    const nlohmann::json null(nullptr);
    const costmodel::Estimate& e = row.best;
    r["config"] =
        row.feasible ? nlohmann::json(search_spaces::ToString(e.config)) : null;
    r["step_time_s"] = row.feasible ? nlohmann::json(e.step_time_s) : null;
    r["tokens_per_s"] = row.feasible ? nlohmann::json(e.tokens_per_s) : null;
    r["tokens_per_s_per_gpu"] =
        row.feasible ? nlohmann::json(e.tokens_per_s_per_gpu) : null;
    r["mfu"] = row.feasible ? nlohmann::json(e.mfu) : null;
    r["scaling_efficiency"] =
        row.feasible ? nlohmann::json(row.scaling_efficiency) : null;
    r["days_to_train"] = row.feasible ? nlohmann::json(e.days_to_train) : null;
    r["cost_usd"] = row.cost_usd ? nlohmann::json(*row.cost_usd) : null;
    rows.push_back(r);
  }
  j["rows"] = rows;
  return j;
}

}  // namespace meshtune::tuner
