// Datasheet peaks of a GPU as its driver names it, read from the cluster
// preset that describes it, so the profiler's pct_of_peak columns and the
// cost model's datasheet calibration share one table
// (search_spaces/clusters/*.yaml; search_spaces::ClusterPresetForGpu picks
// the preset).
#ifndef MESHTUNE_PROFILER_PRESET_PEAKS_H_
#define MESHTUNE_PROFILER_PRESET_PEAKS_H_

#include <string>

#include "profiler/backend.h"

namespace meshtune::profiler {

// Dense peak TFLOP/s of `dtype` on the GPU named `device_name` ("NVIDIA
// H200" -> 989 for bf16): fp32 on the CUDA cores, bf16 and fp8 on the
// tensor cores. 0 when no preset describes the GPU or it has no tensor
// cores for `dtype` (an A100's fp8).
double PresetPeakTflops(const std::string& device_name, DType dtype);

}  // namespace meshtune::profiler

#endif  // MESHTUNE_PROFILER_PRESET_PEAKS_H_
