// The "cpu" profiler backend (profiler/cpu_backend.h).
#include "profiler/cpu_backend.h"

#include <Eigen/Core>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "profiler/backend.h"
#include "profiler/engine_ops.h"

namespace meshtune::profiler {
namespace {

std::string ReadWholeFile(const char* path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "key<tabs>: value" -> value, for the first line whose key is `key`.
std::string FieldValue(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string k = line.substr(0, colon);
    while (!k.empty() && (k.back() == ' ' || k.back() == '\t')) k.pop_back();
    if (k != key) continue;
    size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

bool HasFlag(const std::string& flags, const std::string& flag) {
  std::istringstream words(flags);
  std::string w;
  while (words >> w) {
    if (w == flag) return true;
  }
  return false;
}

// Keeps a computed value alive so the optimiser cannot drop the work.
volatile float g_sink = 0;

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

template <typename Scalar>
Sample TimeEigenGemm(int64_t m, int64_t n, int64_t k, int warmup, int reps) {
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  Matrix a = Matrix::Random(m, k);
  Matrix b = Matrix::Random(k, n);
  Matrix c(m, n);
  Sample sample;
  sample.timer = "steady_clock";
  for (int i = 0; i < warmup + reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    c.noalias() = a * b;
    double t = SecondsSince(t0);
    g_sink = g_sink + static_cast<float>(c(0, 0));
    if (i >= warmup) sample.times_s.push_back(t);
  }
  return sample;
}

class CpuBackend : public ProfilerBackend {
 public:
  CpuBackend() : info_(ReadCpuInfo()) {}

  std::string Name() const override { return "cpu"; }

  StatusOr<results::HardwareFingerprint> Fingerprint() override {
    return CpuFingerprint(info_);
  }

  // Nominal peak of the threads Eigen uses. bf16 has the fp32 peak: Eigen
  // converts bf16 to fp32 for the arithmetic (no native bf16 FMA is used).
  double PeakTflops(DType dtype) const override {
    if (dtype == DType::kFp8 || info_.mhz <= 0) return 0;
    return NominalFp32FlopsPerCycle(info_) * info_.mhz * 1e6 * EigenThreads() /
           1e12;
  }

  StatusOr<Sample> TimeGemm(int64_t m, int64_t n, int64_t k, DType dtype,
                            int warmup, int reps) override {
    if (m < 1 || n < 1 || k < 1 || reps < 1 || warmup < 0) {
      return Status::InvalidArgument(
          "GEMM " + std::to_string(m) + "x" + std::to_string(n) + "x" +
              std::to_string(k) + " with " + std::to_string(reps) +
              " repetitions is not measurable",
          "use positive m, n, k and repetitions");
    }
    switch (dtype) {
      case DType::kFp32:
        return TimeEigenGemm<float>(m, n, k, warmup, reps);
      case DType::kBf16:
        return TimeEigenGemm<Eigen::bfloat16>(m, n, k, warmup, reps);
      case DType::kFp8:
        break;
    }
    return Status::Unimplemented("the cpu backend has no fp8 GEMM",
                                 "use --dtype fp32 or bf16 on cpu");
  }

  StatusOr<Sample> TimeStream(double bytes, int warmup, int reps) override {
    const int64_t n = static_cast<int64_t>(bytes / sizeof(float));
    if (n < 1 || reps < 1 || warmup < 0) {
      return Status::InvalidArgument(
          "stream of " + std::to_string(bytes) + " bytes is not measurable",
          "use at least 4 bytes per array and one repetition");
    }
    Eigen::ArrayXf a = Eigen::ArrayXf::Zero(n);
    Eigen::ArrayXf b = Eigen::ArrayXf::Constant(n, 1.0f);
    Eigen::ArrayXf c = Eigen::ArrayXf::Constant(n, 2.0f);
    const float scalar = 3.0f;
    Sample sample;
    sample.timer = "steady_clock";
    for (int i = 0; i < warmup + reps; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      a = b + scalar * c;  // STREAM triad
      double t = SecondsSince(t0);
      g_sink = g_sink + a(i % n);
      if (i >= warmup) sample.times_s.push_back(t);
    }
    return sample;
  }

  int64_t MaxGroupSize() const override { return 1; }

  // The CPU engine's own kernels (profiler/cpu_engine_ops.cc).
  StatusOr<Sample> TimeEngineOp(const EngineOpCase& c, bool backward,
                                int warmup, int reps) override {
    return TimeCpuEngineOp(c, backward, warmup, reps);
  }

  StatusOr<Sample> TimeCollective(Collective op, double /*bytes*/,
                                  int64_t /*group_size*/, int /*warmup*/,
                                  int /*reps*/) override {
    return Status::Unimplemented(
        std::string("the cpu backend has no in-process ") +
            search_spaces::CollectiveName(op) +
            ": CPU collectives run across processes",
        "run meshtune_mpi_bench under mpirun (tune profile --backend cpu "
        "does this when mpirun is on PATH)");
  }

 private:
  CpuInfo info_;
};

}  // namespace

CpuInfo ParseCpuInfo(const std::string& cpuinfo, const std::string& meminfo) {
  CpuInfo info;
  info.model = FieldValue(cpuinfo, "model name");
  if (info.model.empty()) info.model = "unknown";
  info.logical_cpus = std::thread::hardware_concurrency();
  std::string mhz = FieldValue(cpuinfo, "cpu MHz");
  if (!mhz.empty()) info.mhz = std::atof(mhz.c_str());
  std::string flags = FieldValue(cpuinfo, "flags");
  info.avx512f = HasFlag(flags, "avx512f");
  info.avx2 = HasFlag(flags, "avx2");
  info.fma = HasFlag(flags, "fma");
  std::string mem = FieldValue(meminfo, "MemTotal");  // "24683656 kB"
  if (!mem.empty())
    info.memory_gib = std::atof(mem.c_str()) * 1024.0 / 1073741824.0;
  return info;
}

CpuInfo ReadCpuInfo() {
  return ParseCpuInfo(ReadWholeFile("/proc/cpuinfo"),
                      ReadWholeFile("/proc/meminfo"));
}

double NominalFp32FlopsPerCycle(const CpuInfo& info) {
  if (info.avx512f && info.fma) return 2 * 16 * 2;
  if (info.avx2 && info.fma) return 2 * 8 * 2;
  return 8;
}

results::HardwareFingerprint CpuFingerprint(const CpuInfo& info) {
  results::HardwareFingerprint hw;
  hw.backend = "cpu";
  hw.cpu_model = info.model;
  hw.cpu_cores = info.logical_cpus;
  hw.memory_gib = info.memory_gib;
  hw.library_versions = "eigen=" + std::to_string(EIGEN_WORLD_VERSION) + "." +
                        std::to_string(EIGEN_MAJOR_VERSION) + "." +
                        std::to_string(EIGEN_MINOR_VERSION) +
                        " eigen_threads=" + std::to_string(EigenThreads());
  hw.id = results::ComputeHardwareId(hw);
  return hw;
}

int EigenThreads() { return Eigen::nbThreads(); }

StatusOr<std::unique_ptr<ProfilerBackend>> MakeCpuBackend() {
  return std::unique_ptr<ProfilerBackend>(std::make_unique<CpuBackend>());
}

}  // namespace meshtune::profiler
