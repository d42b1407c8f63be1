// CUDA state of CudaBackend shared by cuda_backend.cu (GEMM, triad, timing,
// fingerprint) and nccl_collectives.cu (collectives). Internal to cuda/.
#ifndef MESHTUNE_PROFILER_CUDA_CUDA_BACKEND_IMPL_CUH_
#define MESHTUNE_PROFILER_CUDA_CUDA_BACKEND_IMPL_CUH_

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "profiler/backend.h"
#include "profiler/cuda/cuda_backend.h"
#include "search_spaces/status.h"

namespace meshtune::profiler::cuda {

// A cudaMalloc'd buffer on one device, freed on destruction. Owns `ptr`.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  ~DeviceBuffer();

  // Allocates `bytes` on `device`. Out of memory is InvalidArgument naming
  // the size and the device's free memory (the user asked for too big a
  // shape or message), not an abort.
  static StatusOr<DeviceBuffer> Allocate(int device, size_t bytes,
                                         const std::string& what);
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  int device_ = 0;
};

struct CudaBackend::Impl {
  int device_count = 0;
  std::string device_name;  // cudaDeviceProp::name of device 0
  int cc_major = 0, cc_minor = 0;
  // One non-blocking stream and one start/stop event pair per device.
  std::vector<cudaStream_t> streams;
  std::vector<cudaEvent_t> start_events, stop_events;
  cublasLtHandle_t lt = nullptr;  // on device 0
  DeviceBuffer workspace;         // cuBLASLt workspace on device 0
  size_t workspace_bytes = 0;
  // NCCL communicators over devices 0..g-1, by group size g.
  std::map<int64_t, std::vector<ncclComm_t>> comms;
  bool cupti = false;
  int64_t missed_repetitions = 0;

  // Runs `launch` (which enqueues one repetition on streams[0..devices-1])
  // `warmup` times untimed, then `reps` times, each bracketed by CUDA events
  // on every device and by CUPTI timestamps, synchronizing in between.
  Sample TimeRepetitions(int devices, const std::function<void()>& launch,
                         int warmup, int reps);
  // Communicators for devices 0..group_size-1, created on first use.
  const std::vector<ncclComm_t>& Comms(int64_t group_size);
};

// p[i] = value for i < n, on `stream`.
void FillConstant(float* p, size_t n, float value, cudaStream_t stream);
// Elements of p[0..n) that differ from `value`; synchronizes `stream`.
int64_t CountNotEqual(const float* p, size_t n, float value,
                      cudaStream_t stream);

}  // namespace meshtune::profiler::cuda

#endif  // MESHTUNE_PROFILER_CUDA_CUDA_BACKEND_IMPL_CUH_
