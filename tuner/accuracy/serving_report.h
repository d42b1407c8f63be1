// The serving half of `tune accuracy`'s report: every serving row's
// prediction and error, then the mean absolute percentage error (MAPE) and
// the worst error per source and metric, per metric kind (throughput,
// latency) and the share of rows predicted (docs/accuracy.md "Serving
// rows").
#ifndef MESHTUNE_TUNER_ACCURACY_SERVING_REPORT_H_
#define MESHTUNE_TUNER_ACCURACY_SERVING_REPORT_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "tuner/accuracy/serving_cases.h"

namespace meshtune::tuner {

struct ServingRowResult {
  ServingCase c;
  ServingPrediction p;
};

// Errors of a group of predicted rows, in percent.
struct ServingErrorStats {
  int64_t rows = 0;       // rows of the group, skipped ones included
  int64_t predicted = 0;  // rows with a prediction
  double mape_pct = 0;    // over the predicted rows; 0 when none
  double worst_pct = 0;   // signed error of the largest |error|
  int64_t worst_line = 0;
};

struct ServingSummary {
  ServingErrorStats all, throughput, latency;
  // Per (source, metric).
  std::map<std::pair<std::string, std::string>, ServingErrorStats> groups;
  // Skip reasons and how many rows each skipped.
  std::map<std::string, int64_t> skipped;
};

std::vector<ServingRowResult> PredictServingRows(
    std::vector<ServingCase> cases);
ServingSummary SummarizeServing(const std::vector<ServingRowResult>& rows);

// One line per row, then the groups, the kinds and the skip reasons.
void PrintServingAccuracy(std::ostream& out, const std::string& csv,
                          const std::vector<ServingRowResult>& rows,
                          const ServingSummary& summary);
// {"rows": [...], "summary": {...}} (docs/accuracy.md has the keys).
nlohmann::json ServingAccuracyToJson(const std::vector<ServingRowResult>& rows,
                                     const ServingSummary& summary);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_ACCURACY_SERVING_REPORT_H_
