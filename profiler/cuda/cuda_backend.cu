// The "cuda" profiler backend: device setup, the CUPTI + CUDA-event timing
// loop, cuBLASLt GEMMs, the triad kernel and the machine fingerprint
// (cuda_backend.h). Collectives are in nccl_collectives.cu.
#include <cublasLt.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "profiler/cuda/cuda_backend.h"
#include "profiler/cuda/cuda_backend_impl.cuh"
#include "profiler/cuda/cuda_check.cuh"
#include "profiler/cuda/cupti_tracer.h"
#include "profiler/kernel_timing.h"
#include "profiler/preset_peaks.h"
#include "results/store.h"

namespace meshtune::profiler {

StatusOr<std::unique_ptr<ProfilerBackend>> MakeCudaBackend() {
  auto backend = cuda::CudaBackend::Create();
  if (!backend.ok()) return backend.status();
  return std::unique_ptr<ProfilerBackend>(std::move(backend).value());
}

namespace cuda {
namespace {

// ---- Kernels -------------------------------------------------------------

// Deterministic pseudo-random values in [-1, 1): tensor cores fed zeros draw
// less power and run faster than on real data (ml-engineering's note on
// Horace He's measurement), so inputs look like weights.
__device__ float HashToUnit(uint64_t i) {
  i ^= i >> 33;
  i *= 0xff51afd7ed558ccdULL;
  i ^= i >> 33;
  return static_cast<float>(i & 0xffffff) / static_cast<float>(0x800000) - 1.f;
}

template <typename T>
__global__ void FillRandomKernel(T* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    p[i] = T(HashToUnit(i + seed));
  }
}

__global__ void FillConstantKernel(float* p, size_t n, float value) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    p[i] = value;
  }
}

__global__ void CountNotEqualKernel(const float* p, size_t n, float value,
                                    unsigned long long* count) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    local += p[i] != value ? 1 : 0;
  }
  if (local) atomicAdd(count, local);
}

// STREAM triad a = b + s·c (McCalpin's stream.c), fp32.
__global__ void TriadKernel(float* a, const float* b, const float* c, float s,
                            size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    a[i] = b[i] + s * c[i];
  }
}

constexpr int kFillBlocks = 1024, kThreads = 256;

template <typename T>
void FillRandom(void* p, size_t n, uint64_t seed, cudaStream_t stream) {
  FillRandomKernel<T>
      <<<kFillBlocks, kThreads, 0, stream>>>(static_cast<T*>(p), n, seed);
  CUDA_CHECK(cudaGetLastError());
}

std::string VersionString(int major, int minor, int patch) {
  return std::to_string(major) + "." + std::to_string(minor) + "." +
         std::to_string(patch);
}

// "model name" of /proc/cpuinfo, "" when absent (e.g. on Arm).
std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "";
}

// The kernel driver's version ("570.86.15") from /proc; nvml.h is not in our
// toolkit, and cudaDriverGetVersion only gives the CUDA API level.
std::string NvidiaDriverVersion() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (!std::getline(in, line)) return "";
  std::istringstream words(line);
  std::string word;
  while (words >> word) {
    if (!word.empty() && std::isdigit(static_cast<unsigned char>(word[0])) &&
        word.find('.') != std::string::npos) {
      return word;
    }
  }
  return "";
}

}  // namespace

// ---- Shared helpers (cuda_backend_impl.cuh) -------------------------------

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    std::swap(ptr_, other.ptr_);
    std::swap(device_, other.device_);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) {
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaFree(ptr_));
  }
}

StatusOr<DeviceBuffer> DeviceBuffer::Allocate(int device, size_t bytes,
                                              const std::string& what) {
  DeviceBuffer b;
  b.device_ = device;
  CUDA_CHECK(cudaSetDevice(device));
  const cudaError_t err = cudaMalloc(&b.ptr_, std::max<size_t>(bytes, 256));
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear the sticky-free allocation error
    b.ptr_ = nullptr;
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    char msg[256];
    std::snprintf(msg, sizeof(msg),
                  "%s needs %.2f GiB on GPU %d, which has %.2f GiB free",
                  what.c_str(), bytes / 1073741824.0, device,
                  free_bytes / 1073741824.0);
    return Status::InvalidArgument(msg, "use smaller shapes or sizes");
  }
  CUDA_CHECK(err);
  return StatusOr<DeviceBuffer>(std::move(b));
}

void FillConstant(float* p, size_t n, float value, cudaStream_t stream) {
  FillConstantKernel<<<kFillBlocks, kThreads, 0, stream>>>(p, n, value);
  CUDA_CHECK(cudaGetLastError());
}

