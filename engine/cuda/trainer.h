// The training loop on one GPU (CUDA backend): the CPU Trainer's interface
// (engine/trainer.h) and semantics — the same data order (Megatron's
// pretraining sampler), micro-batch accumulation, loss scaling, global-norm
// clipping, AdamW and learning-rate schedule — with the model and the
// optimizer on the device (engine/cuda/gpt_model.h, adamw.cu). Parameters
// start from the CPU model's initialization, so a CPU and a GPU run of the
// same config begin from the same weights and their losses can be compared.
#ifndef MESHTUNE_ENGINE_CUDA_TRAINER_H_
#define MESHTUNE_ENGINE_CUDA_TRAINER_H_

#include <memory>

#include "engine/data/dataset.h"
#include "engine/train_config.h"
#include "engine/trainer.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

// Errors: a configuration the CUDA backend cannot run yet
// (CudaGptModel::CheckSupported), no GPU, out of device memory. `dataset`
// is not owned and must outlive the trainer.
StatusOr<std::unique_ptr<Trainer>> CreateCudaTrainer(
    const TrainConfig& config, const data::TokenDataset* dataset);

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_TRAINER_H_
