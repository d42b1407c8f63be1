// The rules that turn one published-runs CSV row into cost-model inputs
// (`tune accuracy`, tuner/accuracy.h): model preset by normalised name, GPU
// and precision spellings, recompute text, the attention kernel and
// optimizer of the source's software, and the conversion of each published
// metric to seconds per step in the source's own FLOP convention.
#ifndef MESHTUNE_TUNER_ACCURACY_RULES_H_
#define MESHTUNE_TUNER_ACCURACY_RULES_H_

#include <optional>
#include <string>

#include "costmodel/datasheet_calibration.h"
#include "search_spaces/cluster_spec.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/training_spec.h"

namespace meshtune::tuner {

// Lower case without spaces, dots, dashes and underscores: "LLAMA3-70B" and
// "llama3 70b" -> "llama370b".
std::string NormalizeModelName(const std::string& name);
// The model preset whose name or an alias normalises like `name`.
std::optional<search_spaces::ModelSpec> FindModelPreset(
    const std::string& name);
// Cluster preset name for a GPU description ("A100-SXM4-80GB (Selene)" ->
// "a100-80g"); "" when no known GPU is named. Substrings are tried in the
// order GB300, GB200, B300, B200, H200, H100, A100 (so "GB200" is not a
// B200); an A100 needs 40GB or 80GB to pick its preset.
std::string ClusterPresetForGpu(const std::string& gpu);
// "bf16", "fp16 mixed (--fp16)", "mixed (16-bit)", "fp8", "FP8-CS",
// "MXFP8", ...; nullopt when the text names no precision we model.
std::optional<search_spaces::Precision> PrecisionFromText(
    const std::string& text);
// Megatron-LM 2021-22 (sources dated up to 2022, e.g. Narayanan2021,
// Korthikanti2022) ran the unfused softmax attention; later sources and
// undated ones (NeMo containers) run flash attention.
costmodel::AttentionKernel AttentionKernelForSource(const std::string& source);
// Sources whose runs used NeMo recipes (distributed optimizer).
bool IsNemoSource(const std::string& source);
// Recompute column: blank or "none" -> none; "full..." -> full, uniform,
// every layer (what the published scripts set); "selective..." -> selective
// (also Korthikanti's App. C microbatch-level variant, modelled as plain
// selective); nullopt otherwise.
std::optional<search_spaces::Recompute> RecomputeFromText(
    const std::string& text);

// Seconds per step from a published `metric` of `value` for a run of
// `training.num_gpus` GPUs, or nullopt with `reason` set:
//   iteration_time_s, step_time_s   the value
//   tokens_per_sec_per_gpu          gbs·seq/(value·gpus)
//   tflops_per_gpu                  source's FLOPs/(value·1e12·gpus); only
//                                   Narayanan2021 (SC21 eq. 3) is known
//   model_tflops_per_gpu            Megatron model FLOPs (NeMo sources: causal
//                                   attention counted in
//                                   full)/(value·1e12·gpus)
//   mfu_pct, hfu_pct                model/hardware FLOPs over value % of the
//                                   dense bf16 peak (Korthikanti2022 rows:
//                                   the paper's eq. 7/8)
std::optional<double> PublishedStepTime(
    const std::string& source, const std::string& metric, double value,
    const search_spaces::ModelSpec& model,
    const search_spaces::TrainingSpec& training,
    const search_spaces::ParallelConfig& config,
    const search_spaces::ClusterSpec& cluster, std::string* reason);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_ACCURACY_RULES_H_
