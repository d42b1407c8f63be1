// `tune train --backend`: flag checks, and what the binary says about the
// CUDA backend on this machine (no CUDA engine in the build: the missing
// toolkit; a CUDA build without a device: no device; a bad attention kernel
// setting: refused before ranks start). A real GPU run is tests/engine/cuda's.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/backends/registry.h"
#include "tests/tuner/run_tune.h"
#include "tuner/machine/local_gpu.h"
#include "tuner/train/flags.h"
#include "tuner/train/report.h"

namespace meshtune::tuner {
namespace {

using testing::RunTune;
using testing::TuneRun;

Status ResolveError(const std::vector<std::string>& args) {
  CLI::App app("test");
  TrainFlags flags;
  AddTrainFlags(&app, &flags);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  app.parse(reversed);
  StatusOr<TrainPlan> plan = ResolveTrainFlags(flags);
  return plan.ok() ? Status::Ok() : plan.status();
}

TEST(TrainBackend, UnknownBackendAndStrayGpuAreInputErrors) {
  Status s = ResolveError({"--model", "gpt-tiny", "--backend", "tpu"});
  EXPECT_EQ(s.message(), "--backend: unknown backend 'tpu'");
  EXPECT_EQ(s.hint(), "use --backend cpu or --backend cuda");
  EXPECT_EQ(s.ExitCode(), 2);
  s = ResolveError({"--model", "gpt-tiny", "--gpu", "h200"});
  EXPECT_EQ(s.message(),
            "--gpu is for --backend cuda (a CPU run predicts with the local "
            "preset)");
  EXPECT_EQ(s.ExitCode(), 2);
  EXPECT_TRUE(ResolveError(
                  {"--model", "gpt-tiny", "--backend", "cuda", "--gpu", "h200"})
                  .ok());
}

TEST(TrainBackend, FlagsRoundTripForRelaunch) {
  TrainFlags f;
  f.model = "gpt-tiny";
  f.backend = "cuda";
  f.gpu = "h200";
  const std::vector<std::string> args = TrainFlagsToArgs(f);
  const std::string joined = [&] {
    std::string j;
    for (const auto& a : args) j += a + " ";
    return j;
  }();
  EXPECT_NE(joined.find("--backend cuda"), std::string::npos) << joined;
  EXPECT_NE(joined.find("--gpu h200"), std::string::npos) << joined;
}

TEST(TrainBackend, JsonNamesTheBackendPrecisionAndModelFlops) {
  engine::TrainConfig c;
  c.model.name = "gpt-tiny";
  c.global_batch_size = 4;
  c.model_flops_per_iteration = 1.5e12;
  const TrainSummary summary;
  const nlohmann::json cpu =
      TrainRunToJson(c, {}, summary, {}, StepTimePrediction());
  EXPECT_EQ(cpu["backend"], "cpu");
  EXPECT_EQ(cpu["config"]["precision"], "fp32");
  EXPECT_DOUBLE_EQ(cpu["model_flops_per_step"].get<double>(), 1.5e12);
  const nlohmann::json gpu =
      TrainRunToJson(c, {}, summary, {}, StepTimePrediction(), nullptr, "cuda");
  EXPECT_EQ(gpu["backend"], "cuda");
  EXPECT_EQ(gpu["config"]["precision"], "bf16");
}

TEST(TrainBackend, CudaWithoutEngineOrDeviceSaysWhich) {
  const TuneRun run = RunTune(
      "train --model gpt-tiny --steps 2 --seq-len 64 --gbs 2 --no-db "
      "--backend cuda");
  if (!engine::backends::TrainerBackendBuilt("cuda")) {
    EXPECT_EQ(run.exit_code, 1) << run.err;
    EXPECT_NE(run.err.find("tune: error: this tune was built without the CUDA "
                           "engine (CMake found no CUDA toolkit with "
                           "cuBLASLt and NCCL)"),
              std::string::npos)
        << run.err;
    return;
  }
  if (!DetectedGpuPreset().empty()) GTEST_SKIP() << "a device is present";
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("tune: error: --backend cuda: no CUDA device "
                         "(cudaGetDeviceCount found none)"),
            std::string::npos)
      << run.err;
}

TEST(TrainBackend, CudaRefusesABadAttentionKernelBeforeRanksStart) {
  if (!engine::backends::TrainerBackendBuilt("cuda"))
    GTEST_SKIP() << "built without the CUDA engine";
  // Refused before any rank starts or any device is touched, so also on a
  // multi-rank layout and without a GPU.
  const char* old = getenv("MESHTUNE_CUDA_ATTENTION");
  const std::string saved = old != nullptr ? old : "";
  setenv("MESHTUNE_CUDA_ATTENTION", "bogus", 1);
  const TuneRun run = RunTune(
      "train --model gpt-tiny --steps 2 --seq-len 64 --gbs 4 --tp 2 --no-db "
      "--backend cuda");
  if (old != nullptr) {
    setenv("MESHTUNE_CUDA_ATTENTION", saved.c_str(), 1);
  } else {
    unsetenv("MESHTUNE_CUDA_ATTENTION");
  }
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("tune: error: MESHTUNE_CUDA_ATTENTION=bogus is not "
                         "an attention kernel"),
            std::string::npos)
      << run.err;
}

}  // namespace
}  // namespace meshtune::tuner
