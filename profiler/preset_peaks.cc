#include "profiler/preset_peaks.h"

#include "search_spaces/presets/presets.h"

namespace meshtune::profiler {

double PresetPeakTflops(const std::string& device_name, DType dtype) {
  const std::string preset = search_spaces::ClusterPresetForGpu(device_name);
  if (preset.empty()) return 0;
  for (const search_spaces::ClusterSpec& c : search_spaces::ClusterPresets()) {
    if (c.name != preset) continue;
    switch (dtype) {
      case DType::kFp32:
        return c.gpu.peak_fp32_tflops;
      case DType::kBf16:
        return c.gpu.peak_bf16_tflops;
      case DType::kFp8:
        return c.gpu.peak_fp8_tflops;
    }
  }
  return 0;
}

}  // namespace meshtune::profiler
