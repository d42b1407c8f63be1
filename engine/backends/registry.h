// The engine's training backends by name, so that callers choose one at run
// time without knowing which were built (as profiler/backend.h does for the
// profiler): "cpu" (engine/, always built) and "cuda" (engine/cuda/, built
// where CMake found the CUDA toolkit with cuBLASLt and NCCL). The only
// place outside engine/cuda/ that knows whether the CUDA engine exists.
#ifndef MESHTUNE_ENGINE_BACKENDS_REGISTRY_H_
#define MESHTUNE_ENGINE_BACKENDS_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/data/dataset.h"
#include "engine/inference/generator.h"
#include "engine/train_config.h"
#include "engine/trainer.h"
#include "search_spaces/status.h"

namespace meshtune::engine::backends {

// Names of the backends built into this binary, sorted: {"cpu"} or
// {"cpu", "cuda"}.
std::vector<std::string> BuiltTrainerBackends();

// Whether `backend` was built.
bool TrainerBackendBuilt(const std::string& backend);

// Whether `backend` can train `config`, checked before any rank starts:
// TrainConfig::Validate, and for "cuda" then CudaGptModel::CheckSupported.
// A backend that was not built is Unimplemented (exit 1) naming the missing
// toolkit; an unknown name is InvalidArgument listing the built ones.
Status CheckTrainerSupported(const std::string& backend,
                             const TrainConfig& config);

// The backend's trainer (collective over `world`, whose size must be
// config.parallel.world()): Trainer::Create for "cpu",
// cuda::CreateCudaTrainer for "cuda". `dataset` and `world` are not owned
// and must outlive the trainer. Errors as CheckTrainerSupported.
StatusOr<std::unique_ptr<Trainer>> CreateTrainer(
    const std::string& backend, const TrainConfig& config,
    const data::TokenDataset* dataset, Communicator* world);

// The backend's generator (engine/inference/generator.h; collective over
// `world`, its tp ranks): inference::CpuGenerator::Create for "cpu",
// cuda::CreateCudaGenerator for "cuda". Errors as CheckTrainerSupported's
// for the backend, then the generator's.
StatusOr<std::unique_ptr<inference::Generator>> CreateGenerator(
    const std::string& backend, const TrainConfig& config, Communicator* world,
    int64_t batch, int64_t capacity);
// The CUDA devices this process sees: 0 without the CUDA backend or
// without a driver.
int CudaDeviceCount();

// Device 0's name ("NVIDIA H200"), or "" when there is no device.
std::string CudaDeviceName();

}  // namespace meshtune::engine::backends

#endif  // MESHTUNE_ENGINE_BACKENDS_REGISTRY_H_
