// CUPTI kernel tracing (cupti_tracer.h) and the vendor-call failure printer
// of cuda_check.cuh.
//
// Call sequence after the CUPTI activity_trace_async sample and Kineto's
// CuptiActivityApi.cpp: register buffer callbacks, enable CONCURRENT_KERNEL,
// run, cudaDeviceSynchronize, cuptiActivityFlushAll(0), walk each completed
// buffer with cuptiActivityGetNextRecord until CUPTI_ERROR_MAX_LIMIT_REACHED.
#include <cuda.h>  // CUDA_VERSION, which picks the record structs below
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "profiler/cuda/cuda_check.cuh"
#include "profiler/cuda/cupti_tracer.h"

// The kernel record struct is renamed in most CUDA releases; only its common
// leading fields (kind, start, end, deviceId, ...) are read, so every version
// below works. Keep this the ONLY place that names it. Sources: the local
// CUDA 13.0 cupti_activity.h (Kernel10, checked); Kineto's
// DeviceProperties.h (>= 13.1: Kernel11; 12.x: Kernel9); CUPTI-Python 13.4.0
// release notes (Kernel13).
#if CUDA_VERSION >= 13040
using CuptiKernelRecord = CUpti_ActivityKernel13;
#elif CUDA_VERSION >= 13010
using CuptiKernelRecord = CUpti_ActivityKernel11;
#elif CUDA_VERSION >= 13000
using CuptiKernelRecord = CUpti_ActivityKernel10;
#else
using CuptiKernelRecord = CUpti_ActivityKernel9;
#endif
// Memory copies are recorded too: NCCL on a single-rank communicator may copy
// with cudaMemcpyAsync instead of launching a kernel, and a collective's
// repetition must still have a CUPTI interval. Same rule as above: the local
// 13.0 header has Memcpy6 (Memcpy5 moved to cupti_activity_deprecated.h).
#if CUDA_VERSION >= 13000
using CuptiMemcpyRecord = CUpti_ActivityMemcpy6;
#else
using CuptiMemcpyRecord = CUpti_ActivityMemcpy5;
#endif

namespace meshtune::profiler::cuda {

void FailVendorCall(const char* expression, const char* file, int line,
                    const char* message) {
  char host[256] = "unknown-host";
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  host[sizeof(host) - 1] = '\0';
  std::fprintf(stderr, "%s:%d: [%s] %s failed: %s\n", file, line, host,
               expression, message ? message : "(no message)");
  std::fflush(stderr);
  std::abort();
}

namespace {

// 4 MiB buffers as Kineto uses (CUPTI suggests 1-10 MB): ~12k kernel
// records each, so a flush per case never runs out.
constexpr size_t kBufferBytes = 4u << 20;
// CUPTI requires 8-byte aligned buffers.
constexpr size_t kBufferAlign = 8;

struct Collector {
  std::mutex mu;
  bool enabled = false;
  bool callbacks_registered = false;
  std::vector<KernelInterval> kernels;
  uint64_t dropped = 0;
  uint64_t untimed = 0;
};

Collector& TheCollector() {
  static Collector* collector = new Collector();  // never destroyed: CUPTI
  return *collector;  // may call back from its own thread at exit
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size,
                              size_t* max_records) {
  *buffer =
      static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream_id,
                              uint8_t* buffer, size_t /*size*/,
                              size_t valid_bytes) {
  // Parse outside the lock, then append: this may run on a CUPTI thread.
  std::vector<KernelInterval> parsed;
  uint64_t untimed = 0;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_bytes, &record) ==
         CUPTI_SUCCESS) {
    KernelInterval interval;
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
        record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* kernel = reinterpret_cast<const CuptiKernelRecord*>(record);
      interval = {kernel->deviceId, kernel->start, kernel->end};
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* copy = reinterpret_cast<const CuptiMemcpyRecord*>(record);
      interval = {copy->deviceId, copy->start, copy->end};
    } else {
      continue;
    }
    // start == end == 0 when CUPTI could not time the record (TensorFlow
    // issue #20750); such records are counted and dropped.
    if (interval.start_ns == 0 || interval.end_ns < interval.start_ns) {
      ++untimed;
      continue;
    }
    parsed.push_back(interval);
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) !=
      CUPTI_SUCCESS) {
    dropped = 0;
  }
  std::free(buffer);
  Collector& c = TheCollector();
  std::lock_guard<std::mutex> lock(c.mu);
  c.kernels.insert(c.kernels.end(), parsed.begin(), parsed.end());
  c.untimed += untimed;
  c.dropped += dropped;
}

}  // namespace

Status CuptiTracer::Enable() {
  Collector& c = TheCollector();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.enabled) return Status::Ok();
  if (!c.callbacks_registered) {
    const CUptiResult r =
        cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted);
    if (r != CUPTI_SUCCESS) {
      return Status::Unimplemented(
          std::string("CUPTI activity callbacks refused: ") + CuptiMessage(r),
          "close other profilers (Nsight Systems/Compute) in this process; "
          "timings fall back to CUDA events");
    }
    c.callbacks_registered = true;
  }
  CUptiResult r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r == CUPTI_SUCCESS) {
    r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
    if (r != CUPTI_SUCCESS) {
      (void)cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    }
  }
  if (r != CUPTI_SUCCESS) {
    return Status::Unimplemented(
        std::string("CUPTI kernel tracing unavailable: ") + CuptiMessage(r),
        "close other profilers (Nsight Systems/Compute) in this process; "
        "timings fall back to CUDA events");
  }
  c.enabled = true;
  c.kernels.clear();
  c.dropped = 0;
  c.untimed = 0;
  return Status::Ok();
}

void CuptiTracer::Disable() {
  Collector& c = TheCollector();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (!c.enabled) return;
    c.enabled = false;
  }
  CUPTI_CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CUPTI_CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY));
  // Forced flush hands back incomplete buffers too; their records are
  // dropped since nothing waits for them any more.
  CUPTI_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  std::lock_guard<std::mutex> lock(c.mu);
  c.kernels.clear();
}

bool CuptiTracer::enabled() {
  Collector& c = TheCollector();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.enabled;
}

uint64_t CuptiTracer::NowNs() {
  uint64_t t = 0;
  CUPTI_CHECK(cuptiGetTimestamp(&t));
  return t;
}

std::vector<KernelInterval> CuptiTracer::Drain() {
  // Not under the lock: the flush calls BufferCompleted on this thread.
  CUPTI_CHECK(cuptiActivityFlushAll(0));
  Collector& c = TheCollector();
  std::lock_guard<std::mutex> lock(c.mu);
  std::vector<KernelInterval> out;
  out.swap(c.kernels);
  return out;
}

uint64_t CuptiTracer::dropped_records() {
  Collector& c = TheCollector();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.dropped;
}

uint64_t CuptiTracer::untimed_records() {
  Collector& c = TheCollector();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.untimed;
}

}  // namespace meshtune::profiler::cuda
