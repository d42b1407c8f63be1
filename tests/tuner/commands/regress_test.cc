// `tune regress` through the binary: a run records a row; baselines set,
// promote, list, export and import; ten checks without a slowdown pass; the
// planted slowdown (MESHTUNE_PLANTED_SLOWDOWN) is a regression (exit 1);
// altered losses are a numerics change; and the input errors (unknown
// benchmark, missing baseline, no result yet, other hardware) with their
// exact messages (exit 2); the CUDA benchmarks' backend errors (their runs
// need a GPU: scripts/gpu-check).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "engine/backends/registry.h"
#include "results/store.h"
#include "tests/tuner/run_tune.h"
#include "tuner/regress/baseline_file.h"
#include "tuner/regress/benchmarks.h"

namespace meshtune::tuner {
namespace {

using testing::MakeTempDir;
using testing::ReadFile;
using testing::TuneRun;
using testing::WriteFile;

constexpr const char* kBench = "cpu-gpt-tiny-v1";
// Wide enough for tests sharing two cores with other tests (docs/regress.md
// has the measured spread); the planted slowdown below is far larger.
constexpr const char* kTestThreshold = "50";

// `tune regress ARGS` on database `db`, with extra environment `env`.
TuneRun Regress(const std::string& db, const std::string& args,
                const std::string& env = "") {
  return testing::RunTune("regress " + args, "", "TUNE_DB='" + db + "' " + env);
}

std::string NewDb() { return MakeTempDir() + "/regress.db"; }

void ExpectError(const TuneRun& run, int code, const std::string& message,
                 const std::string& hint) {
  EXPECT_EQ(run.exit_code, code) << run.out << run.err;
  std::string expected = "tune: error: " + message + "\n";
  if (!hint.empty()) expected += "tune: hint: " + hint + "\n";
  EXPECT_EQ(run.err, expected);
}

std::vector<results::RegressResult> Results(const std::string& db) {
  auto store = results::Store::Open(db);
  EXPECT_TRUE(store.ok()) << store.status().message();
  auto rows = (*store)->GetRegressResults();
  EXPECT_TRUE(rows.ok());
  return rows.ok() ? rows.value() : std::vector<results::RegressResult>();
}

const std::string& ThisMachine() {
  static const std::string id =
      RegressHardware(*FindRegressBenchmark(kBench).value()).id;
  return id;
}

TEST(RegressCommand, RunRecordsAResult) {
  const std::string db = NewDb();
  const TuneRun run =
      Regress(db, std::string("run --benchmark ") + kBench + " --repeats 3");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.rfind(std::string("result 1: ") + kBench + " on " +
                              ThisMachine() + " at git ",
                          0),
            0u)
      << run.out;
  EXPECT_NE(run.err.find("repeat 3/3"), std::string::npos) << run.err;
  const auto rows = Results(db);
  ASSERT_EQ(rows.size(), 1u);
  const results::RegressResult& r = rows[0];
  EXPECT_EQ(r.benchmark, kBench);
  EXPECT_EQ(r.hardware_id, ThisMachine());
  EXPECT_EQ(r.spec, FindRegressBenchmark(kBench).value()->Spec());
  EXPECT_EQ(r.tokens_per_s.size(), 3u);
  EXPECT_EQ(r.losses.size(), 2u + 3u * 2u);      // warm-up + repeats x steps
  EXPECT_NE(r.losses.back(), r.losses.front());  // the weights change
  EXPECT_GT(r.cpu_tokens_per_s_median, 0);
  EXPECT_FALSE(r.provenance.git_revision.empty());
  EXPECT_NE(Regress(db, "results").out.find(kBench), std::string::npos);
}

TEST(RegressCommand, BaselineSetPromoteListExportImport) {
  const std::string db = NewDb();
  const std::string run = std::string("run --benchmark ") + kBench;
  ASSERT_EQ(Regress(db, run + " --repeats 2").exit_code, 0);
  TuneRun set = Regress(db, std::string("baseline set --name main "
                                        "--benchmark ") +
                                kBench);
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(set.out.rfind(std::string("baseline 'main' of ") + kBench +
                              " set to result 1 (git ",
                          0),
            0u);
  ASSERT_EQ(Regress(db, run + " --repeats 2").exit_code, 0);
  set = Regress(db,
                std::string("baseline set --name main --benchmark ") + kBench);
  EXPECT_NE(set.out.find("set to result 2"), std::string::npos) << set.out;
  EXPECT_NE(set.out.find("; was result 1\n"), std::string::npos) << set.out;
  set = Regress(db, std::string("baseline set --name old --benchmark ") +
                        kBench + " --result 1");
  EXPECT_EQ(set.exit_code, 0) << set.err;
  const TuneRun list = Regress(db, "baseline list");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("main  " + std::string(kBench) + "  " +
                          ThisMachine() + "       2"),
            std::string::npos)
      << list.out;
  EXPECT_NE(list.out.find("old   " + std::string(kBench)), std::string::npos)
      << list.out;

