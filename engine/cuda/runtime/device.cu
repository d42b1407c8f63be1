#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/vendor_status.cuh"

namespace meshtune::engine::cuda {
namespace {

std::string GiB(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

}  // namespace

int DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

Status SetDevice(int index) {
  return CudaStatus(cudaSetDevice(index),
                    "cudaSetDevice(" + std::to_string(index) + ")");
}

StatusOr<std::string> DeviceName(int index) {
  cudaDeviceProp prop;
  const cudaError_t err = cudaGetDeviceProperties(&prop, index);
  if (err != cudaSuccess) {
    return CudaStatus(err, "cudaGetDeviceProperties");
  }
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + ", " + GiB(prop.totalGlobalMem) + ")";
}

Status RequireDevice() {
  if (DeviceCount() > 0) return Status::Ok();
  return Status::InvalidArgument(
      "no CUDA device: cudaGetDeviceCount found none",
      "run on a machine with an NVIDIA GPU and driver, or use the CPU "
      "backend (--backend cpu)");
}

Status Synchronize(const char* what) {
  return CudaStatus(cudaDeviceSynchronize(), std::string("op '") + what + "'");
}

Status LastError(const char* op) {
  return CudaStatus(cudaGetLastError(), std::string("op '") + op + "'");
}

StatusOr<Stream> CreateNonBlockingStream() {
  cudaStream_t stream = nullptr;
  const cudaError_t err =
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (err != cudaSuccess) return CudaStatus(err, "cudaStreamCreateWithFlags");
  return static_cast<Stream>(stream);
}

void DestroyStream(Stream stream) {
  if (stream != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}

Status WaitForStream(Stream waiter, Stream producer) {
  cudaEvent_t event;
  MESHTUNE_RETURN_IF_ERROR(
      CudaStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                 "cudaEventCreateWithFlags"));
  Status st =
      CudaStatus(cudaEventRecord(event, static_cast<cudaStream_t>(producer)),
                 "cudaEventRecord");
  if (st.ok()) {
    st = CudaStatus(
        cudaStreamWaitEvent(static_cast<cudaStream_t>(waiter), event, 0),
        "cudaStreamWaitEvent");
  }
  cudaEventDestroy(event);  // released once the recorded work completes
  return st;
}

Status CopyHostToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  return CudaStatus(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice),
                    "cudaMemcpy host to device");
}

Status CopyDeviceToHost(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  return CudaStatus(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost),
                    "cudaMemcpy device to host");
}

Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes,
                          Stream stream) {
  if (bytes == 0) return Status::Ok();
  return CudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                                    static_cast<cudaStream_t>(stream)),
                    "cudaMemcpyAsync device to device");
}

Status CopyDeviceToHostAsync(void* dst, const void* src, size_t bytes,
                             Stream stream) {
  if (bytes == 0) return Status::Ok();
  return CudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost,
                                    static_cast<cudaStream_t>(stream)),
                    "cudaMemcpyAsync device to host");
}

Status CopyHostToDeviceAsync(void* dst, const void* src, size_t bytes,
                             Stream stream) {
  if (bytes == 0) return Status::Ok();
  return CudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                                    static_cast<cudaStream_t>(stream)),
                    "cudaMemcpyAsync host to device");
}

PinnedUpload::~PinnedUpload() { Release(); }

void PinnedUpload::Release() {
  if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
  if (host_ != nullptr) cudaFreeHost(host_);
  event_ = host_ = nullptr;
  bytes_ = 0;
}

PinnedUpload::PinnedUpload(PinnedUpload&& other) noexcept
    : host_(std::exchange(other.host_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      event_(std::exchange(other.event_, nullptr)) {}

PinnedUpload& PinnedUpload::operator=(PinnedUpload&& other) noexcept {
  if (this != &other) {
    Release();
    host_ = std::exchange(other.host_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

StatusOr<PinnedUpload> PinnedUpload::Create(size_t bytes) {
  MESHTUNE_RETURN_IF_ERROR(RequireDevice());
  PinnedUpload upload;
  MESHTUNE_RETURN_IF_ERROR(
      CudaStatus(cudaMallocHost(&upload.host_, std::max<size_t>(bytes, 1)),
                 "cudaMallocHost of " + std::to_string(bytes) + " bytes"));
  upload.bytes_ = bytes;
  cudaEvent_t event = nullptr;
  MESHTUNE_RETURN_IF_ERROR(
      CudaStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                 "cudaEventCreateWithFlags"));
  upload.event_ = event;
  // Recorded once, so the first Copy's wait returns at once.
  MESHTUNE_RETURN_IF_ERROR(
      CudaStatus(cudaEventRecord(event, nullptr), "cudaEventRecord"));
  return StatusOr<PinnedUpload>(std::move(upload));
}

Status PinnedUpload::Copy(const void* src, void* dst, size_t bytes,
                          Stream stream) {
  if (bytes > bytes_) {
    return Status::Internal("pinned upload of " + std::to_string(bytes) +
                            " bytes into a buffer of " +
                            std::to_string(bytes_));
  }
  if (bytes == 0) return Status::Ok();
  cudaEvent_t event = static_cast<cudaEvent_t>(event_);
  MESHTUNE_RETURN_IF_ERROR(
      CudaStatus(cudaEventSynchronize(event), "cudaEventSynchronize"));
  std::memcpy(host_, src, bytes);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  MESHTUNE_RETURN_IF_ERROR(
      CudaStatus(cudaMemcpyAsync(dst, host_, bytes, cudaMemcpyHostToDevice, s),
                 "cudaMemcpyAsync pinned host to device"));
  return CudaStatus(cudaEventRecord(event, s), "cudaEventRecord");
}

Status SynchronizeStream(Stream stream, const char* what) {
  return CudaStatus(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)),
                    std::string("op '") + what + "'");
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) cudaFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

StatusOr<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes) {
  MESHTUNE_RETURN_IF_ERROR(RequireDevice());
  DeviceBuffer buffer;
  if (bytes == 0) return StatusOr<DeviceBuffer>(std::move(buffer));
  const cudaError_t err = cudaMalloc(&buffer.ptr_, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    return Status::Infeasible(
        "cudaMalloc of " + GiB(bytes) + " failed (" + cudaGetErrorString(err) +
            "); " + GiB(free_bytes) + " of " + GiB(total_bytes) + " free",
        "use a smaller micro-batch, more tensor/pipeline parallelism or "
        "activation recompute");
  }
  buffer.bytes_ = bytes;
  return StatusOr<DeviceBuffer>(std::move(buffer));
}

Status DeviceBuffer::CopyFromHost(const void* src, size_t bytes) {
  MESHTUNE_CHECK(bytes <= bytes_);
  if (bytes == 0) return Status::Ok();
  return CudaStatus(cudaMemcpy(ptr_, src, bytes, cudaMemcpyHostToDevice),
                    "cudaMemcpy host to device");
}

Status DeviceBuffer::CopyToHost(void* dst, size_t bytes) const {
  MESHTUNE_CHECK(bytes <= bytes_);
  if (bytes == 0) return Status::Ok();
  return CudaStatus(cudaMemcpy(dst, ptr_, bytes, cudaMemcpyDeviceToHost),
                    "cudaMemcpy device to host");
}

Status DeviceBuffer::Zero() {
  if (bytes_ == 0) return Status::Ok();
  return CudaStatus(cudaMemset(ptr_, 0, bytes_), "cudaMemset");
}

}  // namespace meshtune::engine::cuda
