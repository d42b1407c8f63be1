// `tune regress` without running the engine: the verdict rule (threshold,
// spreads, numerics), the table, the benchmark registry, and baseline files
// (round trip and every validation message).
#include "tuner/regress/verdict.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/tuner/run_tune.h"
#include "tuner/regress/baseline_file.h"
#include "tuner/regress/benchmarks.h"

namespace meshtune::tuner {
namespace {

using testing::MakeTempDir;
using testing::ReadFile;
using testing::WriteFile;

// A result whose CPU and wall repeats are `median` ± `spread`.
results::RegressResult Result(double median, double spread) {
  results::RegressResult r;
  r.benchmark = "cpu-gpt-tiny-v1";
  r.tokens_per_s = {median - spread, median, median + spread};
  r.cpu_tokens_per_s = r.tokens_per_s;
  r.tokens_per_s_median = r.cpu_tokens_per_s_median = median;
  r.tokens_per_s_spread = r.cpu_tokens_per_s_spread = spread;
  r.losses = {8.0, 7.5, 7.25};
  return r;
}

TEST(RegressVerdict, DropBeyondThresholdAndNoiseIsARegression) {
  const RegressVerdict v = CompareRegress(Result(1000, 10), Result(800, 10), 10,
                                          1e-5, RegressMetric::kCpu);
  EXPECT_TRUE(v.throughput_regressed);
  EXPECT_FALSE(v.numerics_changed);
  EXPECT_DOUBLE_EQ(v.change_pct, -20);
  EXPECT_EQ(v.rows[0].verdict, "REGRESSION");
  EXPECT_EQ(v.rows[1].verdict, "info");  // wall is not gated
  EXPECT_FALSE(v.passed());
}

TEST(RegressVerdict, DropWithinThresholdPasses) {
  const RegressVerdict v = CompareRegress(Result(1000, 1), Result(950, 1), 10,
                                          1e-5, RegressMetric::kCpu);
  EXPECT_TRUE(v.passed());
  EXPECT_EQ(v.rows[0].verdict, "pass");
}

TEST(RegressVerdict, DropWithinTheSpreadsPasses) {
  // -20% but the runs' spreads (150 + 100) exceed the 200 gap: noise.
  const RegressVerdict v = CompareRegress(Result(1000, 150), Result(800, 100),
                                          10, 1e-5, RegressMetric::kCpu);
  EXPECT_FALSE(v.throughput_regressed);
  EXPECT_EQ(v.rows[0].verdict, "pass (within noise)");
}

TEST(RegressVerdict, ImprovementPassesAndWallMetricIsGatedOnRequest) {
  EXPECT_TRUE(CompareRegress(Result(1000, 1), Result(2000, 1), 10, 1e-5,
                             RegressMetric::kCpu)
                  .passed());
  results::RegressResult slow_wall = Result(1000, 1);
  slow_wall.tokens_per_s_median = 500;
  EXPECT_TRUE(
      CompareRegress(Result(1000, 1), slow_wall, 10, 1e-5, RegressMetric::kCpu)
          .passed());
  const RegressVerdict wall = CompareRegress(Result(1000, 1), slow_wall, 10,
                                             1e-5, RegressMetric::kWall);
  EXPECT_TRUE(wall.throughput_regressed);
  EXPECT_EQ(wall.rows[0].verdict, "info");
  EXPECT_EQ(wall.rows[1].verdict, "REGRESSION");
}

TEST(RegressVerdict, LossOutsideToleranceIsANumericsChange) {
  results::RegressResult cur = Result(1000, 1);
  cur.losses[1] *= 1 + 2e-5;
  const RegressVerdict v =
      CompareRegress(Result(1000, 1), cur, 10, 1e-5, RegressMetric::kCpu);
  EXPECT_TRUE(v.numerics_changed);
  EXPECT_FALSE(v.throughput_regressed);
  EXPECT_EQ(v.worst_step, 2);
  EXPECT_NEAR(v.max_loss_rel_diff, 2e-5, 1e-12);
  EXPECT_EQ(v.rows[2].verdict, "NUMERICS CHANGED");
  cur.losses[1] = 7.5 * (1 + 5e-6);
  EXPECT_TRUE(
      CompareRegress(Result(1000, 1), cur, 10, 1e-5, RegressMetric::kCpu)
          .passed());
}

TEST(RegressVerdict, ComparesTheStepsBothRunsHave) {
  results::RegressResult longer = Result(1000, 1);
  longer.losses.push_back(1.0);
  const RegressVerdict v =
      CompareRegress(Result(1000, 1), longer, 10, 1e-5, RegressMetric::kCpu);
  EXPECT_EQ(v.steps_compared, 3);
  EXPECT_TRUE(v.passed());
}

TEST(RegressVerdict, Table) {
  EXPECT_EQ(FormatVerdictTable(CompareRegress(Result(1000, 10), Result(800, 10),
                                              10, 1e-5, RegressMetric::kCpu)),
            "metric                       baseline       current      change"
            "  threshold  verdict\n"
            "tokens per CPU second   1000.0 ± 10.0  800.0 ± 10.0      -20.0%"
            "     -10.0%  REGRESSION\n"
            "tokens per wall second  1000.0 ± 10.0  800.0 ± 10.0      -20.0%"
            "          -  info\n"
            "loss, 3 steps            8.000000e+00  8.000000e+00  0.0e+00 @1"
            "      1e-05  pass\n"
            "verdict: REGRESSION (throughput)\n");
}

TEST(RegressBenchmarks, RegistryAndStatistics) {
  ASSERT_TRUE(FindRegressBenchmark("cpu-gpt-tiny-v1").ok());
  const RegressBenchmark& b = *FindRegressBenchmark("cpu-gpt-tiny-v1").value();
  EXPECT_EQ(b.Spec(),
            "model=gpt-tiny tp=1 pp=1 dp=1 mbs=2 gbs=2 seq=32 warmup=2 "
            "steps=2 seed=1234 lr=0.001 lr_decay=constant threads=1 "
            "data=synthetic-v1");
  const Status unknown = FindRegressBenchmark("cpu-gpt-huge-v9").status();
  EXPECT_EQ(unknown.code(), Status::Code::kNotFound);
  EXPECT_EQ(unknown.message(), "unknown benchmark 'cpu-gpt-huge-v9'");
  EXPECT_EQ(unknown.hint(),
            "use one of: cpu-gpt-tiny-v1, cpu-llama-tiny-v1, "
            "cuda-gpt-tiny-v1 ('tune regress list' describes them)");
  // A CUDA benchmark says so in its definition, so a baseline of the CPU
  // engine can never be read as one of the GPU.
  const RegressBenchmark& gpu =
      *FindRegressBenchmark("cuda-gpt-tiny-v1").value();
  EXPECT_EQ(gpu.backend, "cuda");
  EXPECT_EQ(b.backend, "cpu");
  EXPECT_EQ(gpu.Spec(),
            "model=gpt-tiny tp=1 pp=1 dp=1 mbs=32 gbs=32 seq=256 warmup=3 "
            "steps=5 seed=1234 lr=0.001 lr_decay=constant threads=1 "
            "backend=cuda data=synthetic-v1");
  // Its results are filed under the GPU machine, not under this CPU.
  const results::HardwareFingerprint hw = RegressHardware(gpu);
  EXPECT_EQ(hw.backend, "cuda");
  EXPECT_EQ(hw.id.rfind("cuda-", 0), 0u) << hw.id;
  EXPECT_NE(hw.id, RegressHardware(b).id);
  EXPECT_TRUE(CheckRegressBackend(b, "tune regress run").ok());
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(Median({4, 1, 2, 3}), 2.5);
  EXPECT_DOUBLE_EQ(MedianAbsoluteDeviation({1, 2, 3, 4, 100}), 1);
}

BaselineFile SampleFile() {
  const RegressBenchmark& b = *FindRegressBenchmark("cpu-gpt-tiny-v1").value();
  BaselineFile f;
  f.hardware.backend = "cpu";
  f.hardware.cpu_model = "Test CPU";
  f.hardware.cpu_cores = 4;
  f.hardware.memory_gib = 15.6;
  f.hardware.library_versions = "eigen=3.4.0 eigen_threads=1";
  f.hardware.id = results::ComputeHardwareId(f.hardware);
  f.baseline.name = "ci";
  f.baseline.result = Result(1000, 10);
  f.baseline.result.spec = b.Spec();
  f.baseline.result.hardware_id = f.hardware.id;
  f.baseline.result.losses = {8.3475218772888184, 0.1 + 0.2};
  f.baseline.result.provenance = {"0.1.0", "abc123", 1700000000};
  f.baseline.provenance = {"0.1.0", "def456", 1700000100};
  return f;
}

TEST(RegressBaselineFile, RoundTripsExactly) {
  const std::string path = MakeTempDir() + "/b.json";
  const BaselineFile in = SampleFile();
  ASSERT_TRUE(WriteBaselineFile(path, in).ok());
  StatusOr<BaselineFile> out = ReadBaselineFile(path);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->baseline.name, "ci");
  EXPECT_EQ(out->baseline.result.losses, in.baseline.result.losses);
  EXPECT_EQ(out->baseline.result.cpu_tokens_per_s,
            in.baseline.result.cpu_tokens_per_s);
  EXPECT_EQ(out->baseline.result.hardware_id, in.hardware.id);
  EXPECT_EQ(out->baseline.result.provenance.git_revision, "abc123");
  EXPECT_EQ(out->baseline.provenance.created_unix_s, 1700000100);
  EXPECT_EQ(out->hardware.cpu_model, "Test CPU");
  EXPECT_EQ(BaselineFileText(out.value()), ReadFile(path));
}

// Writes SampleFile with `edit` applied to its JSON and returns the error.
Status EditedFileError(const std::function<void(nlohmann::json&)>& edit,
                       std::string* path) {
  *path = MakeTempDir() + "/b.json";
  nlohmann::json j = nlohmann::json::parse(BaselineFileText(SampleFile()));
  edit(j);
  WriteFile(*path, j.dump());
  return ReadBaselineFile(*path).status();
}

TEST(RegressBaselineFile, ValidationMessages) {
  std::string p;
  const std::string hint =
      "write baseline files with 'tune regress baseline export' and do not "
      "edit them; re-export to update one";
  Status s = EditedFileError([](nlohmann::json& j) { j["format"] = "x"; }, &p);
  EXPECT_EQ(s.message(),
            p + ": 'format' is 'x', not 'meshtune-regress-baseline'");
  EXPECT_EQ(s.hint(), hint);
  s = EditedFileError([](nlohmann::json& j) { j["version"] = 2; }, &p);
  EXPECT_EQ(s.message(), p + ": 'version' is 2, this tune reads version 1");
  s = EditedFileError([](nlohmann::json& j) { j["result"].erase("losses"); },
                      &p);
  EXPECT_EQ(s.message(), p + ": key 'result.losses' is missing");
  s = EditedFileError([](nlohmann::json& j) { j["result"]["losses"] = "1"; },
                      &p);
  EXPECT_EQ(s.message(),
            p + ": 'result.losses' must be a non-empty array of numbers");
  s = EditedFileError([](nlohmann::json& j) { j["hardware"]["extra"] = 1; },
                      &p);
  EXPECT_EQ(s.message(), p + ": key 'hardware.extra' is not a known key");
  s = EditedFileError(
      [](nlohmann::json& j) { j["result"]["cpu_tokens_per_s_median"] = 1.0; },
      &p);
  EXPECT_EQ(s.message(), p + ": the medians and spreads in 'result' do not "
                             "match its repeats");
  s = EditedFileError(
      [](nlohmann::json& j) { j["hardware"]["cpu_cores"] = 64; }, &p);
  EXPECT_EQ(s.message().rfind(p + ": 'hardware.id' cpu-", 0), 0u)
      << s.message();
  s = EditedFileError(
      [](nlohmann::json& j) { j["benchmark"] = "cpu-gpt-huge-v9"; }, &p);
  EXPECT_EQ(s.message(), p + ": unknown benchmark 'cpu-gpt-huge-v9'");
  s = EditedFileError([](nlohmann::json& j) { j["spec"] = "model=x"; }, &p);
  EXPECT_EQ(s.message().rfind(p + ": the baseline's definition of "
                                  "cpu-gpt-tiny-v1 ('model=x') differs",
                              0),
            0u)
      << s.message();

  const std::string dir = MakeTempDir();
  WriteFile(dir + "/bad.json", "{not json");
  EXPECT_EQ(ReadBaselineFile(dir + "/bad.json").status().message(),
            dir + "/bad.json: not a JSON file");
  const Status missing = ReadBaselineFile(dir + "/none.json").status();
  EXPECT_EQ(missing.code(), Status::Code::kNotFound);
  EXPECT_EQ(missing.message(), "no baseline file '" + dir + "/none.json'");
}

}  // namespace
}  // namespace meshtune::tuner
