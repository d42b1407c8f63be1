// nccl-tests-style text output of the profiler: a `#` header naming the tool,
// build and hardware, then fixed-width columns with units in their names.
// Rank 0 of the MPI bench and `tune profile` both print through here, so the
// formats stay the same.
#ifndef MESHTUNE_PROFILER_REPORT_H_
#define MESHTUNE_PROFILER_REPORT_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "profiler/backend.h"
#include "profiler/engine_ops.h"
#include "profiler/stats.h"
#include "results/store.h"

namespace meshtune::profiler {

// Compiled-in facts about this build (from CMake).
struct BuildInfo {
  std::string tool_version;  // PROJECT_VERSION
  std::string git_revision;
  std::string build_type;  // CMAKE_BUILD_TYPE, e.g. "Release"
};
BuildInfo GetBuildInfo();

// Provenance for store rows written now by this build.
results::Provenance BuildProvenance();

// The `#` header: tool version and revision, build type (with a warning line
// when it is Debug: timings of an unoptimised build mean little), the
// fingerprint (id, CPU, memory, GPU, driver, library versions) and `extra`
// lines (each printed after "# "). With `extra_only`, only the `extra`
// lines (a second section under a header already printed).
void PrintHeader(std::ostream& out, const BuildInfo& build,
                 const results::HardwareFingerprint& hw,
                 const std::string& extra, bool extra_only = false);

// GEMM table: name, m, n, k, dtype, time_us (median), min_us, p99_us, cv_pct,
// tflops, pct_of_peak ("-" when the peak is unknown).
void PrintGemmTableHeader(std::ostream& out);
void PrintGemmRow(std::ostream& out, const std::string& name, int64_t m,
                  int64_t n, int64_t k, DType dtype, const TimingStats& stats,
                  double peak_tflops);

// Stream table: size_bytes (per array), moved_bytes, time_us, min_us, cv_pct,
// gbps.
void PrintStreamTableHeader(std::ostream& out);
void PrintStreamRow(std::ostream& out, double array_bytes,
                    const TimingStats& stats);

// Collective table (nccl-tests columns): op, size_bytes, ranks, time_us
// (median), min_us, cv_pct, algbw_gbps, busbw_gbps.
void PrintCollectiveTableHeader(std::ostream& out);
void PrintCollectiveRow(std::ostream& out, Collective op, double bytes,
                        int64_t ranks, const TimingStats& stats);

// Engine kernel table (profiler/engine_ops.h): name, op (the store row's),
// shape (elements, or batch_heads x seq x head_dim for attention), time_us
// (median), min_us, cv_pct, ns_per_elem (elementwise) and tflops
// (attention: 2·bh·s²·d causal FLOPs forward, twice that backward, the
// unfused kernel's four GEMMs); "-" where a column does not apply.
void PrintEngineOpTableHeader(std::ostream& out);
void PrintEngineOpRow(std::ostream& out, const EngineOpCase& c, bool backward,
                      const TimingStats& stats);
// Causal self-attention FLOPs of the engine's kernel, as in the table.
double EngineAttentionFlops(int64_t batch_heads, int64_t seq, int64_t head_dim,
                            bool backward);

// "\r  [i/total] label" on `progress` (a terminal line rewritten in place);
// a final newline when i == total.
void PrintProgress(std::ostream& progress, int64_t i, int64_t total,
                   const std::string& label);

}  // namespace meshtune::profiler

#endif  // MESHTUNE_PROFILER_REPORT_H_
