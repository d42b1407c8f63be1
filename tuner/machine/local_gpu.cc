#include "tuner/machine/local_gpu.h"

#include "engine/backends/registry.h"
#include "search_spaces/presets/presets.h"

namespace meshtune::tuner {

std::string DetectedGpuPreset() {
  const std::string name = engine::backends::CudaDeviceName();
  return name.empty() ? "" : search_spaces::ClusterPresetForGpu(name);
}

}  // namespace meshtune::tuner
