// Human-readable reports on stdout: the resolved inputs, the top-K table, the
// breakdown of one estimate and the search summary line. Fixed-width columns
// with units in the headers; memory in GiB (2^30 bytes).
#ifndef MESHTUNE_TUNER_RENDER_REPORT_TABLE_H_
#define MESHTUNE_TUNER_RENDER_REPORT_TABLE_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "costmodel/estimate.h"
#include "tuner/inputs/inputs.h"
#include "tuner/search/search_driver.h"

namespace meshtune::tuner {

// "300 B", "1.4 T", "500 M": a token count for people.
std::string FormatTokenCount(double tokens);

// The inputs as resolved: model (display name, parameter count), GPU preset
// (marked "(default)" when --gpu was absent), GPUs and nodes, gbs, seq,
// precision, token budget and calibration source.
void PrintInputsHeader(std::ostream& out, const Inputs& in,
                       const std::string& calibration);

// The full search report: header, top-K table, breakdown of the best and the
// "evaluated N configurations in X ms" line. REQUIRES: result.feasible > 0.
void PrintSearchReport(std::ostream& out, const Inputs& in,
                       const SearchResult& result, int64_t top_k);

// One estimate: header, breakdown (time parts in s and % of step, memory
// parts in GiB against usable), throughput, days to train.
void PrintEstimateReport(std::ostream& out, const Inputs& in,
                         const costmodel::Estimate& e);

// Just the breakdown block (used by both reports).
void PrintBreakdown(std::ostream& out, const Inputs& in,
                    const costmodel::Estimate& e);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_RENDER_REPORT_TABLE_H_
