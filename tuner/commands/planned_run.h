// The run (tuner/interop/training_run.h) of a model and batch at a predicted
// step time: PlanTrainingRun with the model's active parameter count from
// the cost model (costmodel/model_stats.h). One place for `tune launch`,
// `tune search --format` and `tune export`.
#ifndef MESHTUNE_TUNER_COMMANDS_PLANNED_RUN_H_
#define MESHTUNE_TUNER_COMMANDS_PLANNED_RUN_H_

#include <cstdint>

#include "search_spaces/model_spec.h"
#include "search_spaces/status.h"
#include "search_spaces/training_spec.h"
#include "tuner/interop/training_run.h"

namespace meshtune::tuner {

// No scheduler limit (exports, Kubernetes): a year stands for one job.
inline constexpr int64_t kNoTimeLimitS = 365LL * 86400;

// `save_interval` 0 = about an hour of predicted steps.
StatusOr<TrainingRun> PlannedRun(const search_spaces::ModelSpec& model,
                                 const search_spaces::TrainingSpec& training,
                                 double step_time_s, int64_t time_limit_s,
                                 int64_t save_interval = 0);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_COMMANDS_PLANNED_RUN_H_
