// meshtune_gpu_probe: runs the "cuda" profiler backend's measurements and
// prints them nccl-tests style, with both clocks side by side (CUPTI kernel
// time, CUDA-event time, their agreement). scripts/gpu-check runs it (built
// there, or packed by scripts/gpu-pack on a machine with the project's
// Debian dependencies).
//
//   meshtune_gpu_probe [--quick] [--reps N] [--max-bytes B]
//
// Exit status 0 when every measurement succeeded, every collective was exact
// and the 8192^3 bf16 GEMM's clocks agree within 5 %; 1 otherwise.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "profiler/backend.h"
#include "profiler/cuda/cuda_backend.h"
#include "profiler/kernel_timing.h"
#include "profiler/preset_peaks.h"
#include "profiler/stats.h"
#include "results/store.h"

namespace {

using meshtune::Status;
using meshtune::StatusOr;
namespace profiler = meshtune::profiler;
using profiler::cuda::CudaBackend;

struct Options {
  bool quick = false;
  int warmup = 5;
  int reps = 20;
  double max_bytes = 1073741824.0;  // 1 GiB: the issue's sweep end
};

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      o->quick = true;
      o->max_bytes = 64.0 * (1 << 20);
    } else if (arg == "--reps" && i + 1 < argc) {
      o->reps = std::atoi(argv[++i]);
    } else if (arg == "--max-bytes" && i + 1 < argc) {
      o->max_bytes = std::atof(argv[++i]);
    } else {
      return false;
    }
  }
  return o->reps >= 1 && o->max_bytes >= 8;
}

// Median seconds of both clocks and their agreement (0 when no check clock).
struct Clocks {
  double cupti_us = 0, event_us = 0, agreement_pct = 0, time_s = 0;
};

Clocks Summarize(const profiler::Sample& s) {
  Clocks c;
  c.time_s = profiler::RepetitionMedian(s.times_s);
  if (s.timer == "cupti") {
    c.cupti_us = c.time_s * 1e6;
    c.event_us = profiler::RepetitionMedian(s.check_times_s) * 1e6;
    c.agreement_pct = profiler::AgreementPct(s.times_s, s.check_times_s);
  } else {
    c.event_us = c.time_s * 1e6;
  }
  return c;
}

int RunGemms(CudaBackend& backend, const Options& o, bool* agreement_ok) {
  int failures = 0;
  std::printf(
      "#\n# GEMM C[m,n] = A[m,k] B[k,n], cuBLASLt TN, median of %d\n"
      "# %5s %6s %6s %6s %11s %11s %9s %9s %11s\n",
      o.reps, "dtype", "m", "n", "k", "cupti_us", "event_us", "agree_pct",
      "tflops", "pct_of_peak");
  std::vector<int64_t> sizes = {2048, 4096, 8192};
  if (!o.quick) sizes.push_back(16384);
  for (profiler::DType dtype :
       {profiler::DType::kBf16, profiler::DType::kFp8}) {
    for (int64_t s : sizes) {
      StatusOr<profiler::Sample> sample =
          backend.TimeGemm(s, s, s, dtype, o.warmup, o.reps);
      if (!sample.ok()) {
        std::printf("  %5s %6lld: %s\n", profiler::DTypeName(dtype),
                    static_cast<long long>(s),
                    sample.status().message().c_str());
        if (sample.status().code() != Status::Code::kUnimplemented) ++failures;
        continue;
      }
      const Clocks c = Summarize(sample.value());
      const double tflops =
          profiler::Tflops(profiler::GemmFlops(s, s, s), c.time_s);
      const double peak = backend.PeakTflops(dtype);
      std::printf("  %5s %6lld %6lld %6lld %11.1f %11.1f %9.2f %9.1f %11.1f\n",
                  profiler::DTypeName(dtype), static_cast<long long>(s),
                  static_cast<long long>(s), static_cast<long long>(s),
                  c.cupti_us, c.event_us, c.agreement_pct, tflops,
                  peak > 0 ? 100 * tflops / peak : 0.0);
      if (dtype == profiler::DType::kBf16 && s == 8192) {
        *agreement_ok = c.agreement_pct >= 95.0;
      }
    }
  }
  return failures;
}

