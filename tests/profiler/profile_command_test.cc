// `tune profile --backend cpu --quick` end to end: the nccl-tests-style
// output and the rows it leaves in a temporary results database.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "results/store.h"

namespace {

struct ShellRun {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

ShellRun RunShell(const std::string& args) {
  const std::string cmd =
      std::string(MESHTUNE_TUNE_BINARY) + " " + args + " 2>&1";
  ShellRun run;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return run;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) run.out.append(buf, n);
  int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

std::string TempDbPath() {
  char tmpl[] = "/tmp/meshtune_profile_test_XXXXXX";
  char* dir = mkdtemp(tmpl);
  return std::string(dir != nullptr ? dir : "/tmp") + "/tune.db";
}

TEST(ProfileCommandTest, QuickCpuProfileWritesMeasurements) {
  const std::string db = TempDbPath();
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  ShellRun run = RunShell("profile --backend cpu --quick --db " + db);
  ASSERT_EQ(run.exit_code, 0) << run.out;
  for (const char* text : {"# meshtune profiler ", "# hardware cpu-", "time_us",
                           "tflops", "pct_of_peak", "triad", "# stored "}) {
    EXPECT_NE(run.out.find(text), std::string::npos) << text << "\n" << run.out;
  }

  auto store = meshtune::results::Store::Open(db);
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto hw = (*store)->ListHardware();
  ASSERT_TRUE(hw.ok());
  ASSERT_EQ(hw->size(), 1u);
  EXPECT_EQ((*hw)[0].backend, "cpu");
  auto gemm = (*store)->GetMeasurements((*hw)[0].id, "gemm");
  ASSERT_TRUE(gemm.ok());
  ASSERT_EQ(gemm->size(), 3u);  // the quick standard sweep, fp32
  EXPECT_EQ((*gemm)[0].timer, "steady_clock");
  EXPECT_GT((*gemm)[0].median_s, 0);
  EXPECT_EQ((*gemm)[0].samples, 10);
  auto stream = (*store)->GetMeasurements((*hw)[0].id, "stream");
  ASSERT_TRUE(stream.ok());
  EXPECT_EQ(stream->size(), 3u);
  // Collectives come from meshtune_mpi_bench when MPI was found.
  if (run.out.find("collectives skipped") == std::string::npos) {
    auto ar = (*store)->GetMeasurements((*hw)[0].id, "all_reduce");
    ASSERT_TRUE(ar.ok());
    ASSERT_EQ(ar->size(), 14u);  // 8 B .. 64 KiB
    EXPECT_EQ(ar->front().bytes, 8);
    EXPECT_EQ(ar->front().group_size, 2);
    EXPECT_EQ(ar->front().timer, "mpi_wtime");
    EXPECT_NE(run.out.find("busbw_gbps"), std::string::npos);
  }
  store->reset();
  std::filesystem::remove_all(std::filesystem::path(db).parent_path());
}

TEST(ProfileCommandTest, ModelShapesWithoutDb) {
  ShellRun run = RunShell(
      "profile --backend cpu --quick --no-db --mpi-ranks 0 --model gpt-1.7b "
      "--tp 8 --tokens 64 --reps 2 --warmup 0");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("tp8.qkv.fwd"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("tp8.logits.wgrad"), std::string::npos) << run.out;
  // The engine's own kernels at the model's shapes.
  EXPECT_NE(run.out.find("ns_per_elem"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("elem:gelu:bwd"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("tp8.attention"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("# collectives skipped (--mpi-ranks 0)"),
            std::string::npos);
  EXPECT_EQ(run.out.find("# stored"), std::string::npos);
}

TEST(ProfileCommandTest, SeveralTokenCounts) {
  // One set of shapes per token count, named by it: the micro-batch sizes
  // a search prices are measured instead of extrapolated from one count.
  ShellRun run = RunShell(
      "profile --backend cpu --quick --no-db --mpi-ranks 0 --model gpt-tiny "
      "--tp 1 --tokens 64,256 --reps 1 --warmup 0");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("tp1.t64.qkv.fwd "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("tp1.t256.qkv.fwd "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("64,256 tokens"), std::string::npos) << run.out;
  ShellRun bad = RunShell(
      "profile --backend cpu --quick --no-db --mpi-ranks 0 --model gpt-tiny "
      "--tokens 64,0");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--tokens"), std::string::npos) << bad.out;
}

TEST(ProfileCommandTest, InputErrors) {
  ShellRun cuda = RunShell("profile --backend tpu --no-db");
  EXPECT_EQ(cuda.exit_code, 2);
  EXPECT_NE(cuda.out.find("tune: error: unknown profiler backend 'tpu'"),
            std::string::npos)
      << cuda.out;
  ShellRun dtype = RunShell("profile --quick --no-db --dtype fp64");
  EXPECT_EQ(dtype.exit_code, 2);
  EXPECT_NE(dtype.out.find("--dtype: unknown dtype 'fp64'"), std::string::npos)
      << dtype.out;
  ShellRun ranks = RunShell("profile --quick --no-db --mpi-ranks 1 --reps 1");
  EXPECT_EQ(ranks.exit_code, 2);
  EXPECT_NE(ranks.out.find("--mpi-ranks must be 0 (skip) or at least 2"),
            std::string::npos)
      << ranks.out;
  ShellRun model = RunShell("profile --quick --no-db --model nosuchmodel");
  EXPECT_EQ(model.exit_code, 2) << model.out;
}

}  // namespace
