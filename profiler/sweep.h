// The profiler's sweeps: which GEMM shapes, stream sizes and collective sizes
// to measure, running them on a backend, printing nccl-tests-style rows and
// returning results-store rows.
#ifndef MESHTUNE_PROFILER_SWEEP_H_
#define MESHTUNE_PROFILER_SWEEP_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "profiler/backend.h"
#include "profiler/stats.h"
#include "results/store.h"
#include "search_spaces/model_spec.h"

namespace meshtune::profiler {

// C[m,n] = A[m,k] * B[k,n], labelled for the output ("qkv.fwd").
struct GemmShape {
  std::string name;
  int64_t m = 0, n = 0, k = 0;
};

// The GEMMs of one transformer layer plus the logits, per tensor-parallel
// rank (Megatron's column/row-parallel split, Narayanan et al. 2021 §3):
// qkv [T,h]x[h,(q+2kv)/tp], proj [T,q/tp]x[q/tp,h], fc1 [T,h]x[h,f'/tp] with
// f' = 2f for SwiGLU (gate and up fused), fc2 [T,f/tp]x[f/tp,h], logits
// [T,h]x[h,V/tp]; T = `tokens` (micro-batch x sequence). Each comes as the
// forward shape and the two backward shapes: dgrad [T,n]x[n,k] and wgrad
// [k,T]x[T,n]. MoE models use the expert FFN width. Duplicates are dropped.
std::vector<GemmShape> TransformerGemmShapes(
    const search_spaces::ModelSpec& model, int64_t tp, int64_t tokens);

// Squares and transformer-like rectangles when no model is given. `quick`
// keeps a few small ones (for tests, well under a second on one core).
std::vector<GemmShape> StandardGemmShapes(bool quick);

// Bytes per array of the stream sweep: 1 MiB .. 256 MiB (quick: 1 .. 4 MiB);
// past the last-level cache, as STREAM requires (4x LLC).
std::vector<double> StandardStreamSizes(bool quick);

struct SweepOptions {
  int warmup = 2;
  int reps = 10;
};

// Runs `shapes` in `dtype` on `backend`, writes one row per shape to `out`
// (after PrintGemmTableHeader) and a progress line per shape to `progress`,
// and returns a Measurement per shape for `hardware_id`.
StatusOr<std::vector<results::Measurement>> RunGemmSweep(
    ProfilerBackend& backend, const std::vector<GemmShape>& shapes, DType dtype,
    const SweepOptions& options, const std::string& hardware_id,
    std::ostream& out, std::ostream& progress);

// The STREAM triad over `sizes` (bytes per array); rows report the bytes
// moved per call (3 arrays) and GB/s.
StatusOr<std::vector<results::Measurement>> RunStreamSweep(
    ProfilerBackend& backend, const std::vector<double>& sizes,
    const SweepOptions& options, const std::string& hardware_id,
    std::ostream& out, std::ostream& progress);

// A Measurement for a collective row (shared by the CUDA sweep and the MPI
// bench): op name, bytes, group size and the statistics of `stats`.
results::Measurement CollectiveMeasurement(Collective op, double bytes,
                                           int64_t group_size, int64_t nodes,
                                           const TimingStats& stats,
                                           const std::string& timer,
                                           const std::string& hardware_id);

}  // namespace meshtune::profiler

#endif  // MESHTUNE_PROFILER_SWEEP_H_
