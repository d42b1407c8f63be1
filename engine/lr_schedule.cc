// Learning-rate schedule, following Megatron-LM's
// megatron/core/optimizer_param_scheduler.py (OptimizerParamScheduler.get_lr)
// branch for branch:
//   1. warmup (lr_warmup_iters > 0 and iteration <= lr_warmup_iters):
//      lr · iteration / lr_warmup_iters (Megatron's init_lr is 0);
//   2. constant style: lr (Megatron returns max_lr here, before looking at
//      lr_decay_iters, so a constant schedule never falls to min_lr);
//   3. iteration > lr_decay_iters: min_lr;
//   4. ratio = (iteration − warmup) / (decay_iters − warmup) ∈ [0, 1],
//      linear: min + (max − min)·(1 − ratio),
//      cosine: min + (max − min)·0.5·(cos(π·ratio) + 1).
//
// Iteration indexing: `iteration` plays the role of Megatron's num_steps
// after the scheduler increment, i.e. the lr Megatron logs for iteration k.
// (Megatron's own update at iteration k uses the lr of num_steps = k − 1,
// because training.py steps the scheduler after optimizer.step(); that makes
// its first warmup update a zero-lr step. We use k for both the update and
// the log, so the logged lr is the one applied.)
#include "engine/lr_schedule.h"

#include <cmath>

namespace meshtune::engine {

float LearningRate(const OptimizerConfig& config, int64_t iteration,
                   int64_t train_iters) {
  const double max_lr = config.lr;
  const double min_lr = config.min_lr;
  const int64_t warmup = config.lr_warmup_iters;
  const int64_t decay =
      config.lr_decay_iters > 0 ? config.lr_decay_iters : train_iters;

  if (warmup > 0 && iteration <= warmup) {
    return static_cast<float>(max_lr * static_cast<double>(iteration) /
                              static_cast<double>(warmup));
  }
  if (config.lr_decay_style == OptimizerConfig::DecayStyle::kConstant) {
    return static_cast<float>(max_lr);
  }
  // Past the decay horizon; also covers decay <= warmup, where no decay
  // phase exists (Megatron asserts against it; we fall to min_lr instead of
  // dividing by a non-positive length).
  if (iteration > decay) return static_cast<float>(min_lr);

  // Here warmup < iteration <= decay, so decay − warmup >= 1.
  const double ratio = static_cast<double>(iteration - warmup) /
                       static_cast<double>(decay - warmup);
  double coeff = 0;
  switch (config.lr_decay_style) {
    case OptimizerConfig::DecayStyle::kLinear:
      coeff = 1.0 - ratio;
      break;
    case OptimizerConfig::DecayStyle::kCosine:
      coeff = 0.5 * (std::cos(M_PI * ratio) + 1.0);
      break;
    case OptimizerConfig::DecayStyle::kConstant:
      coeff = 1.0;  // handled above; kept for -Wswitch completeness
      break;
  }
  return static_cast<float>(min_lr + coeff * (max_lr - min_lr));
}

}  // namespace meshtune::engine
