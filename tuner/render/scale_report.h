// `tune scale` results: the best configuration at each GPU count, its
// throughput, MFU, scaling efficiency, days and cost to train, as a table and
// as JSON (the JSON is the input of a later HTML chart).
#ifndef MESHTUNE_TUNER_RENDER_SCALE_REPORT_H_
#define MESHTUNE_TUNER_RENDER_SCALE_REPORT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "costmodel/estimate.h"
#include "tuner/inputs/inputs.h"

namespace meshtune::tuner {

struct ScaleRow {
  int64_t gpus = 0;
  bool feasible = false;
  // When !feasible: why nothing fits (the search's one-line explanation).
  std::string reason;
  costmodel::Estimate best;  // meaningful only when feasible
  // tokens/s/GPU over that of the smallest feasible size (1 at that size).
  double scaling_efficiency = 0;
  std::optional<double> cost_usd;  // days · 24 · gpus · price, with a price
};

struct ScaleReport {
  Inputs first;  // the inputs at the first size: model, GPU, batch, tokens
  bool gbs_from_flag = false;  // --gbs given (else the model's default)
  std::optional<double> price_per_gpu_hour;
  std::vector<ScaleRow> rows;  // ascending GPU count
};

// Fills scaling_efficiency and cost_usd of every feasible row.
void FinishScaleRows(ScaleReport* report);

void PrintScaleTable(std::ostream& out, const ScaleReport& report);

// {"model", "gpu", "global_batch_size", "gbs_fixed_by", "seq_length",
//  "train_tokens", "price_per_gpu_hour"|null, "rows": [{"gpus", "config",
//  "step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "mfu",
//  "scaling_efficiency", "days_to_train", "cost_usd"|null, "feasible",
//  "reason"}]}; the numbers of an infeasible row are null, "config" too.
// "config" and the table's column spell the configuration as `tune search`
// does (search_spaces::ToString: "tp4 pp8 vpp12 cp1 ep1 dp32 sp mbs2 none
// dist_opt").
nlohmann::json ScaleToJson(const ScaleReport& report);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_RENDER_SCALE_REPORT_H_
