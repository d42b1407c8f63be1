#include "engine/backends/registry.h"

#include "engine/inference/cpu_generator.h"

#if MESHTUNE_ENGINE_HAVE_CUDA
#include "engine/cuda/generator.h"
#include "engine/cuda/gpt_model.h"
#include "engine/cuda/runtime/device.h"
#include "engine/cuda/trainer.h"
#endif

namespace meshtune::engine::backends {
namespace {

constexpr bool kCudaBuilt = MESHTUNE_ENGINE_HAVE_CUDA != 0;

// OK for a built backend; why not otherwise.
Status CheckBuilt(const std::string& backend) {
  if (backend == "cpu" || (backend == "cuda" && kCudaBuilt)) {
    return Status::Ok();
  }
  if (backend == "cuda") {
    return Status::Unimplemented(
        "this tune was built without the CUDA engine (CMake found no CUDA "
        "toolkit with cuBLASLt and NCCL)",
        "rebuild where the CUDA toolkit is installed (/usr/local/cuda), or "
        "use --backend cpu");
  }
  std::string names;
  for (const std::string& n : BuiltTrainerBackends()) {
    names += (names.empty() ? "" : ", ") + n;
  }
  return Status::InvalidArgument("unknown engine backend '" + backend + "'",
                                 "use one of: " + names);
}

}  // namespace

std::vector<std::string> BuiltTrainerBackends() {
  if (kCudaBuilt) return {"cpu", "cuda"};
  return {"cpu"};
}

bool TrainerBackendBuilt(const std::string& backend) {
  return CheckBuilt(backend).ok();
}

Status CheckTrainerSupported(const std::string& backend,
                             const TrainConfig& config) {
  MESHTUNE_RETURN_IF_ERROR(CheckBuilt(backend));
#if MESHTUNE_ENGINE_HAVE_CUDA
  if (backend == "cuda") {
    MESHTUNE_RETURN_IF_ERROR(config.Validate());
    return cuda::CudaGptModel::CheckSupported(config);
  }
#endif
  return config.Validate();
}

StatusOr<std::unique_ptr<Trainer>> CreateTrainer(
    const std::string& backend, const TrainConfig& config,
    const data::TokenDataset* dataset, Communicator* world) {
  MESHTUNE_RETURN_IF_ERROR(CheckBuilt(backend));
#if MESHTUNE_ENGINE_HAVE_CUDA
  if (backend == "cuda") {
    return cuda::CreateCudaTrainer(config, dataset, world);
  }
#endif
  return Trainer::Create(config, dataset, world);
}

StatusOr<std::unique_ptr<inference::Generator>> CreateGenerator(
    const std::string& backend, const TrainConfig& config, Communicator* world,
    int64_t batch, int64_t capacity) {
  MESHTUNE_RETURN_IF_ERROR(CheckBuilt(backend));
#if MESHTUNE_ENGINE_HAVE_CUDA
  if (backend == "cuda") {
    return cuda::CreateCudaGenerator(config, world, batch, capacity);
  }
#endif
  auto gen = inference::CpuGenerator::Create(config, world, batch, capacity);
  if (!gen.ok()) return gen.status();
  return std::unique_ptr<inference::Generator>(std::move(gen).value());
}

int CudaDeviceCount() {
#if MESHTUNE_ENGINE_HAVE_CUDA
  return cuda::DeviceCount();
#else
  return 0;
#endif
}

std::string CudaDeviceName() {
#if MESHTUNE_ENGINE_HAVE_CUDA
  if (cuda::DeviceCount() == 0) return "";
  StatusOr<std::string> name = cuda::DeviceName(0);
  return name.ok() ? name.value() : "";
#else
  return "";
#endif
}

}  // namespace meshtune::engine::backends
