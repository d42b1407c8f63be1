// `tune report --html`: one self-contained HTML file (inline CSS and SVG, no
// script, no network fetch) describing a search (docs/report.md):
//
//   #pareto              step time against memory per GPU: the Pareto
//                        frontier, a deterministic sample of the other
//                        feasible candidates and of the out-of-memory ones
//                        (greyed, reason on hover), the usable HBM drawn
//   #time-breakdown      stacked bars of the time terms of the top candidates
//   #memory-breakdown    stacked bars of their memory terms, HBM limit drawn
//   #pipeline-timeline   the best configuration's pipeline schedule per stage
//   #scale               with --scale-gpus: the best configuration per GPU
//                        count, table and chart (tuner/render/scale_html.h)
//   #validation          predicted against measured step time (when runs of
//                        the search's candidates are stored)
//   inputs, rejections, tool version and the command that reproduces it.
//
// Every plotted mark carries data-* attributes with its numbers (seconds,
// GiB) taken from the estimates, so that tests and people can read them
// back from the DOM.
#ifndef MESHTUNE_TUNER_RENDER_REPORT_HTML_H_
#define MESHTUNE_TUNER_RENDER_REPORT_HTML_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "costmodel/estimate.h"
#include "results/store.h"
#include "tuner/inputs/inputs.h"
#include "tuner/render/explain_report.h"
#include "tuner/render/scale_report.h"
#include "tuner/search/search_driver.h"

namespace meshtune::tuner {

// Where the report came from, printed in its footer.
struct HtmlReportSource {
  std::string command;    // the exact command line that reproduces it
  std::string version;    // "tune X (revision)"
  int64_t search_id = 0;  // the recorded search; 0 = searched directly
  std::string db_path;    // the database of search_id
};

struct HtmlReportOptions {
  int64_t top_k = 5;  // candidates in the breakdown bars
  // Most feasible points plotted besides the frontier, and most
  // out-of-memory points: a 175B search has ~10^4 feasible and ~10^5
  // rejected candidates, which would make a file of tens of MB.
  size_t max_feasible_points = 1500;
  size_t max_out_of_memory_points = 500;
};

// Indices into `ranked` of the candidates no other candidate beats on both
// step time and memory per GPU (ties: the better ranked one), ascending
// memory.
std::vector<size_t> ParetoFrontier(
    const std::vector<costmodel::Estimate>& ranked);

// Every `stride`-th of `count` indices from 0 (all when count <= limit),
// skipping those in `exclude` (sorted). stride = ceil(count / limit).
struct Sample {
  std::vector<size_t> indices;
  size_t stride = 1;
};
Sample EveryNth(size_t count, size_t limit, const std::vector<size_t>& exclude);

// The report; `scale` (may be null) adds the scaling section
// (tuner/render/scale_html.h), `explanation` (may be null) the best plan
// against the model's recipe (tuner/render/explain_report.h). REQUIRES:
// result.feasible > 0.
std::string RenderHtmlReport(
    const Inputs& inputs, const SearchResult& result,
    const std::vector<results::PredictedVsMeasured>& validations,
    const HtmlReportSource& source, const HtmlReportOptions& options,
    const ScaleReport* scale = nullptr,
    const PlanExplanation* explanation = nullptr);

// The shared page frame: <!DOCTYPE html>, <head> with the inline style,
// `title` as <title> and <h1>, then `body`.
std::string HtmlPage(const std::string& title, const std::string& body);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_RENDER_REPORT_HTML_H_
