// Summary statistics of repeated timings, and the nccl-tests bandwidth
// conventions (algbw, busbw) used by the collective sweeps.
#ifndef MESHTUNE_PROFILER_STATS_H_
#define MESHTUNE_PROFILER_STATS_H_

#include <cstdint>
#include <vector>

#include "profiler/backend.h"

namespace meshtune::profiler {

// Summary of n timings (seconds).
struct TimingStats {
  int64_t samples = 0;
  double median_s = 0;  // middle value; mean of the two middle ones if n even
  double min_s = 0;
  double p99_s = 0;  // nearest-rank 99th percentile: sorted[ceil(0.99 n) - 1]
  double mean_s = 0;
  double cv = 0;  // sample standard deviation (n-1) / mean; 0 when n < 2
};

// Summarises `times_s` (any order). An empty vector gives all zeros.
TimingStats Summarize(std::vector<double> times_s);

// nccl-tests' bus-bandwidth factor for `op` over `ranks` ranks
// (nccl-tests doc/PERFORMANCE.md): all_reduce 2(n-1)/n; all_gather,
// reduce_scatter and all_to_all (n-1)/n; send_recv 1. With one rank nothing
// crosses a wire and every factor but send_recv's is 0.
double BusFactor(Collective op, int64_t ranks);

// Algorithm bandwidth in GB/s (1e9 bytes/s): the size nccl-tests uses for the
// op (see ProfilerBackend::TimeCollective) divided by the time.
double AlgBwGbps(double bytes, double time_s);
// algbw * BusFactor: comparable across ops and to the link's peak.
double BusBwGbps(Collective op, int64_t ranks, double bytes, double time_s);

// TFLOP/s of a GEMM of `flops` taking `time_s`.
double Tflops(double flops, double time_s);

// Message sizes from `min_bytes` to `max_bytes`, doubling (nccl-tests
// `-b min -e max -f 2`). Both must be >= 1 and min <= max.
std::vector<double> DoublingSizes(double min_bytes, double max_bytes);

}  // namespace meshtune::profiler

#endif  // MESHTUNE_PROFILER_STATS_H_
