// Kernel timing arithmetic shared by the CUDA backend and its tests: turning
// CUPTI kernel records into one time per timed repetition, and comparing two
// clocks. Host-only (no CUDA types), so it is unit-tested on CPU machines.
//
// How repetitions are attributed (a variant of the "window per case" method in
// docs/profiler.md): the backend reads the CUPTI clock (cuptiGetTimestamp)
// just before it launches repetition i, and synchronizes the devices before
// repetition i+1, so repetition i's kernels start in [begin_i, begin_i+1).
// Records are attributed by their start alone: a kernel's end may be stamped
// a little after the host saw it finish (CUPTI converts GPU timestamps to its
// host clock), and must not drop out. The caller discards the records of
// input fills and warm-up (flushed before the first repetition) and launches
// nothing else until the last repetition's records are flushed.
#ifndef MESHTUNE_PROFILER_KERNEL_TIMING_H_
#define MESHTUNE_PROFILER_KERNEL_TIMING_H_

#include <cstdint>
#include <vector>

namespace meshtune::profiler {

// One kernel execution as CUPTI reports it (CUpti_ActivityKernelN's common
// leading fields). Timestamps are nanoseconds on CUPTI's clock.
struct KernelInterval {
  uint32_t device_id = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

// Seconds per repetition, given each repetition's CUPTI-clock start
// `rep_begin_ns` (increasing): for each repetition, the envelope (earliest
// start to latest end) of its kernels on each device, then the largest
// envelope over devices. The envelope, not the sum of durations, because a
// split-K GEMM or an NCCL group launches several kernels that may overlap;
// the maximum over devices, because a collective finishes when its slowest
// rank does. Records starting before the first repetition are ignored.
// Records with start_ns == 0 or end_ns < start_ns carry no timing (CUPTI
// emits them when it could not time a kernel) and are skipped. A repetition
// without any kernel gets a negative entry (-1): the caller reports that
// CUPTI missed it.
std::vector<double> PerRepetitionKernelTimes_s(
    const std::vector<KernelInterval>& kernels,
    const std::vector<uint64_t>& rep_begin_ns);

// Median of `values` (the mean of the two middle values for an even count);
// 0 for an empty vector.
double RepetitionMedian(std::vector<double> values);

// How well two clocks agree on the same repetitions, in percent:
// 100 * (1 - |median(a) - median(b)| / median(b)). 100 means identical
// medians; the GPU check requires >= 95 for a large GEMM. 0 when either
// vector is empty or median(b) <= 0.
double AgreementPct(const std::vector<double>& a_s,
                    const std::vector<double>& b_s);

}  // namespace meshtune::profiler

#endif  // MESHTUNE_PROFILER_KERNEL_TIMING_H_