int64_t CountNotEqual(const float* p, size_t n, float value,
                      cudaStream_t stream) {
  unsigned long long* count = nullptr;
  CUDA_CHECK(cudaMallocAsync(&count, sizeof(*count), stream));
  CUDA_CHECK(cudaMemsetAsync(count, 0, sizeof(*count), stream));
  CountNotEqualKernel<<<kFillBlocks, kThreads, 0, stream>>>(p, n, value, count);
  CUDA_CHECK(cudaGetLastError());
  unsigned long long host = 0;
  CUDA_CHECK(cudaMemcpyAsync(&host, count, sizeof(host), cudaMemcpyDeviceToHost,
                             stream));
  CUDA_CHECK(cudaFreeAsync(count, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return static_cast<int64_t>(host);
}

Sample CudaBackend::Impl::TimeRepetitions(int devices,
                                          const std::function<void()>& launch,
                                          int warmup, int reps) {
  auto sync_all = [&] {
    for (int d = 0; d < devices; ++d) {
      CUDA_CHECK(cudaSetDevice(d));
      CUDA_CHECK(cudaStreamSynchronize(streams[d]));
    }
  };
  for (int i = 0; i < warmup; ++i) launch();
  sync_all();
  // Discard the warm-up's and the input fills' kernel records.
  if (cupti) (void)CuptiTracer::Drain();

  std::vector<uint64_t> rep_begin_ns;
  std::vector<double> event_s;
  rep_begin_ns.reserve(reps);
  event_s.reserve(reps);
  for (int r = 0; r < reps; ++r) {
    if (cupti) rep_begin_ns.push_back(CuptiTracer::NowNs());
    for (int d = 0; d < devices; ++d) {
      CUDA_CHECK(cudaSetDevice(d));
      CUDA_CHECK(cudaEventRecord(start_events[d], streams[d]));
    }
    launch();
    for (int d = 0; d < devices; ++d) {
      CUDA_CHECK(cudaSetDevice(d));
      CUDA_CHECK(cudaEventRecord(stop_events[d], streams[d]));
    }
    // The slowest device sets the time, as with the CUPTI envelope.
    double longest_ms = 0;
    for (int d = 0; d < devices; ++d) {
      CUDA_CHECK(cudaEventSynchronize(stop_events[d]));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, start_events[d], stop_events[d]));
      longest_ms = std::max(longest_ms, static_cast<double>(ms));
    }
    event_s.push_back(longest_ms * 1e-3);
  }
  Sample sample;
  if (cupti) {
    sync_all();
    std::vector<double> cupti_s =
        PerRepetitionKernelTimes_s(CuptiTracer::Drain(), rep_begin_ns);
    const int64_t missed = std::count_if(cupti_s.begin(), cupti_s.end(),
                                         [](double t) { return t < 0; });
    if (missed == 0) {
      sample.times_s = std::move(cupti_s);
      sample.timer = "cupti";
      sample.check_times_s = std::move(event_s);
      sample.check_timer = "cuda_event";
      return sample;
    }
    missed_repetitions += missed;
  }
  sample.times_s = std::move(event_s);
  sample.timer = "cuda_event";
  return sample;
}

// ---- CudaBackend
// -------------------------------------------------------------

int LocalGpuCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

int64_t CollectiveElements(double bytes, int64_t ranks) {
  const int64_t ranks_ = std::max<int64_t>(ranks, 1);
  const int64_t elements = static_cast<int64_t>(bytes / sizeof(float));
  return std::max(ranks_, elements / ranks_ * ranks_);
}

CudaBackend::CudaBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create() {
  const int count = LocalGpuCount();
  if (count == 0) {
    return Status::Unimplemented(
        "backend 'cuda' found no usable GPU (cudaGetDeviceCount gave none)",
        "check nvidia-smi and CUDA_VISIBLE_DEVICES, or use --backend cpu");
  }
  auto impl = std::make_unique<Impl>();
  impl->device_count = count;
  // Before the first context, so kernel instrumentation is set up at module
  // load instead of inside a timed region (Kineto PR #542).
  const Status cupti = CuptiTracer::Enable();
  impl->cupti = cupti.ok();
  if (!cupti.ok()) {
    std::fprintf(stderr, "tune: warning: %s\n  hint: %s\n",
                 cupti.message().c_str(), cupti.hint().c_str());
  }
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  impl->device_name = prop.name;
  impl->cc_major = prop.major;
  impl->cc_minor = prop.minor;
  for (int d = 0; d < count; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    impl->streams.push_back(s);
    impl->start_events.push_back(start);
    impl->stop_events.push_back(stop);
  }
  CUDA_CHECK(cudaSetDevice(0));
  CUBLAS_CHECK(cublasLtCreate(&impl->lt));
  // 32 MiB: what llm.c and PyTorch (PR #120925) give cuBLASLt on Hopper.
  impl->workspace_bytes = 32u << 20;
  auto ws = DeviceBuffer::Allocate(0, impl->workspace_bytes, "the workspace");
  if (!ws.ok()) {
    if (impl->cupti) CuptiTracer::Disable();
    return ws.status();
  }
  impl->workspace = std::move(ws).value();
  return std::unique_ptr<CudaBackend>(new CudaBackend(std::move(impl)));
}

