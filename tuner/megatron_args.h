// `--format megatron`: the Megatron-LM pretrain_gpt.py arguments for one
// configuration, one per line with trailing backslashes, ready to paste into
// a launch script. Flag names follow megatron/training/arguments.py.
#ifndef MESHTUNE_TUNER_MEGATRON_ARGS_H_
#define MESHTUNE_TUNER_MEGATRON_ARGS_H_

#include <string>
#include <vector>

#include "search_spaces/model_spec.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/training_spec.h"

namespace meshtune::tuner {

// The arguments, each element one line ("--tensor-model-parallel-size 8").
std::vector<std::string> MegatronArgs(
    const search_spaces::ModelSpec& model,
    const search_spaces::TrainingSpec& training,
    const search_spaces::ParallelConfig& config);

// The lines joined with " \\\n" continuation (last line without it).
std::string FormatMegatronArgs(const std::vector<std::string>& args);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_MEGATRON_ARGS_H_
