// GPU device memory and streams for the CUDA backend of the training engine,
// behind plain C++ types: callers (the engine, tests) never include CUDA
// headers (ggml's rule), so the CPU-only build and the CUDA build share every
// header.
//
// Errors a user can cause (no GPU, out of device memory) come back as Status;
// a failing kernel launch or copy after that is reported through
// LastError()/Synchronize() Status values too, so tests print the CUDA
// message instead of aborting.
#ifndef MESHTUNE_ENGINE_CUDA_RUNTIME_DEVICE_H_
#define MESHTUNE_ENGINE_CUDA_RUNTIME_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

// A cudaStream_t, opaque here. nullptr is the legacy default stream.
using Stream = void*;

// GPUs the CUDA runtime sees; 0 when there is no driver or no device (never
// an error: CI machines have the toolkit and no GPU).
int DeviceCount();

// Ok when there is a device, else the one error every CUDA entry point gives
// without one: "no CUDA device: cudaGetDeviceCount found none" (input error,
// with the hint to use the CPU backend).
Status RequireDevice();

// Makes device `index` current for this host thread (cudaSetDevice).
Status SetDevice(int index);

// "NVIDIA H200 (sm_90, 139.8 GiB)" for device `index`, or the CUDA error.
StatusOr<std::string> DeviceName(int index);

// Waits for all work on the current device; the first pending error (a
// failed kernel, an illegal address) as a Status naming `what`.
Status Synchronize(const char* what);

// The launch error of the last kernel (cudaGetLastError), naming `op`:
// "cuda op 'layernorm_forward' failed: invalid configuration argument".
Status LastError(const char* op);

// Owns `bytes` of device memory (cudaMalloc); movable, not copyable.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Errors: no device ("no CUDA device ..."), out of memory (names the size
  // and the free memory).
  static StatusOr<DeviceBuffer> Allocate(size_t bytes);

  // Synchronous copies of `bytes` (at most size_bytes()).
  Status CopyFromHost(const void* src, size_t bytes);
  Status CopyToHost(void* dst, size_t bytes) const;
  // Sets every byte to zero.
  Status Zero();

  void* data() const { return ptr_; }
  size_t size_bytes() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Uploads through a page-locked host buffer of `bytes` (cudaMallocHost):
// Copy waits only for this buffer's previous copy (an event), fills the
// buffer and enqueues the copy on `stream`, so the host goes on without
// waiting for the GPU's other work, as a pageable cudaMemcpy would (it
// first drains the legacy stream). Move-only; one per buffer that is
// refilled while earlier copies may still be queued.
class PinnedUpload {
 public:
  PinnedUpload() = default;
  ~PinnedUpload();
  PinnedUpload(PinnedUpload&& other) noexcept;
  PinnedUpload& operator=(PinnedUpload&& other) noexcept;
  PinnedUpload(const PinnedUpload&) = delete;
  PinnedUpload& operator=(const PinnedUpload&) = delete;

  // Errors: no device, or no page-locked memory left.
  static StatusOr<PinnedUpload> Create(size_t bytes);

  // src[bytes] (host) -> dst (device, at least `bytes`), ordered on
  // `stream`. `src` may be reused as soon as this returns. Errors: more
  // than the buffer's bytes, a CUDA error.
  Status Copy(const void* src, void* dst, size_t bytes, Stream stream);

 private:
  void Release();
  void* host_ = nullptr;  // page-locked, bytes_
  size_t bytes_ = 0;
  void* event_ = nullptr;  // cudaEvent_t after host_'s last copy
};

// A stream that does not synchronize with the legacy default stream (so
// work on it, such as NCCL gradient reductions, overlaps the kernels on
// the default stream); DestroyStream releases it.
StatusOr<Stream> CreateNonBlockingStream();
void DestroyStream(Stream stream);

// Makes `waiter` wait (asynchronously) for the work enqueued on `producer`
// so far: an event recorded on producer, waited on by waiter.
Status WaitForStream(Stream waiter, Stream producer);

// Synchronous copies between a host pointer and a device pointer (anywhere
// inside a DeviceBuffer).
Status CopyHostToDevice(void* dst, const void* src, size_t bytes);
Status CopyDeviceToHost(void* dst, const void* src, size_t bytes);

// Copies `bytes` between device buffers, asynchronously on `stream`.
Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes,
                          Stream stream);

// Copies between a host pointer and a device pointer ordered on `stream`
// (after its earlier work, before its later work). The host memory must stay
// valid until the stream is synchronized: with pageable host memory the
// runtime may return before the copy is done.
Status CopyDeviceToHostAsync(void* dst, const void* src, size_t bytes,
                             Stream stream);
Status CopyHostToDeviceAsync(void* dst, const void* src, size_t bytes,
                             Stream stream);

// Waits for the work enqueued on `stream` so far (cudaStreamSynchronize;
// nullptr is the legacy default stream); the first pending error as a
// Status naming `what`.
Status SynchronizeStream(Stream stream, const char* what);

// Allocates a buffer holding `host` (bytes = host.size() · sizeof(T)).
template <typename T>
StatusOr<DeviceBuffer> Upload(const std::vector<T>& host) {
  auto buffer = DeviceBuffer::Allocate(host.size() * sizeof(T));
  if (!buffer.ok()) return buffer.status();
  Status st = buffer->CopyFromHost(host.data(), host.size() * sizeof(T));
  if (!st.ok()) return st;
  return std::move(buffer).value();
}

// Copies `count` elements of T back from the start of `buffer`.
template <typename T>
StatusOr<std::vector<T>> Download(const DeviceBuffer& buffer, size_t count) {
  std::vector<T> host(count);
  Status st = buffer.CopyToHost(host.data(), count * sizeof(T));
  if (!st.ok()) return st;
  return host;
}

}  // namespace meshtune::engine::cuda

// Allocates `bytes` of device memory into the DeviceBuffer `target`, or
// returns the allocation's Status.
#define MESHTUNE_ASSIGN_BUFFER(target, bytes) \
  MESHTUNE_ASSIGN_OR_RETURN(                  \
      target, ::meshtune::engine::cuda::DeviceBuffer::Allocate(bytes))

#endif  // MESHTUNE_ENGINE_CUDA_RUNTIME_DEVICE_H_
