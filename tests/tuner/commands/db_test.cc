// `tune search` recording into the results database and `tune db`
// (hardware, measurements, export): outputs, exit codes and exact messages.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "results/store.h"
#include "tests/tuner/tune_in_process.h"

namespace meshtune::tuner {
namespace {

using testing::MakeTempDir;
using testing::ReadFile;
using testing::RunTuneInProcess;
using testing::TuneRun;
using testing::WriteFile;

constexpr const char* kSearch = "--model gpt3-1.3b --gpus 8 --top 3";

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

int CountLines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// A database with one CPU machine and two measurements, written through the
// store API as `tune profile` would.
std::string SeedMeasurements(const std::string& dir) {
  const std::string path = dir + "/m.db";
  auto store = results::Store::Open(path);
  EXPECT_TRUE(store.ok()) << store.status().message();
  results::HardwareFingerprint hw;
  hw.backend = "cpu";
  hw.cpu_model = "Test CPU";
  hw.cpu_cores = 4;
  hw.memory_gib = 16;
  hw.library_versions = "eigen=3.4.0";
  hw.id = "cpu-00000000000000aa";
  const results::Provenance prov{"0.1.0", "abc", 1700000000};
  EXPECT_TRUE((*store)->PutHardware(hw, prov).ok());
  results::Measurement gemm;
  gemm.hardware_id = hw.id;
  gemm.op = "gemm";
  gemm.dtype = "fp32";
  gemm.m = 512;
  gemm.n = 256;
  gemm.k = 128;
  gemm.samples = 10;
  gemm.median_s = 1.5e-4;
  gemm.min_s = 1.25e-4;
  gemm.p99_s = 2e-4;
  gemm.cv = 0.05;
  gemm.timer = "steady_clock";
  results::Measurement stream = gemm;
  stream.op = "stream";
  stream.m = stream.n = stream.k = 0;
  stream.bytes = 1048576;
  EXPECT_TRUE((*store)->PutMeasurements({gemm, stream}, prov).ok());
  return path;
}

TEST(DbCommandTest, SearchRecordsItsTopCandidatesWithPredictions) {
  const std::string dir = MakeTempDir();
  const std::string db = dir + "/runs.db";
  TuneRun run =
      RunTuneInProcess(std::string(kSearch) + " --json --db '" + db + "'");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  TuneRun csv = RunTuneInProcess("db export --table candidates --csv - --db '" +
                                 db + "'");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_EQ(CountLines(csv.out), 1 + 3);  // header + --top 3
  EXPECT_EQ(csv.out.rfind("id,search_id,rank,tp,pp,vpp,cp,dp,ep,sp,mbs,", 0),
            0u);
  EXPECT_NE(csv.out.find(",datasheet,"), std::string::npos);
  TuneRun searches =
      RunTuneInProcess("db export --table searches --csv - --db '" + db + "'");
  EXPECT_NE(searches.out.find("\n1,gpt3-1.3b,a100-80g,8,8,"), std::string::npos)
      << searches.out;
  EXPECT_NE(searches.out.find("tune search --model gpt3-1.3b --gpus 8"),
            std::string::npos);
  // A second search appends; nothing is overwritten.
  ASSERT_EQ(
      RunTuneInProcess(std::string(kSearch) + " --db '" + db + "'").exit_code,
      0);
  auto store = results::Store::Open(db);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->ListSearches()->size(), 2u);
  EXPECT_EQ((*store)->GetCandidates(2)->size(), 3u);
}

TEST(DbCommandTest, DefaultIsTuneDbInTheWorkingDirectoryOrTuneDbEnv) {
  const std::string dir = MakeTempDir();
  ASSERT_EQ(RunTuneInProcess(kSearch, dir, "TUNE_DB=").exit_code, 0);
  EXPECT_TRUE(Exists(dir + "/tune.db"));
  ASSERT_EQ(RunTuneInProcess(kSearch, dir, "TUNE_DB=env.db").exit_code, 0);
  EXPECT_TRUE(Exists(dir + "/env.db"));
  const std::string quiet = MakeTempDir();
  ASSERT_EQ(
      RunTuneInProcess(std::string(kSearch) + " --no-db", quiet, "TUNE_DB=")
          .exit_code,
      0);
  EXPECT_FALSE(Exists(quiet + "/tune.db"));
}

TEST(DbCommandTest, ExplicitBadDbIsAnInputErrorBeforeAnyOutput) {
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/notes.db", "just text\n");
  TuneRun run = RunTuneInProcess(std::string(kSearch) + " --db notes.db", dir);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err,
            "tune: error: notes.db: not an SQLite database (it was not "
            "modified)\n"
            "tune: hint: pass --db with a meshtune results database or a new "
            "file name\n");
  EXPECT_EQ(ReadFile(dir + "/notes.db"), "just text\n");
  TuneRun both =
      RunTuneInProcess(std::string(kSearch) + " --db x.db --no-db", dir);
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_EQ(both.err,
            "tune: error: --db and --no-db contradict each other\n"
            "tune: hint: pass one of them\n");
}

