// `--format bridge`: one configuration as Megatron-Bridge recipe overrides,
// the Hydra/OmegaConf `group.field=value` words its training scripts take
// after a recipe (scripts/training/run_recipe.py --recipe
// llama3_70b_pretrain_config model.tensor_model_parallel_size=4 ...; NeMo's
// LLM training runs on Megatron-Bridge). The recipe holds the architecture;
// the overrides set everything the cost model assumed on top of it: the
// parallel plan, batch and sequence, recompute, the distributed optimizer
// and its overlaps, the precision recipe, the attention backend, MoE
// dispatch, communication overlap, CUDA graphs, the tokenizer and the run
// (iterations, learning-rate schedule). docs/export.md maps every key.
#ifndef MESHTUNE_TUNER_INTEROP_BRIDGE_OVERRIDES_H_
#define MESHTUNE_TUNER_INTEROP_BRIDGE_OVERRIDES_H_

#include <string>
#include <vector>

#include "search_spaces/model_spec.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/training_spec.h"
#include "tuner/interop/training_run.h"

namespace meshtune::tuner {

// Megatron-Bridge's mixed-precision preset for a precision
// (megatron.bridge.training.mixed_precision): bf16_mixed,
// bf16_with_fp8_delayed_scaling_mixed, bf16_with_fp8_current_scaling_mixed
// (tensorwise), bf16_with_fp8_subchannel_scaling_mixed (blockwise),
// bf16_with_mxfp8_mixed, bf16_with_nvfp4_mixed, fp16_mixed; with the
// "_bf16_params" modifier when an FP8 preset that gathers FP8 parameters
// runs without them, and "_bf16_grad_reduce" for grad_reduce_in_bf16.
std::string BridgeMixedPrecision(const search_spaces::TrainingSpec& training);

// The overrides, one "group.field=value" word each, shell-quoted where the
// value holds shell syntax (a pipeline layout's '|'). What the cost model
// assumed but Megatron-Bridge cannot take as an override goes to `notes`
// (not null), one sentence each: FP8 parameters with a preset that has
// none, FP8 attention (the mixed-precision preset sets it on the model).
std::vector<std::string> BridgeOverrides(
    const search_spaces::ModelSpec& model,
    const search_spaces::TrainingSpec& training,
    const search_spaces::ParallelConfig& config, bool flash_attention,
    const TrainingRun& run, std::vector<std::string>* notes);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_INTEROP_BRIDGE_OVERRIDES_H_
