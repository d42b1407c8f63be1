// The profiler's backend interface (ggml-style): one small virtual class per
// device kind, and a registry that builds a backend by name.
//
// A backend times single operations; it does not sweep, print or store. The
// sweep, the nccl-tests-style output and the results-store rows live above it
// (profiler/sweep.h, tuner/commands/profile.cc), so every backend gets the same
// shapes, statistics and provenance.
//
// Backends:
//   "cpu"  always built: Eigen GEMMs, a STREAM-style triad, steady_clock.
//          Collectives across processes run in meshtune_mpi_bench under
//          mpirun (profiler/mpi_bench_main.cc), not in-process.
//   "cuda" built only when CMake found the CUDA toolkit (profiler/cuda/,
//          cuBLASLt GEMMs, NCCL collectives, CUPTI timing). profiler/
//          CMakeLists.txt compiles profiler/cuda/*.cu (except the standalone
//          gemm_sweep.cu) into meshtune_profiler and defines
//          MESHTUNE_PROFILER_HAVE_CUDA=1; backend.cc then calls
//          MakeCudaBackend(). No static-initializer self-registration: the
//          linker drops unreferenced objects from static libraries. Asking
//          for "cuda" in a build without it is an ordinary Status error, not
//          a link error.
//
// No CUDA, NCCL or MPI header may be included from this file or any other
// host header: the CPU-only build must compile without them.
#ifndef MESHTUNE_PROFILER_BACKEND_H_
#define MESHTUNE_PROFILER_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "search_spaces/collective.h"
#include "search_spaces/status.h"

namespace meshtune::results {
struct HardwareFingerprint;  // results/store.h
}  // namespace meshtune::results

namespace meshtune::profiler {

struct EngineOpCase;  // profiler/engine_ops.h

// Element type of a GEMM's inputs. Names match results::Measurement::dtype.
enum class DType {
  kFp32,  // "fp32"
  kBf16,  // "bf16"
  kFp8,   // "fp8": E4M3 inputs, bf16 output (CUDA only)
};
const char* DTypeName(DType dtype);
// Parses "fp32" | "bf16" | "fp8"; InvalidArgument naming the accepted values.
StatusOr<DType> ParseDType(const std::string& name);

// Collectives, with the op names used in results::Measurement::op
// (search_spaces/collective.h: CollectiveName, ParseCollective,
// AllCollectives in the order the sweeps run them).
using search_spaces::Collective;

// The raw timings of one operation: one entry per timed repetition (after
// warm-up), in seconds. `timer` names the clock ("steady_clock", "cupti",
// "cuda_event", "mpi_wtime"). A backend with a second clock (CUPTI cross-
// checked against CUDA events) fills `check_times_s`/`check_timer` with the
// same repetitions measured by the other clock; otherwise they stay empty.
struct Sample {
  std::vector<double> times_s;
  std::string timer;
  std::vector<double> check_times_s;
  std::string check_timer;
};

class ProfilerBackend {
 public:
  virtual ~ProfilerBackend() = default;

  // "cpu" or "cuda": the registry name, stored as the fingerprint's backend.
  virtual std::string Name() const = 0;

  // Describes the machine this backend measures (CPU model and cores, memory,
  // GPU model and count, driver and library versions). The caller fills in
  // the id with results' hash function if the backend leaves it empty.
  virtual StatusOr<results::HardwareFingerprint> Fingerprint() = 0;

  // Peak dense throughput for `dtype` on this device in TFLOP/s, used for
  // pct_of_peak columns; 0 when unknown (the column then prints "-").
  virtual double PeakTflops(DType dtype) const = 0;

  // Times C[m,n] = A[m,k] * B[k,n] in `dtype`: `warmup` untimed runs, then
  // `reps` timed ones. FLOPs per call are 2*m*n*k (GemmFlops). Unsupported
  // dtypes return Unimplemented naming the dtypes this backend has.
  virtual StatusOr<Sample> TimeGemm(int64_t m, int64_t n, int64_t k,
                                    DType dtype, int warmup, int reps) = 0;

  // Times a STREAM triad a[i] = b[i] + s * c[i] over three arrays of `bytes`
  // bytes each (fp32 elements). Bytes moved per call are 3 * bytes (read b, c;
  // write a), as STREAM counts them (McCalpin, stream.c).
  virtual StatusOr<Sample> TimeStream(double bytes, int warmup, int reps) = 0;

  // Largest collective group this backend can form in this process (the
  // local GPU count for cuda; 1 for cpu, whose collectives need mpirun).
  virtual int64_t MaxGroupSize() const = 0;

  // Times one collective of `bytes` (nccl-tests' size: the full buffer for
  // all_reduce/all_to_all/send_recv, the gathered output for all_gather, the
  // scattered input for reduce_scatter) over `group_size` local devices.
  // group_size > MaxGroupSize() returns InvalidArgument.
  virtual StatusOr<Sample> TimeCollective(Collective op, double bytes,
                                          int64_t group_size, int warmup,
                                          int reps) = 0;

  // Times one of the training engine's own kernels (profiler/engine_ops.h)
  // forward or backward. Backends without the engine's kernels return
  // Unimplemented (the default).
  virtual StatusOr<Sample> TimeEngineOp(const EngineOpCase& c, bool backward,
                                        int warmup, int reps);
};

// 2*m*n*k: one multiply and one add per inner-product term.
double GemmFlops(int64_t m, int64_t n, int64_t k);

// The backend factories. MakeCpuBackend is in cpu_backend.cc. MakeCudaBackend
// is defined in profiler/cuda/ and exists only in builds with
// MESHTUNE_PROFILER_HAVE_CUDA; it returns an error (not a crash) when the
// machine has no usable GPU.
StatusOr<std::unique_ptr<ProfilerBackend>> MakeCpuBackend();
StatusOr<std::unique_ptr<ProfilerBackend>> MakeCudaBackend();

// Builds the backend called `name`. "cuda" in a build without CUDA returns
// Unimplemented: "backend 'cuda' was not built: configure with the CUDA
// toolkit installed (MESHTUNE_ENABLE_CUDA=AUTO or ON)". Other unknown names
// return InvalidArgument listing the built backends.
StatusOr<std::unique_ptr<ProfilerBackend>> MakeBackend(const std::string& name);

// Names of the backends compiled into this binary, sorted.
std::vector<std::string> BuiltBackends();

}  // namespace meshtune::profiler

#endif  // MESHTUNE_PROFILER_BACKEND_H_
