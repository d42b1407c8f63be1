// The training loop on one GPU (CUDA backend): the CPU Trainer's interface
// (engine/trainer.h) and its loop (engine/step_loop.h: the same data order
// through Megatron's pretraining sampler, loss, logs, checkpoints and stop
// signals), with micro-batch accumulation, loss scaling, global-norm
// clipping, AdamW and learning-rate schedule; the model and the optimizer
// on the device (engine/cuda/gpt_model.h, adamw.cu). Parameters
// start from the CPU model's initialization, so a CPU and a GPU run of the
// same config begin from the same weights and their losses can be compared.
#ifndef MESHTUNE_ENGINE_CUDA_TRAINER_H_
#define MESHTUNE_ENGINE_CUDA_TRAINER_H_

#include <memory>

#include "engine/comm/communicator.h"
#include "engine/data/dataset.h"
#include "engine/train_config.h"
#include "engine/trainer.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

// Collective over `world` (one rank per GPU; size == config.parallel.world();
// nullptr = a single process). Data parallelism over the ranks: each rank
// takes its micro-batches of the global batch (Megatron's sampler) on the
// GPU its node-local rank names, and the fp32 gradients are all-reduced
// over dp with NCCL before the optimizer step. Errors: a configuration the
// CUDA backend cannot run yet (CudaGptModel::CheckSupported), no GPU, out
// of device memory. `dataset` and `world` are not owned and must outlive
// the trainer.
StatusOr<std::unique_ptr<Trainer>> CreateCudaTrainer(
    const TrainConfig& config, const data::TokenDataset* dataset,
    Communicator* world = nullptr);

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_TRAINER_H_
