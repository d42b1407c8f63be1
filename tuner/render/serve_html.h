// `tune serve --html FILE`: one self-contained HTML page (inline CSS and SVG,
// no script, no network fetch; the page frame of report_html.h) describing a
// serving search (docs/serving.md §6):
//
//   #problem        model, GPUs, GPU kind, ISL/OSL, load, precisions,
//                   targets, what was priced
//   #serve-pareto   output tokens/s per GPU (y) against tokens/s per user
//                   (x): one <circle data-kind="pareto"> per Pareto point,
//                   filled where it meets the targets and hollow where it
//                   misses them, the best plan ringed (data-kind="best"),
//                   the TPOT target drawn where it falls on the x axis
//   #pareto-table   the front as `tune serve` prints it
//   #best           the best plan's memory per GPU and its time: prefill of
//                   one request and the decode step by part
//   #rejected       the rejection reasons with their counts
//   #commands       the engine commands (vLLM, SGLang, TensorRT-LLM), per
//                   role for a disaggregated plan, HTML-escaped
//
// It renders the `tune serve --json` object (tuner/serve/serve_report.h's
// ServeReportJson with its "commands"), not the search's C++ types: the
// dependency rule (docs/design.md) keeps tuner/render below tuner/serve, and
// the JSON is the documented contract both sides already keep. Every plotted
// point carries its numbers as data-* attributes (ms, tokens/s) so that tests
// and people can read them back.
#ifndef MESHTUNE_TUNER_RENDER_SERVE_HTML_H_
#define MESHTUNE_TUNER_RENDER_SERVE_HTML_H_

#include <nlohmann/json.hpp>
#include <string>

#include "tuner/render/report_html.h"

namespace meshtune::tuner {

// The page. `report` is what `tune serve --json` prints (REQUIRES: its keys
// as ServeReportJson writes them, "pareto" not empty; "commands" present
// when "best" is not null). `source` gives the footer's command line and
// version (search_id and db_path are not used).
std::string RenderServeHtml(const nlohmann::json& report,
                            const HtmlReportSource& source);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_RENDER_SERVE_HTML_H_
