// Presets and spec files: models, clusters and search spaces as YAML.
//
// Preset YAML files live in search_spaces/{models,clusters,spaces}/ and are
// compiled into the binary, so an installed `tune` works from any directory.
// Names match case-insensitively, through aliases; an argument that names an
// existing file (or ends in .yaml/.yml) is read as a user file instead.
// Errors carry `file:line: message` and a hint.
#ifndef MESHTUNE_SEARCH_SPACES_PRESETS_PRESETS_H_
#define MESHTUNE_SEARCH_SPACES_PRESETS_PRESETS_H_

#include <string>
#include <vector>

#include "search_spaces/cluster_spec.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/space/search_space.h"
#include "search_spaces/status.h"

namespace meshtune::search_spaces {

// All built-in presets, in a fixed order (for `tune models` / `tune gpus`).
const std::vector<ModelSpec>& ModelPresets();
const std::vector<ClusterSpec>& ClusterPresets();

// Resolves a preset name, alias or YAML path. Unknown names give NotFound
// with the closest preset names as a hint ("did you mean: gpt3-175b, ...").
StatusOr<ModelSpec> ResolveModel(const std::string& name_or_path);
StatusOr<ClusterSpec> ResolveCluster(const std::string& name_or_path);
// Reads a search-space YAML file (user file or built-in under spaces/).
StatusOr<SearchSpace> ResolveSearchSpace(const std::string& name_or_path);

// The built-in cluster preset for a GPU as drivers and tables name it
// ("NVIDIA H100 80GB HBM3" and "H100-SXM-80GB (DGX-H100)" -> "h100",
// "NVIDIA A100-SXM4-40GB" -> "a100-40g", "GB200 NVL72" -> "gb200",
// "GH200-480GB" -> "gh200", "RTX-PRO-6000-Blackwell-Server" ->
// "rtx-pro-6000"), or "" when no preset describes it. Case-insensitive
// substrings ('-' and '_' read as spaces), tried in the order GH200, GB300,
// GB200, B300, B200, H200, H100, A100, L40S, RTX PRO 6000, so a Grace
// superchip's name is not read as its GPU's. An A100 needs its memory size
// (40GB or 80GB); an H100 PCIe has no preset (the h100 preset is the SXM
// part: other peaks, no NVLink), nor has a GH200 with 144 GB HBM3e (gh200
// is the 96 GB HBM3 part) or an RTX PRO 6000 Workstation or Max-Q Edition
// (the preset is the Server Edition). The one rule for
// `tune accuracy` rows, `tune train --backend cuda` and the CUDA profiler's
// peaks.
std::string ClusterPresetForGpu(const std::string& gpu_name);

// Every key of `model` that ParseModelYaml reads (all but aliases), one
// "key: value" line each with `indent` before it, so that a model written
// into a `tune search --out` file reads back as the same model: MLA ranks,
// MoE routing and layer pattern, hybrid pattern, MTP, tokenizer and the
// learning-rate recipe included. Strings are double-quoted YAML.
std::string ModelToYaml(const ModelSpec& model, const std::string& indent);

// Parse YAML text; `source` names the file in error locations.
StatusOr<ModelSpec> ParseModelYaml(const std::string& text,
                                   const std::string& source);
StatusOr<ClusterSpec> ParseClusterYaml(const std::string& text,
                                       const std::string& source);
StatusOr<SearchSpace> ParseSearchSpaceYaml(const std::string& text,
                                           const std::string& source);

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_PRESETS_PRESETS_H_