TEST(DbCommandTest, ImplicitBadDbOnlyWarns) {
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/tune.db", "just text\n");
  TuneRun run = RunTuneInProcess(kSearch, dir, "TUNE_DB=");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_NE(run.out.find("evaluated"), std::string::npos);
  EXPECT_EQ(run.err,
            "tune: warning: not recording this search: tune.db: not an "
            "SQLite database (it was not modified)\n");
  EXPECT_EQ(ReadFile(dir + "/tune.db"), "just text\n");
}

TEST(DbCommandTest, TwoTuneProcessesWritingAtOnceBothSucceed) {
  const std::string dir = MakeTempDir();
  const std::string tune = std::string("'") + MESHTUNE_TUNE_BINARY + "' " +
                           kSearch + " --db '" + dir + "/both.db' >/dev/null";
  const std::string cmd = tune + " & a=$!; " + tune +
                          " & b=$!; wait $a || exit 3; wait $b || exit 4";
  ASSERT_EQ(std::system(("bash -c \"" + cmd + "\"").c_str()), 0);
  auto store = results::Store::Open(dir + "/both.db");
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->ListSearches()->size(), 2u);
}

TEST(DbCommandTest, ListsHardwareAndMeasurements) {
  const std::string dir = MakeTempDir();
  const std::string db = SeedMeasurements(dir);
  TuneRun hw = RunTuneInProcess("db hardware --db '" + db + "'");
  ASSERT_EQ(hw.exit_code, 0) << hw.err;
  EXPECT_EQ(hw.out,
            "id                    backend  cpu_model  cpu_cores  memory_gib  "
            "gpu_model  gpu_count  driver  libraries\n"
            "cpu-00000000000000aa  cpu      Test CPU           4        16.0  "
            "-                  0  -       eigen=3.4.0\n");
  TuneRun all = RunTuneInProcess("db measurements --db '" + db + "'");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(CountLines(all.out), 3);
  TuneRun gemm = RunTuneInProcess(
      "db measurements --op gemm --hardware "
      "cpu-00000000000000aa --db '" +
      db + "'");
  ASSERT_EQ(gemm.exit_code, 0) << gemm.err;
  EXPECT_EQ(gemm.out,
            "hardware_id           op    dtype    m x n x k  bytes  group  "
            "nodes  samples  median_us  min_us  p99_us     cv  timer\n"
            "cpu-00000000000000aa  gemm  fp32   512x256x128      -      1  "
            "    1       10     150.00  125.00  200.00  0.050  steady_clock\n");
  TuneRun none =
      RunTuneInProcess("db measurements --op all_reduce --db '" + db + "'");
  EXPECT_EQ(none.exit_code, 0);
  EXPECT_EQ(none.out, "");
  EXPECT_EQ(none.err, "tune: no measurements match in " + db +
                          "; 'tune profile' records them\n");
}

TEST(DbCommandTest, ExportsCsvToAFile) {
  const std::string dir = MakeTempDir();
  const std::string db = SeedMeasurements(dir);
  TuneRun run = RunTuneInProcess("db export --table measurements --csv '" +
                                 dir + "/m.csv' --db '" + db + "'");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string csv = ReadFile(dir + "/m.csv");
  EXPECT_EQ(CountLines(csv), 3);
  EXPECT_NE(csv.find(",stream,fp32,0,0,0,1048576.0,"), std::string::npos)
      << csv;
  EXPECT_EQ(run.err, "tune: wrote measurements to " + dir + "/m.csv\n");
}

// Engine-kernel rows (profiler/engine_ops.h) show their shape: the element
// count, or batch_heads x seq x head_dim for attention.
TEST(DbCommandTest, EngineKernelRowsShowTheirShape) {
  const std::string dir = MakeTempDir();
  const std::string db = SeedMeasurements(dir);
  {
    auto store = results::Store::Open(db);
    ASSERT_TRUE(store.ok());
    results::Measurement gelu;
    gelu.hardware_id = "cpu-00000000000000aa";
    gelu.op = "elem:gelu:bwd";
    gelu.dtype = "fp32";
    gelu.m = 65536;
    gelu.samples = 10;
    gelu.median_s = 2e-3;
    gelu.timer = "steady_clock";
    results::Measurement attn = gelu;
    attn.op = "attn:fwd";
    attn.m = 2;
    attn.n = 128;
    attn.k = 64;
    ASSERT_TRUE(
        (*store)
            ->PutMeasurements({gelu, attn}, {"0.1.0", "abc", 1700000000})
            .ok());
  }
  TuneRun elem =
      RunTuneInProcess("db measurements --op elem:gelu:bwd --db '" + db + "'");
  ASSERT_EQ(elem.exit_code, 0) << elem.err;
  EXPECT_EQ(CountLines(elem.out), 2);
  EXPECT_NE(elem.out.find(" 65536 "), std::string::npos) << elem.out;
  TuneRun attn =
      RunTuneInProcess("db measurements --op attn:fwd --db '" + db + "'");
  ASSERT_EQ(attn.exit_code, 0) << attn.err;
  EXPECT_NE(attn.out.find("2x128x64"), std::string::npos) << attn.out;
}

