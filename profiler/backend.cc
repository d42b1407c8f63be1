// The backend registry and the name tables of profiler/backend.h.
#include "profiler/backend.h"

#include <string>
#include <vector>

namespace meshtune::profiler {

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFp32:
      return "fp32";
    case DType::kBf16:
      return "bf16";
    case DType::kFp8:
      return "fp8";
  }
  return "?";
}

StatusOr<DType> ParseDType(const std::string& name) {
  for (DType d : {DType::kFp32, DType::kBf16, DType::kFp8}) {
    if (name == DTypeName(d)) return d;
  }
  return Status::InvalidArgument("unknown dtype '" + name + "'",
                                 "use one of: fp32, bf16, fp8");
}

double GemmFlops(int64_t m, int64_t n, int64_t k) {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) *
         static_cast<double>(k);
}

std::vector<std::string> BuiltBackends() {
#if MESHTUNE_PROFILER_HAVE_CUDA
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

StatusOr<std::unique_ptr<ProfilerBackend>> MakeBackend(
    const std::string& name) {
  if (name == "cpu") return MakeCpuBackend();
  if (name == "cuda") {
#if MESHTUNE_PROFILER_HAVE_CUDA
    return MakeCudaBackend();
#else
    return Status::Unimplemented(
        "backend 'cuda' was not built: configure with the CUDA toolkit "
        "installed",
        "reconfigure with -DMESHTUNE_ENABLE_CUDA=AUTO (or ON) on a machine "
        "with nvcc, or use --backend cpu");
#endif
  }
  std::string built;
  for (const std::string& b : BuiltBackends()) {
    built += (built.empty() ? "" : ", ") + b;
  }
  return Status::InvalidArgument("unknown profiler backend '" + name + "'",
                                 "use --backend with one of: " + built);
}

}  // namespace meshtune::profiler
