// This machine's GPU as a cluster preset, for the commands that run on it
// (`tune train --backend cuda`, `tune validate --backend cuda`) when no
// --gpu is given.
#ifndef MESHTUNE_TUNER_MACHINE_LOCAL_GPU_H_
#define MESHTUNE_TUNER_MACHINE_LOCAL_GPU_H_

#include <string>

namespace meshtune::tuner {

// The GPU preset matching device 0's name (search_spaces::
// ClusterPresetForGpu: "NVIDIA H200" -> "h200"), or "" when there is no
// device, no CUDA engine (engine/backends/registry.h), or no preset for it.
std::string DetectedGpuPreset();

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_MACHINE_LOCAL_GPU_H_
