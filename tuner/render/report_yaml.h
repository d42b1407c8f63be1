// The --out file: the best configuration as YAML with Megatron argument names
// (docs/design.md §2), readable back by `tune --model FILE` (model: section)
// and by `tune train --config`. Sections: model, parallelism, training,
// cluster, and search (which recorded search and candidate the configuration
// is, so that `tune train` can store its measured run against that
// prediction; only when the search was recorded); a comment header carries
// the prediction.
#ifndef MESHTUNE_TUNER_RENDER_REPORT_YAML_H_
#define MESHTUNE_TUNER_RENDER_REPORT_YAML_H_

#include <string>

#include "costmodel/estimate.h"
#include "search_spaces/status.h"
#include "tuner/inputs/inputs.h"
#include "tuner/inputs/search_link.h"

namespace meshtune::tuner {

// The YAML text for `e` (a fitting estimate of `in`). `search`, when not
// null, becomes the `search:` section (db, id, rank, candidate_id,
// predicted_step_time_s).
std::string ConfigToYaml(const Inputs& in, const costmodel::Estimate& e,
                         const SearchLink* search = nullptr);

// Writes ConfigToYaml to `path` atomically (tuner/io/output_file.h): errors
// name
// --out; on a failed write the previous file is left as it was.
Status WriteConfigYaml(const std::string& path, const Inputs& in,
                       const costmodel::Estimate& e,
                       const SearchLink* search = nullptr);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_RENDER_REPORT_YAML_H_