TEST(DbCommandTest, InputAndIoErrorsHaveExactMessagesAndExitCodes) {
  const std::string dir = MakeTempDir();
  const std::string db = SeedMeasurements(dir);
  TuneRun op = RunTuneInProcess("db measurements --op gemmm --db '" + db + "'");
  EXPECT_EQ(op.exit_code, 2);
  EXPECT_EQ(op.err,
            "tune: error: --op: unknown op 'gemmm'\n"
            "tune: hint: use one of: gemm, attention, stream, all_reduce, "
            "all_gather, reduce_scatter, all_to_all, send_recv, attn:fwd, "
            "attn:bwd, elem:<op>:fwd|bwd (<op>: norm, bias_dropout_add, "
            "residual_add, gelu, swiglu, rope, cross_entropy, embedding, "
            "cross_entropy_native, cross_entropy_te)\n");
  // An elementwise kernel the cost model does not know is not an op.
  EXPECT_EQ(RunTuneInProcess("db measurements --op elem:softmax:fwd --db '" +
                             db + "'")
                .exit_code,
            2);
  TuneRun hw =
      RunTuneInProcess("db measurements --hardware cpu-1 --db '" + db + "'");
  EXPECT_EQ(hw.exit_code, 2);
  EXPECT_EQ(hw.err, "tune: error: --hardware: no machine 'cpu-1' in " + db +
                        "\ntune: hint: list the stored machines with 'tune "
                        "db hardware'\n");
  TuneRun table =
      RunTuneInProcess("db export --table runs --csv - --db '" + db + "'");
  EXPECT_EQ(table.exit_code, 2);
  EXPECT_EQ(table.err,
            "tune: error: --table: unknown table 'runs'\n"
            "tune: hint: use one of: hardware, measurements, searches, "
            "candidates, training_runs, predicted_vs_measured, "
            "regress_results, regress_baselines, validations, "
            "validation_runs, fitted_factors\n");
  TuneRun missing = RunTuneInProcess("db hardware", dir, "TUNE_DB=");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err,
            "tune: error: tune.db: no such results database\n"
            "tune: hint: run 'tune search' or 'tune profile' first, or pass "
            "--db PATH\n");
  EXPECT_FALSE(Exists(dir + "/tune.db"));  // reading never creates
  TuneRun unwritable = RunTuneInProcess(
      "db export --table hardware --csv "
      "/nonexistent/dir/h.csv --db '" +
      db + "'");
  EXPECT_EQ(unwritable.exit_code, 2);
  EXPECT_EQ(unwritable.err,
            "tune: error: --csv: cannot write '/nonexistent/dir/h.csv': "
            "directory '/nonexistent/dir': No such file or directory\n"
            "tune: hint: create the directory first, or write somewhere "
            "else\n");
}

TEST(DbCommandTest, NewerSchemaIsRefusedWithBothVersions) {
  const std::string dir = MakeTempDir();
  const std::string db = SeedMeasurements(dir);
  {
    std::vector<results::Migration> future = results::BuiltinMigrations();
    future.push_back(
        {results::kSchemaVersion + 1, "future", "CREATE TABLE f (x);"});
    results::OpenOptions options;
    options.migrations = &future;
    ASSERT_TRUE(results::Store::Open(db, options).ok());
  }
  const std::string before = ReadFile(db);
  TuneRun run = RunTuneInProcess("db hardware --db '" + db + "'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "tune: error: " + db +
                         ": results database schema version " +
                         std::to_string(results::kSchemaVersion + 1) +
                         " is newer than this tune's version " +
                         std::to_string(results::kSchemaVersion) +
                         "\n"
                         "tune: hint: use a newer tune, or pass --db with "
                         "another file\n");
  TuneRun search =
      RunTuneInProcess(std::string(kSearch) + " --db '" + db + "'");
  EXPECT_EQ(search.exit_code, 2);
  EXPECT_EQ(ReadFile(db), before);
}

}  // namespace
}  // namespace meshtune::tuner
