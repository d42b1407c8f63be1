// The --out file: the best configuration as YAML with Megatron argument names
// (DESIGN.md §2), readable back by `tune --model FILE` (model: section) and by
// `tune train` later. Sections: model, parallelism, training, cluster; a
// comment header carries the prediction.
#ifndef MESHTUNE_TUNER_REPORT_YAML_H_
#define MESHTUNE_TUNER_REPORT_YAML_H_

#include <string>

#include "costmodel/estimate.h"
#include "search_spaces/status.h"
#include "tuner/inputs.h"

namespace meshtune::tuner {

// The YAML text for `e` (a fitting estimate of `in`).
std::string ConfigToYaml(const Inputs& in, const costmodel::Estimate& e);

// Writes ConfigToYaml to `path`; IoError naming the path on failure.
Status WriteConfigYaml(const std::string& path, const Inputs& in,
                       const costmodel::Estimate& e);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_REPORT_YAML_H_
