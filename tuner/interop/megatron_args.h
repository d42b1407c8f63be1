// `--format megatron`: the Megatron-LM pretrain_gpt.py arguments for one
// configuration, one per line with trailing backslashes, ready to paste into
// a launch script. Flag names follow megatron/training/arguments.py.
#ifndef MESHTUNE_TUNER_INTEROP_MEGATRON_ARGS_H_
#define MESHTUNE_TUNER_INTEROP_MEGATRON_ARGS_H_

#include <string>
#include <vector>

#include "search_spaces/model_spec.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/training_spec.h"

namespace meshtune::tuner {

// The arguments, each element one line ("--tensor-model-parallel-size 8").
// Every value comes from the three specs; nothing is per model.
// `flash_attention` is what the calibration that ranked the plan assumes
// (costmodel::Calibration::UsesFlashAttention()): true writes
// --attention-backend flash (fused for MLA, see AttentionBackend), false
// --attention-backend unfused.
std::vector<std::string> MegatronArgs(
    const search_spaces::ModelSpec& model,
    const search_spaces::TrainingSpec& training,
    const search_spaces::ParallelConfig& config, bool flash_attention = true);

// Megatron --attention-backend for a model under a calibration that does
// (not) assume a fused flash-attention kernel. FlashAttention-2, which the
// flash calibration's efficiencies come from (costmodel/
// datasheet_calibration.h), needs equal query/key and value head widths;
// MLA's differ (192 vs 128 for DeepSeek-V3), so Transformer Engine runs it
// with its cuDNN fused kernel ("fused"), the same flash-style algorithm.
// Without flash attention: "unfused" (Megatron 2021-22's score-matrix path).
const char* AttentionBackend(const search_spaces::ModelSpec& model,
                             bool flash_attention);

// A number as the shortest text that reads back to the same double
// ("10000", "1.25"); Megatron's int flags (--rotary-base) get an integer.
std::string FormatMegatronNumber(double value);

// The lines joined with " \\\n" continuation (last line without it).
std::string FormatMegatronArgs(const std::vector<std::string>& args);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_INTEROP_MEGATRON_ARGS_H_