CudaBackend::~CudaBackend() {
  for (auto& [size, comms] : impl_->comms) {
    for (ncclComm_t c : comms) NCCL_CHECK(ncclCommDestroy(c));
  }
  impl_->workspace = DeviceBuffer();
  CUBLAS_CHECK(cublasLtDestroy(impl_->lt));
  for (int d = 0; d < impl_->device_count; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaEventDestroy(impl_->start_events[d]));
    CUDA_CHECK(cudaEventDestroy(impl_->stop_events[d]));
    CUDA_CHECK(cudaStreamDestroy(impl_->streams[d]));
  }
  if (impl_->cupti) CuptiTracer::Disable();
}

StatusOr<results::HardwareFingerprint> CudaBackend::Fingerprint() {
  results::HardwareFingerprint hw;
  hw.backend = "cuda";
  hw.cpu_model = CpuModel();
  hw.cpu_cores = std::thread::hardware_concurrency();
  hw.memory_gib = static_cast<double>(sysconf(_SC_PHYS_PAGES)) *
                  static_cast<double>(sysconf(_SC_PAGE_SIZE)) / 1073741824.0;
  hw.gpu_model = impl_->device_name;
  hw.gpu_count = impl_->device_count;
  int driver_api = 0, runtime = 0, nccl = 0;
  CUDA_CHECK(cudaDriverGetVersion(&driver_api));
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  NCCL_CHECK(ncclGetVersion(&nccl));
  hw.driver_version = NvidiaDriverVersion();
  if (hw.driver_version.empty()) {
    hw.driver_version = "cuda-api-" + std::to_string(driver_api / 1000) + "." +
                        std::to_string(driver_api % 1000 / 10);
  }
  const size_t lt = cublasLtGetVersion();
  uint32_t cupti_api = 0;
  CUPTI_CHECK(cuptiGetVersion(&cupti_api));
  hw.library_versions =
      "cuda=" + VersionString(runtime / 1000, runtime % 1000 / 10, 0) +
      " cublaslt=" + VersionString(lt / 10000, lt % 10000 / 100, lt % 100) +
      " nccl=" + VersionString(nccl / 10000, nccl % 10000 / 100, nccl % 100) +
      " cupti_api=" + std::to_string(cupti_api);
  return hw;
}

double CudaBackend::PeakTflops(DType dtype) const {
  return PresetPeakTflops(impl_->device_name, dtype);
}

