// The scaling section of the HTML report (`tune report --html F ...
// --scale-gpus 64,128,...`, docs/report.md): `tune scale`'s rows as a table
// and as a chart of tokens/s per GPU and scaling efficiency against the GPU
// count.
#ifndef MESHTUNE_TUNER_RENDER_SCALE_HTML_H_
#define MESHTUNE_TUNER_RENDER_SCALE_HTML_H_

#include <string>

#include "tuner/render/scale_report.h"

namespace meshtune::tuner {

// An <h2>, an <svg id="scale"> with one <circle data-kind="scale"
// data-gpus data-tokens-per-s-per-gpu data-scaling-efficiency
// data-step-time-s> per feasible size (GPU counts evenly spaced, in order),
// and a table with every size, the infeasible ones with their reason.
std::string ScaleSectionHtml(const ScaleReport& report);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_RENDER_SCALE_HTML_H_
