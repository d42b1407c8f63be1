// The backend registry, name tables, the cpu backend's measurements and the
// nccl-tests-style rows (profiler/backend.h, cpu_backend.h, report.h).
#include "profiler/backend.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "profiler/cpu_backend.h"
#include "profiler/report.h"
#include "profiler/sweep.h"
#include "results/store.h"

namespace meshtune::profiler {
namespace {

TEST(BackendRegistryTest, CpuIsAlwaysBuilt) {
  auto cpu = MakeBackend("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  EXPECT_EQ((*cpu)->Name(), "cpu");
  EXPECT_EQ(BuiltBackends().front(), "cpu");
}

TEST(BackendRegistryTest, UnknownAndUnbuiltBackendsAreStatusErrors) {
  auto tpu = MakeBackend("tpu");
  ASSERT_FALSE(tpu.ok());
  EXPECT_EQ(tpu.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(tpu.status().message(), "unknown profiler backend 'tpu'");
  EXPECT_NE(tpu.status().hint().find("cpu"), std::string::npos);
  const std::vector<std::string> built = BuiltBackends();
  if (std::find(built.begin(), built.end(), "cuda") != built.end()) return;
  auto cuda = MakeBackend("cuda");
  ASSERT_FALSE(cuda.ok());
  EXPECT_EQ(cuda.status().code(), Status::Code::kUnimplemented);
  EXPECT_EQ(cuda.status().message().rfind("backend 'cuda' was not built", 0),
            0u)
      << cuda.status().message();
}

TEST(BackendRegistryTest, NamesRoundTrip) {
  for (Collective op : search_spaces::AllCollectives()) {
    auto parsed =
        search_spaces::ParseCollective(search_spaces::CollectiveName(op));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, op);
  }
  EXPECT_EQ(search_spaces::AllCollectives().size(), 5u);
  EXPECT_FALSE(search_spaces::ParseCollective("allreduce").ok());
  auto bf16 = ParseDType("bf16");
  ASSERT_TRUE(bf16.ok());
  EXPECT_EQ(*bf16, DType::kBf16);
  auto bad = ParseDType("fp64");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "unknown dtype 'fp64'");
}

TEST(CpuBackendTest, ParsesCpuInfo) {
  CpuInfo info = ParseCpuInfo(
      "processor\t: 0\nmodel name\t: AMD EPYC 9654\ncpu MHz\t\t: 2400.000\n"
      "flags\t\t: fpu sse2 avx avx2 fma avx512f\n",
      "MemTotal:       16777216 kB\nMemFree: 1 kB\n");
  EXPECT_EQ(info.model, "AMD EPYC 9654");
  EXPECT_DOUBLE_EQ(info.mhz, 2400.0);
  EXPECT_TRUE(info.avx512f && info.avx2 && info.fma);
  EXPECT_DOUBLE_EQ(info.memory_gib, 16.0);
  EXPECT_EQ(NominalFp32FlopsPerCycle(info), 64.0);
  info.avx512f = false;
  EXPECT_EQ(NominalFp32FlopsPerCycle(info), 32.0);
  CpuInfo empty = ParseCpuInfo("", "");
  EXPECT_EQ(empty.model, "unknown");
  EXPECT_EQ(empty.memory_gib, 0);
}

TEST(CpuBackendTest, FingerprintIsStable) {
  CpuInfo info = ReadCpuInfo();
  results::HardwareFingerprint a = CpuFingerprint(info);
  results::HardwareFingerprint b = CpuFingerprint(ReadCpuInfo());
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.id, results::ComputeHardwareId(a));
  EXPECT_EQ(a.backend, "cpu");
  EXPECT_NE(a.library_versions.find("eigen="), std::string::npos);
}

TEST(CpuBackendTest, TimesGemmsAndStream) {
  auto made = MakeBackend("cpu");
  ASSERT_TRUE(made.ok());
  ProfilerBackend& cpu = **made;
  for (DType d : {DType::kFp32, DType::kBf16}) {
    auto s = cpu.TimeGemm(64, 32, 16, d, 1, 5);
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ(s->times_s.size(), 5u);
    EXPECT_EQ(s->timer, "steady_clock");
    for (double t : s->times_s) EXPECT_GT(t, 0);
  }
  auto fp8 = cpu.TimeGemm(64, 32, 16, DType::kFp8, 1, 5);
  ASSERT_FALSE(fp8.ok());
  EXPECT_EQ(fp8.status().code(), Status::Code::kUnimplemented);
  EXPECT_FALSE(cpu.TimeGemm(0, 32, 16, DType::kFp32, 1, 5).ok());
  auto stream = cpu.TimeStream(1 << 20, 1, 3);
  ASSERT_TRUE(stream.ok());
  EXPECT_EQ(stream->times_s.size(), 3u);
  EXPECT_EQ(cpu.MaxGroupSize(), 1);
  auto coll = cpu.TimeCollective(Collective::kAllReduce, 1024, 2, 1, 1);
  ASSERT_FALSE(coll.ok());
  EXPECT_NE(coll.status().hint().find("meshtune_mpi_bench"), std::string::npos);
}

TEST(CpuBackendTest, GemmSweepRowsMatchTheStore) {
  auto made = MakeBackend("cpu");
  ASSERT_TRUE(made.ok());
  std::ostringstream out, progress;
  auto rows =
      RunGemmSweep(**made, {{"a", 32, 16, 8}, {"b", 16, 16, 16}}, DType::kFp32,
                   SweepOptions{1, 3}, "cpu-x", out, progress);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 2u);
  const results::Measurement& r = (*rows)[0];
  EXPECT_EQ(r.op, "gemm");
  EXPECT_EQ(r.dtype, "fp32");
  EXPECT_EQ(r.m, 32);
  EXPECT_EQ(r.n, 16);
  EXPECT_EQ(r.k, 8);
  EXPECT_EQ(r.samples, 3);
  EXPECT_EQ(r.hardware_id, "cpu-x");
  EXPECT_LE(r.min_s, r.median_s);
  EXPECT_LE(r.median_s, r.p99_s);
  EXPECT_NE(out.str().find(" a "), std::string::npos);
  EXPECT_NE(progress.str().find("[2/2]"), std::string::npos);
}

