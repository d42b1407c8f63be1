// The "cuda" profiler backend (profiler/backend.h): cuBLASLt GEMMs, a STREAM
// triad kernel and NCCL collectives over the local GPUs, each repetition
// timed by CUPTI kernel records and cross-checked with CUDA events.
//
// Host-only header (no CUDA types): tuner/ reaches the backend through
// MakeBackend("cuda"); tests/profiler/cuda/ include this header for the extra
// diagnostics below. Built only when CMake finds the CUDA toolkit.
//
// Devices: GEMMs and the triad run on device 0; a collective over g GPUs uses
// devices 0..g-1 in one process (ncclCommInitAll, one communicator per device,
// launched inside ncclGroupStart/End from this thread). Communicators are
// created on first use per group size and kept until the backend is destroyed.
//
// Sample.times_s holds CUPTI's per-repetition kernel time (timer "cupti"),
// Sample.check_times_s the CUDA-event time of the same repetitions
// (check_timer "cuda_event"). Without CUPTI (another profiler attached), or
// when CUPTI missed a repetition, times_s are the event times and
// check_times_s stays empty.
#ifndef MESHTUNE_PROFILER_CUDA_CUDA_BACKEND_H_
#define MESHTUNE_PROFILER_CUDA_CUDA_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "profiler/backend.h"
#include "search_spaces/status.h"

namespace meshtune::profiler::cuda {

// Local CUDA devices; 0 when there are none or cudaGetDeviceCount fails (no
// driver, no device, or CUDA_VISIBLE_DEVICES empty). Never aborts.
int LocalGpuCount();

// Elements per rank buffer the backend uses for `bytes` of fp32 data in
// nccl-tests' size convention: floor(bytes / 4) rounded down to a multiple of
// `ranks`, at least `ranks` (one element per rank chunk).
int64_t CollectiveElements(double bytes, int64_t ranks);

class CudaBackend : public ProfilerBackend {
 public:
  // Fails (Unimplemented, with a hint) when no GPU is usable. Enables CUPTI
  // before any CUDA context exists, as CUPTI recommends.
  static StatusOr<std::unique_ptr<CudaBackend>> Create();
  ~CudaBackend() override;

  std::string Name() const override { return "cuda"; }
  StatusOr<results::HardwareFingerprint> Fingerprint() override;
  // Dense tensor-core peak from NVIDIA datasheets by device name (bf16/fp8)
  // and the FP32 CUDA-core peak; 0 for GPUs not in the table.
  double PeakTflops(DType dtype) const override;
  // bf16, fp8 (E4M3 inputs, bf16 output; sm_89+) and fp32; TN layout,
  // cuBLASLt's top heuristic algorithm, 32 MiB workspace.
  StatusOr<Sample> TimeGemm(int64_t m, int64_t n, int64_t k, DType dtype,
                            int warmup, int reps) override;
  StatusOr<Sample> TimeStream(double bytes, int warmup, int reps) override;
  int64_t MaxGroupSize() const override;
  // Also checks the result of the last repetition (every rank's buffer
  // against the value it must hold) and fails with Internal on a mismatch.
  StatusOr<Sample> TimeCollective(Collective op, double bytes,
                                  int64_t group_size, int warmup,
                                  int reps) override;

  // The CUDA engine's kernels (profiler/cuda/engine_kernels.cu); needs the
  // engine's CUDA library in the build.
  StatusOr<Sample> TimeEngineOp(const EngineOpCase& c, bool backward,
                                int warmup, int reps) override;

  // Runs `op` once over `group_size` GPUs on inputs where rank r holds r+1
  // and returns how many output elements differ from the exact result.
  StatusOr<int64_t> CountCollectiveErrors(Collective op, double bytes,
                                          int64_t group_size);

  // Whether CUPTI kernel tracing is on, and its record counters.
  bool cupti_enabled() const;
  uint64_t cupti_dropped_records() const;
  uint64_t cupti_untimed_records() const;
  // Repetitions where CUPTI saw no kernel (event times were used instead).
  int64_t cupti_missed_repetitions() const;

  struct Impl;  // CUDA state, defined in cuda_backend.cu

 private:
  explicit CudaBackend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace meshtune::profiler::cuda

#endif  // MESHTUNE_PROFILER_CUDA_CUDA_BACKEND_H_