int RunStream(CudaBackend& backend, const Options& o) {
  std::printf(
      "#\n# STREAM triad a = b + s*c (fp32), 3 x bytes moved\n"
      "# %12s %11s %11s %9s %10s\n",
      "bytes", "cupti_us", "event_us", "agree_pct", "gbps");
  const double bytes = o.quick ? 256.0 * (1 << 20) : 1073741824.0;
  StatusOr<profiler::Sample> sample =
      backend.TimeStream(bytes, o.warmup, o.reps);
  if (!sample.ok()) {
    std::printf("  triad: %s\n", sample.status().message().c_str());
    return 1;
  }
  const Clocks c = Summarize(sample.value());
  std::printf("  %12.0f %11.1f %11.1f %9.2f %10.1f\n", bytes, c.cupti_us,
              c.event_us, c.agreement_pct, 3 * bytes / c.time_s / 1e9);
  return 0;
}

int RunCollectives(CudaBackend& backend, const Options& o) {
  int failures = 0;
  const int64_t max_group = backend.MaxGroupSize();
  std::vector<int64_t> groups;
  for (int64_t g = 1; g <= max_group; g *= 2) groups.push_back(g);
  if (groups.back() != max_group) groups.push_back(max_group);
  for (int64_t g : groups) {
    std::printf(
        "#\n# NCCL, %lld GPU(s), fp32, out of place, nccl-tests sizes and bus "
        "factors; checked exact\n# %14s %12s %11s %11s %9s %11s %11s\n",
        static_cast<long long>(g), "op", "bytes", "cupti_us", "event_us",
        "agree_pct", "algbw_gbps", "busbw_gbps");
    for (profiler::Collective op : meshtune::search_spaces::AllCollectives()) {
      for (double bytes : profiler::DoublingSizes(8, o.max_bytes)) {
        StatusOr<profiler::Sample> sample =
            backend.TimeCollective(op, bytes, g, o.warmup, o.reps);
        if (!sample.ok()) {
          std::printf("  %14s %12.0f %s\n",
                      meshtune::search_spaces::CollectiveName(op), bytes,
                      sample.status().message().c_str());
          ++failures;
          continue;
        }
        const Clocks c = Summarize(sample.value());
        std::printf("  %14s %12.0f %11.1f %11.1f %9.2f %11.2f %11.2f\n",
                    meshtune::search_spaces::CollectiveName(op), bytes,
                    c.cupti_us, c.event_us, c.agreement_pct,
                    profiler::AlgBwGbps(bytes, c.time_s),
                    profiler::BusBwGbps(op, g, bytes, c.time_s));
      }
    }
  }
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  // Line-buffered, so rows measured before a timeout kill are kept.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: meshtune_gpu_probe [--quick] [--reps N] "
                 "[--max-bytes B]\n");
    return 2;
  }
  StatusOr<std::unique_ptr<CudaBackend>> made = CudaBackend::Create();
  if (!made.ok()) {
    std::fprintf(stderr, "meshtune_gpu_probe: error: %s\n  hint: %s\n",
                 made.status().message().c_str(), made.status().hint().c_str());
    return 1;
  }
  CudaBackend& backend = *made.value();
  StatusOr<meshtune::results::HardwareFingerprint> hw = backend.Fingerprint();
  if (hw.ok()) {
    std::printf("# meshtune_gpu_probe: %s x%lld, driver %s, %s\n",
                hw.value().gpu_model.c_str(),
                static_cast<long long>(hw.value().gpu_count),
                hw.value().driver_version.c_str(),
                hw.value().library_versions.c_str());
  }
  std::printf("# timer: %s; warm-up %d, median of %d repetitions\n",
              backend.cupti_enabled()
                  ? "CUPTI kernel records (cross-check: CUDA events)"
                  : "CUDA events (CUPTI unavailable)",
              o.warmup, o.reps);
  bool agreement_ok = false;
  int failures = RunGemms(backend, o, &agreement_ok);
  failures += RunStream(backend, o);
  failures += RunCollectives(backend, o);
  std::printf(
      "#\n# CUPTI: dropped_records %llu, untimed_records %llu, "
      "missed_repetitions %lld\n# bf16 8192^3 CUPTI-vs-event agreement >= "
      "95 %%: %s\n# failures: %d\n",
      static_cast<unsigned long long>(backend.cupti_dropped_records()),
      static_cast<unsigned long long>(backend.cupti_untimed_records()),
      static_cast<long long>(backend.cupti_missed_repetitions()),
      agreement_ok ? "yes" : "NO", failures);
  return failures == 0 && agreement_ok ? 0 : 1;
}