TEST(ReportTest, FixedWidthRowsWithUnits) {
  std::ostringstream out;
  PrintCollectiveTableHeader(out);
  TimingStats s;
  s.samples = 10;
  s.median_s = 0.01;
  s.min_s = 0.009;
  PrintCollectiveRow(out, Collective::kAllReduce, 1e9, 8, s);
  const std::string text = out.str();
  for (const char* col :
       {"size_bytes", "time_us", "algbw_gbps", "busbw_gbps"}) {
    EXPECT_NE(text.find(col), std::string::npos) << col;
  }
  EXPECT_NE(text.find("  10000.00 "), std::string::npos) << text;  // time_us
  EXPECT_NE(text.find(" 100.000     175.000"), std::string::npos) << text;

  std::ostringstream gemm;
  PrintGemmTableHeader(gemm);
  s.median_s = 1.4e-3;
  PrintGemmRow(gemm, "sq", 8192, 8192, 8192, DType::kBf16, s, 989.0);
  EXPECT_NE(gemm.str().find("pct_of_peak"), std::string::npos);
  EXPECT_NE(gemm.str().find("785.3654"), std::string::npos) << gemm.str();
  EXPECT_NE(gemm.str().find("79.4"), std::string::npos) << gemm.str();
}

TEST(ReportTest, HeaderWarnsOnDebugBuilds) {
  results::HardwareFingerprint hw;
  hw.id = "cpu-1";
  hw.backend = "cpu";
  hw.cpu_model = "Test CPU";
  hw.library_versions = "eigen=3.4.0";
  std::ostringstream release, debug;
  PrintHeader(release, {"0.1.0", "abc", "Release"}, hw, "extra line");
  PrintHeader(debug, {"0.1.0", "abc", "Debug"}, hw, "");
  EXPECT_EQ(release.str().find("WARNING"), std::string::npos);
  EXPECT_NE(release.str().find("# extra line\n"), std::string::npos);
  EXPECT_NE(release.str().find("# hardware cpu-1"), std::string::npos);
  EXPECT_NE(debug.str().find("# WARNING: Debug build"), std::string::npos);
  EXPECT_EQ(GetBuildInfo().tool_version.empty(), false);
}

}  // namespace
}  // namespace meshtune::profiler
