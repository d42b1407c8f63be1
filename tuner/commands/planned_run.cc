#include "tuner/commands/planned_run.h"

#include <algorithm>

#include "costmodel/model_stats.h"

namespace meshtune::tuner {

StatusOr<TrainingRun> PlannedRun(const search_spaces::ModelSpec& model,
                                 const search_spaces::TrainingSpec& training,
                                 double step_time_s, int64_t time_limit_s,
                                 int64_t save_interval) {
  TrainingRunInputs r;
  r.model = model;
  r.training = training;
  // Active parameters: GPT-3's rule is for dense models, and a MoE model's
  // step updates what its tokens pass through.
  r.parameters = costmodel::ComputeModelStats(
                     model, costmodel::PaddedVocabSize(model.vocab_size, 1),
                     std::max(training.seq_length, model.seq_length))
                     .active_params;
  r.step_time_s = step_time_s;
  r.time_limit_s = time_limit_s;
  r.save_interval = save_interval;
  return PlanTrainingRun(r);
}

}  // namespace meshtune::tuner
