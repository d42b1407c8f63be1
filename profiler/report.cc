#include "profiler/report.h"

#include <cstdio>
#include <string>

namespace meshtune::profiler {
namespace {

// snprintf into a std::string (rows are short; 256 bytes is plenty).
template <typename... Args>
std::string Format(const char* fmt, Args... args) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

}  // namespace

BuildInfo GetBuildInfo() {
  BuildInfo b;
  b.tool_version = MESHTUNE_PROFILER_VERSION;
  b.git_revision = MESHTUNE_PROFILER_GIT_REVISION;
  b.build_type = MESHTUNE_PROFILER_BUILD_TYPE;
  return b;
}

results::Provenance BuildProvenance() {
  BuildInfo b = GetBuildInfo();
  return results::MakeProvenance(b.tool_version, b.git_revision);
}

void PrintHeader(std::ostream& out, const BuildInfo& build,
                 const results::HardwareFingerprint& hw,
                 const std::string& extra, bool extra_only) {
  if (!extra_only) {
    out << "# meshtune profiler " << build.tool_version << " ("
        << build.git_revision << "), " << build.build_type << " build\n";
    if (build.build_type == "Debug") {
      out << "# WARNING: Debug build: timings are not representative; "
             "configure with -DCMAKE_BUILD_TYPE=Release\n";
    }
    out << "# hardware " << hw.id << ": backend " << hw.backend << ", "
        << hw.cpu_model << ", " << hw.cpu_cores << " logical CPUs, "
        << Format("%.1f", hw.memory_gib) << " GiB\n";
    if (!hw.gpu_model.empty()) {
      out << "# gpu " << hw.gpu_count << " x " << hw.gpu_model << ", driver "
          << hw.driver_version << "\n";
    }
    out << "# libraries " << hw.library_versions << "\n";
  }
  size_t start = 0;
  while (start < extra.size()) {
    size_t end = extra.find('\n', start);
    if (end == std::string::npos) end = extra.size();
    out << "# " << extra.substr(start, end - start) << "\n";
    start = end + 1;
  }
}

void PrintGemmTableHeader(std::ostream& out) {
  out << Format("#%-13s %7s %7s %7s %5s %12s %12s %12s %7s %9s %11s\n", "name",
                "m", "n", "k", "dtype", "time_us", "min_us", "p99_us", "cv_pct",
                "tflops", "pct_of_peak");
}

void PrintGemmRow(std::ostream& out, const std::string& name, int64_t m,
                  int64_t n, int64_t k, DType dtype, const TimingStats& stats,
                  double peak_tflops) {
  double tflops = Tflops(GemmFlops(m, n, k), stats.median_s);
  std::string pct =
      peak_tflops > 0 ? Format("%.1f", 100.0 * tflops / peak_tflops) : "-";
  out << Format(
      " %-13s %7lld %7lld %7lld %5s %12.2f %12.2f %12.2f %7.2f %9.4f "
      "%11s\n",
      name.c_str(), static_cast<long long>(m), static_cast<long long>(n),
      static_cast<long long>(k), DTypeName(dtype), stats.median_s * 1e6,
      stats.min_s * 1e6, stats.p99_s * 1e6, stats.cv * 100.0, tflops,
      pct.c_str());
}

void PrintStreamTableHeader(std::ostream& out) {
  out << Format("#%-13s %14s %12s %12s %12s %7s %9s\n", "op", "size_bytes",
                "moved_bytes", "time_us", "min_us", "cv_pct", "gbps");
}

void PrintStreamRow(std::ostream& out, double array_bytes,
                    const TimingStats& stats) {
  double moved = 3.0 * array_bytes;
  out << Format(" %-13s %14.0f %12.0f %12.2f %12.2f %7.2f %9.2f\n", "triad",
                array_bytes, moved, stats.median_s * 1e6, stats.min_s * 1e6,
                stats.cv * 100.0, AlgBwGbps(moved, stats.median_s));
}

void PrintCollectiveTableHeader(std::ostream& out) {
  out << Format("#%-15s %12s %6s %12s %12s %7s %11s %11s\n", "op", "size_bytes",
                "ranks", "time_us", "min_us", "cv_pct", "algbw_gbps",
                "busbw_gbps");
}

void PrintCollectiveRow(std::ostream& out, Collective op, double bytes,
                        int64_t ranks, const TimingStats& stats) {
  out << Format(" %-15s %12.0f %6lld %12.2f %12.2f %7.2f %11.3f %11.3f\n",
                search_spaces::CollectiveName(op), bytes,
                static_cast<long long>(ranks), stats.median_s * 1e6,
                stats.min_s * 1e6, stats.cv * 100.0,
                AlgBwGbps(bytes, stats.median_s),
                BusBwGbps(op, ranks, bytes, stats.median_s));
}

void PrintEngineOpTableHeader(std::ostream& out) {
  out << Format("#%-22s %-26s %15s %12s %12s %7s %11s %9s\n", "name", "op",
                "shape", "time_us", "min_us", "cv_pct", "ns_per_elem",
                "tflops");
}

double EngineAttentionFlops(int64_t batch_heads, int64_t seq, int64_t head_dim,
                            bool backward) {
  return (backward ? 4.0 : 2.0) * static_cast<double>(batch_heads) *
         static_cast<double>(seq) * static_cast<double>(seq) *
         static_cast<double>(head_dim);
}

void PrintEngineOpRow(std::ostream& out, const EngineOpCase& c, bool backward,
                      const TimingStats& stats) {
  const bool attention = c.kernel == EngineKernel::kAttention;
  const std::string op = c.op + (backward ? ":bwd" : ":fwd");
  const std::string shape =
      attention ? Format("%lldx%lldx%lld", static_cast<long long>(c.elements),
                         static_cast<long long>(c.seq),
                         static_cast<long long>(c.head_dim))
                : Format("%lld", static_cast<long long>(c.elements));
  const std::string ns_per_elem =
      attention || c.elements <= 0
          ? "-"
          : Format("%.3f",
                   stats.median_s * 1e9 / static_cast<double>(c.elements));
  const std::string tflops =
      attention
          ? Format("%.4f", Tflops(EngineAttentionFlops(c.elements, c.seq,
                                                       c.head_dim, backward),
                                  stats.median_s))
          : "-";
  out << Format(" %-22s %-26s %15s %12.2f %12.2f %7.2f %11s %9s\n",
                c.label.c_str(), op.c_str(), shape.c_str(),
                stats.median_s * 1e6, stats.min_s * 1e6, stats.cv * 100.0,
                ns_per_elem.c_str(), tflops.c_str());
}

void PrintProgress(std::ostream& progress, int64_t i, int64_t total,
                   const std::string& label) {
  progress << Format("\r  [%lld/%lld] %-40s", static_cast<long long>(i),
                     static_cast<long long>(total), label.c_str());
  if (i >= total) progress << "\n";
  progress.flush();
}

}  // namespace meshtune::profiler
