#include "tuner/train/cuda_engine.h"

#include "search_spaces/presets.h"

#if MESHTUNE_TUNER_HAVE_CUDA_ENGINE
#include "engine/cuda/device.h"
#include "engine/cuda/gpt_model.h"
#include "engine/cuda/trainer.h"
#endif

namespace meshtune::tuner {

bool CudaEngineBuilt() { return MESHTUNE_TUNER_HAVE_CUDA_ENGINE != 0; }

namespace {

[[maybe_unused]] Status NotBuilt() {
  return Status::Unimplemented(
      "this tune was built without the CUDA engine (CMake found no CUDA "
      "toolkit with cuBLASLt and NCCL)",
      "rebuild where the CUDA toolkit is installed (/usr/local/cuda), or "
      "use --backend cpu");
}

}  // namespace

Status CheckCudaSupported(const engine::TrainConfig& config) {
#if MESHTUNE_TUNER_HAVE_CUDA_ENGINE
  return engine::cuda::CudaGptModel::CheckSupported(config);
#else
  (void)config;
  return NotBuilt();
#endif
}

StatusOr<std::unique_ptr<engine::Trainer>> CreateCudaTrainer(
    const engine::TrainConfig& config,
    const engine::data::TokenDataset* dataset, engine::Communicator* world) {
#if MESHTUNE_TUNER_HAVE_CUDA_ENGINE
  return engine::cuda::CreateCudaTrainer(config, dataset, world);
#else
  (void)config;
  (void)dataset;
  (void)world;
  return NotBuilt();
#endif
}

int LocalGpuCount() {
#if MESHTUNE_TUNER_HAVE_CUDA_ENGINE
  return engine::cuda::DeviceCount();
#else
  return 0;
#endif
}

std::string LocalGpuName() {
#if MESHTUNE_TUNER_HAVE_CUDA_ENGINE
  if (engine::cuda::DeviceCount() == 0) return "";
  StatusOr<std::string> name = engine::cuda::DeviceName(0);
  return name.ok() ? name.value() : "";
#else
  return "";
#endif
}

std::string DetectedGpuPreset() {
  const std::string name = LocalGpuName();
  return name.empty() ? "" : search_spaces::ClusterPresetForGpu(name);
}

}  // namespace meshtune::tuner