StatusOr<Sample> CudaBackend::TimeGemm(int64_t m, int64_t n, int64_t k,
                                       DType dtype, int warmup, int reps) {
  if (m <= 0 || n <= 0 || k <= 0 || reps < 1 || warmup < 0) {
    return Status::InvalidArgument("GEMM needs m, n, k, reps > 0",
                                   "check the shape and --reps");
  }
  const bool fp8 = dtype == DType::kFp8;
  if (fp8 && impl_->cc_major * 10 + impl_->cc_minor < 89) {
    return Status::Unimplemented("fp8 GEMMs need compute capability 8.9+, " +
                                     impl_->device_name + " has " +
                                     std::to_string(impl_->cc_major) + "." +
                                     std::to_string(impl_->cc_minor),
                                 "use --dtype bf16 on this GPU");
  }
  const cudaDataType_t in_type = fp8                     ? CUDA_R_8F_E4M3
                                 : dtype == DType::kBf16 ? CUDA_R_16BF
                                                         : CUDA_R_32F;
  // fp8 and bf16 write bf16 (Transformer Engine's recipe); fp32 writes fp32.
  const cudaDataType_t out_type =
      dtype == DType::kFp32 ? CUDA_R_32F : CUDA_R_16BF;
  const size_t in_elem = fp8 ? 1 : dtype == DType::kBf16 ? 2 : 4;
  const size_t out_elem = dtype == DType::kFp32 ? 4 : 2;
  const std::string what = "GEMM " + std::to_string(m) + "x" +
                           std::to_string(n) + "x" + std::to_string(k);
  auto a = DeviceBuffer::Allocate(0, m * k * in_elem, what + " input A");
  if (!a.ok()) return a.status();
  auto b = DeviceBuffer::Allocate(0, k * n * in_elem, what + " input B");
  if (!b.ok()) return b.status();
  auto d = DeviceBuffer::Allocate(0, m * n * out_elem, what + " output");
  if (!d.ok()) return d.status();
  cudaStream_t stream = impl_->streams[0];
  CUDA_CHECK(cudaSetDevice(0));
  if (fp8) {
    FillRandom<__nv_fp8_e4m3>(a.value().get(), m * k, 1, stream);
    FillRandom<__nv_fp8_e4m3>(b.value().get(), k * n, 2, stream);
  } else if (dtype == DType::kBf16) {
    FillRandom<__nv_bfloat16>(a.value().get(), m * k, 1, stream);
    FillRandom<__nv_bfloat16>(b.value().get(), k * n, 2, stream);
  } else {
    FillRandom<float>(a.value().get(), m * k, 1, stream);
    FillRandom<float>(b.value().get(), k * n, 2, stream);
  }

  // "TN": column-major A stored [k, m] and transposed, B stored [k, n]; the
  // layout cuBLASLt requires for fp8 on Hopper, used for all dtypes so they
  // compare like for like. Compute in fp32 (CUBLAS_COMPUTE_32F).
  cublasLtMatmulDesc_t desc;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                              &op_t, sizeof(op_t)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                              &op_n, sizeof(op_n)));
  cublasLtMatrixLayout_t la, lb, ld;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, in_type, k, m, k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, in_type, k, n, k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld, out_type, m, n, m));
  cublasLtMatmulPreference_t pref;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &impl_->workspace_bytes,
      sizeof(impl_->workspace_bytes)));
  cublasLtMatmulHeuristicResult_t heuristic;
  int found = 0;
  // cuBLASLt says "no algorithm" as CUBLAS_STATUS_NOT_SUPPORTED (fp8 with m
  // or k off a multiple of 16, for one), not as success with found == 0.
  const cublasStatus_t heuristic_status = cublasLtMatmulAlgoGetHeuristic(
      impl_->lt, desc, la, lb, ld, ld, pref, 1, &heuristic, &found);
  if (heuristic_status == CUBLAS_STATUS_NOT_SUPPORTED) {
    found = 0;
  } else {
    CUBLAS_CHECK(heuristic_status);
  }
  StatusOr<Sample> result = Status::Unimplemented(
      "cuBLASLt has no algorithm for " + what + " in " + DTypeName(dtype),
      "fp8 needs m and k divisible by 16; try a padded shape");
  if (found > 0) {
    const float alpha = 1.f, beta = 0.f;
    void* workspace = impl_->workspace.get();
    result = impl_->TimeRepetitions(
        1,
        [&] {
          CUBLAS_CHECK(cublasLtMatmul(
              impl_->lt, desc, &alpha, a.value().get(), la, b.value().get(), lb,
              &beta, d.value().get(), ld, d.value().get(), ld, &heuristic.algo,
              workspace, impl_->workspace_bytes, stream));
        },
        warmup, reps);
  }
  CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(la));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lb));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(ld));
  CUBLAS_CHECK(cublasLtMatmulDescDestroy(desc));
  return result;
}

StatusOr<Sample> CudaBackend::TimeStream(double bytes, int warmup, int reps) {
  if (bytes < sizeof(float) || reps < 1 || warmup < 0) {
    return Status::InvalidArgument("stream needs bytes >= 4 and reps > 0",
                                   "check the size and --reps");
  }
  const size_t n = static_cast<size_t>(bytes / sizeof(float));
  std::vector<DeviceBuffer> arrays;
  for (const char* name : {"triad array a", "triad array b", "triad array c"}) {
    auto buf = DeviceBuffer::Allocate(0, n * sizeof(float), name);
    if (!buf.ok()) return buf.status();
    arrays.push_back(std::move(buf).value());
  }
  cudaStream_t stream = impl_->streams[0];
  FillConstant(arrays[1].as<float>(), n, 1.f, stream);
  FillConstant(arrays[2].as<float>(), n, 2.f, stream);
  // Enough blocks to fill every SM several times over (grid-stride loop).
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int blocks = sms * 8;
  return impl_->TimeRepetitions(
      1,
      [&] {
        TriadKernel<<<blocks, kThreads, 0, stream>>>(
            arrays[0].as<float>(), arrays[1].as<float>(), arrays[2].as<float>(),
            3.f, n);
        CUDA_CHECK(cudaGetLastError());
      },
      warmup, reps);
}

int64_t CudaBackend::MaxGroupSize() const { return impl_->device_count; }

bool CudaBackend::cupti_enabled() const { return impl_->cupti; }
uint64_t CudaBackend::cupti_dropped_records() const {
  return CuptiTracer::dropped_records();
}
uint64_t CudaBackend::cupti_untimed_records() const {
  return CuptiTracer::untimed_records();
}
int64_t CudaBackend::cupti_missed_repetitions() const {
  return impl_->missed_repetitions;
}

}  // namespace cuda
}  // namespace meshtune::profiler
