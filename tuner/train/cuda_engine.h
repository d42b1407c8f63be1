// The tuner's door to the CUDA training engine (engine/cuda/), which exists
// only in builds that found the CUDA toolkit with cuBLASLt and NCCL. Everything
// CUDA-specific that `tune train --backend cuda` needs goes through here, so
// the commands compile the same with or without it.
#ifndef MESHTUNE_TUNER_TRAIN_CUDA_ENGINE_H_
#define MESHTUNE_TUNER_TRAIN_CUDA_ENGINE_H_

#include <memory>
#include <string>

#include "engine/data/dataset.h"
#include "engine/train_config.h"
#include "engine/trainer.h"
#include "search_spaces/status.h"

namespace meshtune::tuner {

// Whether this tune was built with the CUDA engine.
bool CudaEngineBuilt();

// Whether the CUDA engine can train `config` (before any rank starts):
// engine::cuda::CudaGptModel::CheckSupported, or Unimplemented (exit 1)
// naming the missing toolkit when the engine was not built.
Status CheckCudaSupported(const engine::TrainConfig& config);

// engine::cuda::CreateCudaTrainer (collective over `world`), or the
// Unimplemented above when the engine was not built.
StatusOr<std::unique_ptr<engine::Trainer>> CreateCudaTrainer(
    const engine::TrainConfig& config,
    const engine::data::TokenDataset* dataset, engine::Communicator* world);

// The number of CUDA devices this process sees: 0 without the CUDA engine
// or without a driver.
int LocalGpuCount();

// Device 0's name ("NVIDIA H200"), or "" when there is no device.
std::string LocalGpuName();

// The GPU preset matching device 0's name
// (search_spaces::ClusterPresetForGpu: "NVIDIA H200" -> "h200"), or "" when
// there is no device, no CUDA engine, or no preset for it.
std::string DetectedGpuPreset();

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_TRAIN_CUDA_ENGINE_H_
