// `tune serve --validate`'s workflow in process (tuner/validate/serving.h):
// llama-tiny plans at tp 1 and 2, batches 1 and 4, run on the CPU engine
// and predicted on the `local` preset; the predictions are the cost model's
// static-batch TTFT and TPOT (checked against PrefillTime_s and
// DecodeStep), every plan is measured, the statistics cover them, and the
// report and JSON show them. Also the input errors and the command's flags.
#include "tuner/validate/serving.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "costmodel/datasheet_calibration.h"
#include "costmodel/serving_model.h"
#include "engine/backends/registry.h"
#include "profiler/cpu_backend.h"
#include "search_spaces/presets/presets.h"
#include "tests/tuner/tune_in_process.h"
#include "tuner/inputs/local_cluster.h"

namespace meshtune::tuner {
namespace {

ServeValidationRequest Request(const costmodel::Calibration& cal,
                               const search_spaces::ClusterSpec& cluster) {
  ServeValidationRequest r;
  r.model = search_spaces::ResolveModel("llama-tiny").value();
  r.cluster = cluster;
  r.calibration = &cal;
  r.gpus = 2;
  r.isl = 16;
  r.osl = 4;
  r.batches = {1, 4};
  r.repeats = 2;
  return r;
}

search_spaces::ClusterSpec Local() {
  search_spaces::ClusterSpec c = LocalCluster(profiler::ReadCpuInfo());
  LocalNodeForRanks(2, &c);
  return c;
}

TEST(ValidateServing, RunsEveryPlanAndComparesWithThePredictions) {
  const search_spaces::ClusterSpec local = Local();
  const costmodel::DatasheetCalibration cal(local);
  const ServeValidationRequest r = Request(cal, local);
  std::ostringstream progress;
  auto v = ValidateServing(r, progress);
  ASSERT_TRUE(v.ok()) << v.status().message();
  ASSERT_EQ(v->plans.size(), 4u);
  for (const ServePlanOutcome& p : v->plans) {
    search_spaces::ServingConfig c;
    c.tp = p.tp;
    EXPECT_DOUBLE_EQ(p.predicted_ttft_s,
                     costmodel::PrefillTime_s(r.model, local, c, p.batch * 16,
                                              p.batch, cal));
    const costmodel::DecodeBreakdown d =
        costmodel::DecodeStep(r.model, local, c, p.batch, 16 + 2, cal);
    EXPECT_DOUBLE_EQ(p.predicted_tpot_s, d.total_s() - d.overhead_s);
    ASSERT_TRUE(p.measured_ttft_s.has_value()) << p.error;
    ASSERT_TRUE(p.measured_tpot_s.has_value());
    EXPECT_GT(*p.measured_ttft_s, 0);
    EXPECT_TRUE(p.ttft_spread_pct.has_value());
  }
  EXPECT_EQ(v->plans[0].tp, 1);
  EXPECT_EQ(v->plans[3].tp, 2);
  EXPECT_EQ(v->plans[3].batch, 4);
  EXPECT_EQ(v->ttft.measured, 4);
  EXPECT_EQ(v->tpot.measured, 4);
  EXPECT_TRUE(v->ttft.spearman.has_value());
  EXPECT_GT(v->predicted_ttft_ratio, 1.0);
  // Two rounds of four plans, a line each.
  const std::string lines = progress.str();
  EXPECT_EQ(std::count(lines.begin(), lines.end(), '\n'), 8);

  std::ostringstream table;
  PrintServeValidation(table, r, *v);
  EXPECT_NE(table.str().find("Serving plans of llama-tiny"), std::string::npos);
  EXPECT_NE(table.str().find("TTFT: Spearman "), std::string::npos);
  const nlohmann::json j = ServeValidationJson(r, *v);
  EXPECT_EQ(j["plans"].size(), 4u);
  EXPECT_EQ(j["plans"][1]["batch"], 4);
  EXPECT_EQ(j["ttft"]["measured"], 4);
}

TEST(ValidateServing, InputErrors) {
  const search_spaces::ClusterSpec local = Local();
  const costmodel::DatasheetCalibration cal(local);
  std::ostringstream progress;
  ServeValidationRequest r = Request(cal, local);
  r.osl = 0;
  auto bad = ValidateServing(r, progress);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().ExitCode(), 2);
  EXPECT_EQ(bad.status().message(),
            "serving validation needs --isl and --osl of 1 or more, --repeats "
            "of 1 or more and batches of 1 or more");
  r = Request(cal, local);
  r.model = search_spaces::ResolveModel("gpt-tiny").value();
  r.isl = 300;  // beyond gpt-tiny's 256 learned positions
  auto long_prompt = ValidateServing(r, progress);
  ASSERT_FALSE(long_prompt.ok());
  EXPECT_EQ(long_prompt.status().message(),
            "prompt plus new tokens is 304 positions, but model gpt-tiny has "
            "learned positions for 256");
  r = Request(cal, local);
  r.prefix = r.isl;
  auto all_cached = ValidateServing(r, progress);
  ASSERT_FALSE(all_cached.ok());
  EXPECT_EQ(all_cached.status().message(),
            "--prefix must be in [0, 15] (below --isl 16), got 16");
}

TEST(ServeValidateCommand, ACachedPrefixIsRunUntimedAndPricedAsCached) {
  // --prefix 12 of 16 prompt tokens: the engine caches them before the
  // clock and the model prices the 4 others against them.
  const testing::TuneRun run = testing::RunTuneInProcess(
      "serve --model llama-tiny --gpus 1 --isl 16 --osl 2 --prefix 12 "
      "--validate --repeats 1 --no-db --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["prefix"], 12);
  search_spaces::ClusterSpec local = LocalCluster(profiler::ReadCpuInfo());
  LocalNodeForRanks(1, &local);  // --gpus 1
  const costmodel::DatasheetCalibration cal(local);
  const search_spaces::ModelSpec m =
      search_spaces::ResolveModel("llama-tiny").value();
  for (const nlohmann::json& p : j["plans"]) {
    search_spaces::ServingConfig c;
    c.tp = p["tp"].get<int64_t>();
    const int64_t b = p["batch"].get<int64_t>();
    EXPECT_NEAR(
        p["predicted_ttft_ms"].get<double>(),
        1e3 * costmodel::PromptsPrefillTime_s(m, local, c, 16, 12, b, cal),
        1e-9);
    EXPECT_GT(p["measured_ttft_ms"].get<double>(), 0);
  }
}

TEST(ServeValidateCommand, FlagsAndJson) {
  const testing::TuneRun run = testing::RunTuneInProcess(
      "serve --model llama-tiny --gpus 1 --isl 8 --osl 2 --validate "
      "--repeats 1 --no-db --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["plans"].size(), 5u);  // tp 1 x batches 1, 2, 4, 8, 16
  EXPECT_EQ(j["model"], "llama-tiny");
  const testing::TuneRun gpu = testing::RunTuneInProcess(
      "serve --model llama-tiny --gpus 1 --gpu h100 --isl 8 --osl 2 "
      "--validate");
  EXPECT_EQ(gpu.exit_code, 2);
  EXPECT_EQ(gpu.err,
            "tune: error: --validate runs the plans on this machine's CPU "
            "engine, so it predicts them on --gpu local, not h100\n"
            "tune: hint: leave out --gpu or pass --gpu local (or --backend "
            "cuda on a GPU machine)\n");
  if (engine::backends::CudaDeviceCount() == 0) {
    const testing::TuneRun cuda = testing::RunTuneInProcess(
        "serve --model llama-tiny --gpus 1 --isl 8 --osl 2 --validate "
        "--backend cuda");
    EXPECT_EQ(cuda.exit_code, 2);
    EXPECT_EQ(
        cuda.err,
        "tune: error: --validate --backend cuda runs one rank per GPU: "
        "--gpus 1 but this machine has 0 CUDA devices\n"
        "tune: hint: run it on a machine with an NVIDIA GPU and driver, or "
        "use --backend cpu\n");
  }
  const testing::TuneRun repeats = testing::RunTuneInProcess(
      "serve --model llama-tiny --gpus 1 --isl 8 --osl 2 --validate "
      "--repeats 0");
  EXPECT_EQ(repeats.exit_code, 2);
  EXPECT_EQ(repeats.err,
            "tune: error: --repeats must be in [1, 100], got 0\n"
            "tune: hint: e.g. --repeats 3\n");
}

}  // namespace
}  // namespace meshtune::tuner
