// The inputs of a configuration file (the YAML `tune search --out` writes,
// tuner/render/report_yaml.h) as a search would have resolved them, for
// `tune launch --config FILE`.
//
// tuner/inputs/train_config_yaml.h reads what the engine trains (model,
// parallelism, batch); the planning keys it only type-checks are read here:
// cluster.preset, cluster.gpus_per_node and training.precision,
// train_tokens, grad_reduce_in_bf16, fp8_param_gather, tp_comm_overlap,
// fp8_dot_product_attention,
// overlap_moe_expert_parallel_comm. The GPU count is the file's parallelism (tp
// x pp x cp x dp).
#ifndef MESHTUNE_TUNER_INPUTS_CONFIG_FILE_INPUTS_H_
#define MESHTUNE_TUNER_INPUTS_CONFIG_FILE_INPUTS_H_

#include <string>

#include "search_spaces/status.h"
#include "tuner/inputs/inputs.h"
#include "tuner/inputs/train_config_yaml.h"

namespace meshtune::tuner {

// `file` as read from `path` by ReadTrainConfigYaml. Errors: a file
// without a model: or cluster: preset (InvalidArgument naming the file and
// the key, hint: write it with tune search --out), and whatever resolving
// the preset or the numbers reports.
StatusOr<Inputs> InputsOfConfigFile(const std::string& path,
                                    const TrainFileConfig& file);

// `--model FILE` reads a model, and a config file written by `tune search
// --out` is one (its model: section). The rest of such a file, above all the
// parallelism: section, is not a model: a search given the file searches
// every configuration again, an estimate takes its pins from flags. A
// Megatron user hands pretrain_gpt.py the model and the parallelism as
// separate arguments and would not expect a model file to pin the search to
// one point of it, but neither should the section vanish without a word.
// So: "" unless `model_flag` names a readable YAML file with a
// parallelism: section; then one line, "tune: warning: best.yaml: --model
// reads only its model: section; its parallelism: section (tp2 sp mbs16) is
// ignored: pin axes with --tp/--pp/..., or use the plan as written with
// tune train --config best.yaml, tune launch --config best.yaml or tune
// compare --config 'tp2 sp mbs16'" (no newline; the compact configuration
// is left out when the section does not parse).
std::string IgnoredParallelismWarning(const std::string& model_flag);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_INPUTS_CONFIG_FILE_INPUTS_H_
