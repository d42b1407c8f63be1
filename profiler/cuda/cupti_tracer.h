// CUPTI activity tracing of kernel executions, for the CUDA backend.
// Host-only interface (no CUDA or CUPTI types) so tests compile without nvcc.
//
// What it does (CUPTI Activity API, docs/profiler.md "GPU backend"):
//   Enable()  registers the buffer-request/buffer-complete callbacks and
//             enables CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, which records the
//             start and end of every kernel on every device without
//             serializing them (KIND_KERNEL would), and KIND_MEMCPY (a
//             one-GPU NCCL collective may be a copy, not a kernel).
//   NowNs()   reads CUPTI's clock, the one kernel records are stamped with,
//             so the caller can bracket each repetition (kernel_timing.h).
//   Drain()   flushes every completed buffer (cuptiActivityFlushAll; it does
//             NOT synchronize: synchronize every device first) and hands over
//             the kernel intervals collected since the last Drain().
//
// Why static: CUPTI's buffer callbacks are plain function pointers without a
// user-data argument, and CUPTI allows one activity client per process, so
// the collected records live in one process-wide, mutex-guarded collector.
// Only the CUDA backend uses it, from one thread at a time.
#ifndef MESHTUNE_PROFILER_CUDA_CUPTI_TRACER_H_
#define MESHTUNE_PROFILER_CUDA_CUPTI_TRACER_H_

#include <cstdint>
#include <vector>

#include "profiler/kernel_timing.h"
#include "search_spaces/status.h"

namespace meshtune::profiler::cuda {

class CuptiTracer {
 public:
  // Starts kernel tracing. Returns Unimplemented (with a hint) when CUPTI
  // refuses, e.g. because Nsight Systems or another CUPTI client already
  // subscribed; the backend then times with CUDA events alone. Idempotent.
  static Status Enable();
  // Disables kernel tracing and force-flushes what is left (discarded).
  static void Disable();
  static bool enabled();

  // CUPTI's timestamp in nanoseconds (same clock as kernel records).
  static uint64_t NowNs();

  // Flushes completed activity buffers and returns the kernels recorded
  // since the previous Drain(). Call after synchronizing all devices.
  static std::vector<KernelInterval> Drain();

  // Totals since Enable(): records CUPTI dropped because no buffer was free
  // (cuptiActivityGetNumDroppedRecords), and kernel records without timing
  // (start == 0 or end < start), which are not returned by Drain().
  static uint64_t dropped_records();
  static uint64_t untimed_records();
};

}  // namespace meshtune::profiler::cuda

#endif  // MESHTUNE_PROFILER_CUDA_CUPTI_TRACER_H_
