// The formats one configuration is exported in, in one place for `tune
// search --format`, `tune export --format` and the HTML report: Megatron-LM
// pretrain_gpt.py arguments (megatron_args.h, with the model's tokenizer and
// the run's schedule), a NeMo megatron_gpt override block
// (nemo_overrides.h) and Megatron-Bridge recipe overrides
// (bridge_overrides.h). docs/export.md describes each.
#ifndef MESHTUNE_TUNER_INTEROP_EXPORT_FORMAT_H_
#define MESHTUNE_TUNER_INTEROP_EXPORT_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "search_spaces/model_spec.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/status.h"
#include "search_spaces/training_spec.h"
#include "tuner/interop/training_run.h"

namespace meshtune::tuner {

enum class ExportFormat { kMegatron, kNemo, kBridge };

// "megatron" / "nemo" / "bridge"; InvalidArgument naming `flag` and the
// formats (`others`, e.g. "table", listed first).
StatusOr<ExportFormat> ParseExportFormat(
    const std::string& text, const std::string& flag,
    const std::vector<std::string>& others);

struct PlanToExport {
  search_spaces::ModelSpec model;
  search_spaces::TrainingSpec training;
  search_spaces::ParallelConfig config;
  int64_t gpus_per_node = 8;
  bool flash_attention = true;  // what the ranking calibration assumes
  TrainingRun run;              // iterations and schedule
};

struct ExportedPlan {
  std::string text;                // what goes to stdout
  std::vector<std::string> notes;  // for stderr, one sentence each
};

// The plan in `format`. Megatron: MegatronArgs, the tokenizer
// (MegatronTokenizerArgs, with $VOCAB_FILE-style variables) and the run
// (--train-iters and the schedule; no checkpoint or job flags, which belong
// to a job: tune launch). NeMo: NemoOverrides (its errors). Bridge:
// BridgeOverrides joined like the Megatron lines.
StatusOr<ExportedPlan> ExportPlan(ExportFormat format,
                                  const PlanToExport& plan);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_INTEROP_EXPORT_FORMAT_H_
