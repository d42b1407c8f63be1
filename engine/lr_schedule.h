// Learning-rate schedule (Megatron OptimizerParamScheduler): linear warmup
// from 0 to lr over lr_warmup_iters, then decay to min_lr by
// lr_decay_iters (cosine: min + (max−min)·0.5·(1 + cos(π·t)), or linear)
// and min_lr afterwards; the constant style stays at lr throughout.
#ifndef MESHTUNE_ENGINE_LR_SCHEDULE_H_
#define MESHTUNE_ENGINE_LR_SCHEDULE_H_

#include <cstdint>

#include "engine/train_config.h"

namespace meshtune::engine {

// Learning rate used by optimizer step `iteration` (1-based, Megatron's
// iteration counter after the increment). decay_iters = 0 means
// `train_iters`.
float LearningRate(const OptimizerConfig& config, int64_t iteration,
                   int64_t train_iters);

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_LR_SCHEDULE_H_