  const std::string dir = MakeTempDir();
  const TuneRun exported =
      Regress(db, "baseline export --name main --file " + dir + "/main.json");
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(exported.out, "wrote baseline 'main' of " + std::string(kBench) +
                              " to " + dir + "/main.json\n");
  const std::string other_db = NewDb();
  const TuneRun imported = Regress(
      other_db, "baseline import --file " + dir + "/main.json --name ci");
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_NE(
      imported.out.find("imported baseline 'ci' of " + std::string(kBench) +
                        " (measured on " + ThisMachine()),
      std::string::npos)
      << imported.out;
  ASSERT_EQ(
      Regress(other_db, "baseline export --name ci --file " + dir + "/ci.json")
          .exit_code,
      0);
  // The numbers and the machine survive the round trip exactly.
  nlohmann::json a = nlohmann::json::parse(ReadFile(dir + "/main.json"));
  nlohmann::json b = nlohmann::json::parse(ReadFile(dir + "/ci.json"));
  EXPECT_EQ(a["result"], b["result"]);
  EXPECT_EQ(a["hardware"], b["hardware"]);
  EXPECT_EQ(b["name"], "ci");
  EXPECT_NE(Regress(other_db, "baseline list").out.find("imported"),
            std::string::npos);
}

TEST(RegressCommand, TenChecksWithoutSlowdownPass) {
  const std::string db = NewDb();
  const std::string run = std::string("run --benchmark ") + kBench;
  ASSERT_EQ(Regress(db, run).exit_code, 0);
  ASSERT_EQ(
      Regress(db, std::string("baseline set --name main --benchmark ") + kBench)
          .exit_code,
      0);
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(Regress(db, run + " --repeats 3").exit_code, 0);
    const TuneRun check =
        Regress(db, std::string("check --benchmark ") + kBench +
                        " --baseline main --threshold " + kTestThreshold);
    EXPECT_EQ(check.exit_code, 0) << "check " << i << "\n"
                                  << check.out << check.err;
    EXPECT_NE(check.out.find("verdict: pass\n"), std::string::npos);
    // One thread, fixed seed and data: the losses repeat exactly.
    EXPECT_NE(check.out.find("0.0e+00 @1"), std::string::npos) << check.out;
  }
}

TEST(RegressCommand, PlantedSlowdownIsARegression) {
  const std::string db = NewDb();
  const std::string run = std::string("run --benchmark ") + kBench;
  ASSERT_EQ(Regress(db, run).exit_code, 0);
  ASSERT_EQ(
      Regress(db, std::string("baseline set --name main --benchmark ") + kBench)
          .exit_code,
      0);
  const TuneRun slow = Regress(db, run, "MESHTUNE_PLANTED_SLOWDOWN=30");
  ASSERT_EQ(slow.exit_code, 0) << slow.err;
  EXPECT_NE(slow.err.find("MESHTUNE_PLANTED_SLOWDOWN=30 is set"),
            std::string::npos);
  const TuneRun check =
      Regress(db, std::string("check --benchmark ") + kBench +
                      " --baseline main --threshold " + kTestThreshold);
  EXPECT_EQ(check.exit_code, 1) << check.out << check.err;
  EXPECT_NE(check.out.find("REGRESSION\n"), std::string::npos) << check.out;
  // The hook repeats the GEMM: same numbers, so only throughput fails.
  EXPECT_NE(check.out.find("verdict: REGRESSION (throughput)\n"),
            std::string::npos)
      << check.out;
  EXPECT_EQ(check.err.rfind(std::string("tune: error: ") + kBench +
                                " regressed against baseline 'main': tokens "
                                "per CPU second -",
                            0),
            0u)
      << check.err;
  EXPECT_NE(check.err.find("tune: hint: if the change is intended, promote a "
                           "new baseline: tune regress baseline set --name "
                           "main --benchmark " +
                           std::string(kBench) + "\n"),
            std::string::npos);
}

TEST(RegressCommand, AlteredLossesAreANumericsChange) {
  const std::string db = NewDb();
  const std::string dir = MakeTempDir();
  ASSERT_EQ(
      Regress(db, std::string("run --benchmark ") + kBench + " --repeats 2")
          .exit_code,
      0);
  ASSERT_EQ(
      Regress(db, std::string("baseline set --name main --benchmark ") + kBench)
          .exit_code,
      0);
  ASSERT_EQ(
      Regress(db, "baseline export --name main --file " + dir + "/main.json")
          .exit_code,
      0);
  nlohmann::json j = nlohmann::json::parse(ReadFile(dir + "/main.json"));
  j["result"]["losses"][3] = j["result"]["losses"][3].get<double>() * 1.001;
  WriteFile(dir + "/altered.json", j.dump(2));
  const TuneRun check =
      Regress(db, std::string("check --benchmark ") + kBench + " --baseline " +
                      dir + "/altered.json --threshold 90");
  EXPECT_EQ(check.exit_code, 1) << check.out << check.err;
  EXPECT_NE(check.out.find("NUMERICS CHANGED"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("(imported)"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("verdict: REGRESSION (numerics changed)\n"),
            std::string::npos);
  EXPECT_NE(check.err.find("loss at step 4 differs by 0.000999"),
            std::string::npos)
      << check.err;
  // The unaltered file passes.
  EXPECT_EQ(Regress(db, std::string("check --benchmark ") + kBench +
                            " --baseline " + dir + "/main.json --threshold 90")
                .exit_code,
            0);
}

TEST(RegressCommand, InputErrors) {
  const std::string db = NewDb();
  ASSERT_TRUE(results::Store::Open(db).ok());  // an empty, current database
  const std::string check = std::string("check --benchmark ") + kBench;
  ExpectError(Regress(db, "run --benchmark cpu-gpt-huge-v9"), 2,
              "unknown benchmark 'cpu-gpt-huge-v9'",
              "use one of: cpu-gpt-tiny-v1, cpu-llama-tiny-v1, "
              "cuda-gpt-tiny-v1 ('tune regress list' describes them)");
  ExpectError(Regress(db, check + " --baseline main"), 2,
              "no baseline 'main' for cpu-gpt-tiny-v1 in " + db,
              "set one with 'tune regress baseline set --name main "
              "--benchmark cpu-gpt-tiny-v1' after 'tune regress run', or "
              "import a file with 'tune regress baseline import --file F' "
              "('tune regress baseline list' shows the stored ones)");
  ExpectError(Regress(db, check + " --baseline /nonexistent/b.json"), 2,
              "no baseline file '/nonexistent/b.json'",
              "pass a file written by 'tune regress baseline export', or a "
              "baseline name ('tune regress baseline list')");
  ExpectError(Regress(db, check + " --baseline main --threshold 120"), 2,
              "--threshold 120.00 is out of range",
              "pass a drop in percent from 0 to 100, e.g. --threshold 10");
  ExpectError(Regress(db, check + " --baseline main --metric gpu"), 2,
              "--metric 'gpu' is not cpu or wall",
              "pass --metric cpu (default) or wall");
  ExpectError(Regress(db, "run --benchmark cpu-gpt-tiny-v1 --repeats 0"), 2,
              "--repeats 0 is out of range",
              "pass --repeats N with N from 1 to 1000 (default 5)");
  ExpectError(Regress(db, "baseline set --name main --benchmark " +
                              std::string(kBench)),
              2,
              "no cpu-gpt-tiny-v1 result for this machine (" + ThisMachine() +
                  ") in " + db,
              "run 'tune regress run --benchmark cpu-gpt-tiny-v1' first, or "
              "pass --result ID");
  const TuneRun bare = Regress(db, "");
  EXPECT_EQ(bare.exit_code, 2);
  EXPECT_NE(bare.err.find("tune: hint: run 'tune regress --help'"),
            std::string::npos)
      << bare.err;

  // A baseline of this machine, but no result yet.
  const RegressBenchmark& b = *FindRegressBenchmark(kBench).value();
  BaselineFile file;
  file.hardware = RegressHardware(b);
  file.baseline.name = "here";
  file.baseline.result.benchmark = kBench;
  file.baseline.result.spec = b.Spec();
  file.baseline.result.hardware_id = file.hardware.id;
  file.baseline.result.tokens_per_s = {100, 110, 120};
  file.baseline.result.cpu_tokens_per_s = {100, 110, 120};
  file.baseline.result.tokens_per_s_median = 110;
  file.baseline.result.cpu_tokens_per_s_median = 110;
  file.baseline.result.tokens_per_s_spread = 10;
  file.baseline.result.cpu_tokens_per_s_spread = 10;
  file.baseline.result.losses = {8.0};
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(WriteBaselineFile(dir + "/here.json", file).ok());
  ExpectError(Regress(db, check + " --baseline " + dir + "/here.json"), 2,
              "no cpu-gpt-tiny-v1 result for this machine (" + ThisMachine() +
                  ") in " + db,
              "run 'tune regress run --benchmark cpu-gpt-tiny-v1' first");

  // A baseline of another machine.
  file.hardware.cpu_model = "Other CPU";
  file.hardware.cpu_cores = 96;
  file.hardware.id = results::ComputeHardwareId(file.hardware);
  file.baseline.name = "ci";
  file.baseline.result.hardware_id = file.hardware.id;
  ASSERT_TRUE(WriteBaselineFile(dir + "/ci.json", file).ok());
  ASSERT_EQ(Regress(db, "baseline import --file " + dir + "/ci.json").exit_code,
            0);
  const results::HardwareFingerprint here = RegressHardware(b);
  ExpectError(Regress(db, check + " --baseline ci"), 2,
              "baseline 'ci' of cpu-gpt-tiny-v1 was measured on " +
                  file.hardware.id + " (Other CPU, 96 CPUs), this machine is " +
                  here.id + " (" + here.cpu_model + ", " +
                  std::to_string(here.cpu_cores) + " CPUs)",
              "run and set a baseline on this machine (tune regress baseline "
              "set --name ci --benchmark cpu-gpt-tiny-v1), or pass "
              "--allow-other-hardware to compare anyway");
  // Allowed, it gets as far as the missing result.
  EXPECT_EQ(
      Regress(db, check + " --baseline ci --allow-other-hardware").exit_code,
      2);
}

TEST(RegressCommand, CudaBenchmarkBackendErrors) {
  const std::string db = NewDb();
  ASSERT_TRUE(results::Store::Open(db).ok());
  ExpectError(Regress(db, "run --benchmark cuda-gpt-tiny-v1 --backend bogus"),
              2, "--backend: unknown backend 'bogus'",
              "use --backend cpu or --backend cuda");
  ExpectError(Regress(db, "run --benchmark cpu-gpt-tiny-v1 --backend cuda"), 2,
              "cpu-gpt-tiny-v1 is a benchmark of the cpu engine, not of cuda",
              "pick a cuda- benchmark ('tune regress list'), or leave out "
              "--backend");
  ExpectError(Regress(db, "run --benchmark cuda-gpt-tiny-v1 --backend cpu"), 2,
              "cuda-gpt-tiny-v1 is a benchmark of the cuda engine, not of cpu",
              "pick a cpu- benchmark ('tune regress list'), or leave out "
              "--backend");
  if (engine::backends::CudaDeviceCount() > 0) {
    GTEST_SKIP() << "this machine has a GPU: the missing-engine and "
                    "missing-device errors cannot happen";
  }
  const std::string run = "run --benchmark cuda-gpt-tiny-v1 --backend cuda";
  const std::string check =
      "check --benchmark cuda-gpt-tiny-v1 --baseline main";
  if (!engine::backends::TrainerBackendBuilt("cuda")) {
    const std::string why =
        " --benchmark cuda-gpt-tiny-v1 needs the CUDA engine, and this tune "
        "was built without it (CMake found no CUDA toolkit with cuBLASLt and "
        "NCCL)";
    const std::string hint =
        "rebuild where the CUDA toolkit is installed (/usr/local/cuda), or use "
        "a cpu- benchmark";
    ExpectError(Regress(db, run), 1, "tune regress run" + why, hint);
    ExpectError(Regress(db, check), 1, "tune regress check" + why, hint);
  } else {
    const std::string why =
        " --benchmark cuda-gpt-tiny-v1 found no CUDA device on this machine "
        "(cudaGetDeviceCount found none)";
    const std::string hint =
        "run it on a machine with an NVIDIA GPU and driver, or use a cpu- "
        "benchmark";
    ExpectError(Regress(db, run), 2, "tune regress run" + why, hint);
    ExpectError(Regress(db, check), 2, "tune regress check" + why, hint);
  }
  EXPECT_TRUE(Results(db).empty());
}

}  // namespace
}  // namespace meshtune::tuner
