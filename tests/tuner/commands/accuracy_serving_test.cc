// `tune accuracy --csv` on a serving CSV, end to end in process: the table's
// summary lines, --json's keys, and the flags that apply to training rows
// only.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/tuner/tune_in_process.h"

namespace meshtune::tuner {
namespace {

using testing::Tune;

std::string WriteCsv(const std::string& dir) {
  const std::string path = dir + "/serving.csv";
  std::ofstream f(path);
  f << "source,commit_or_date,model,gpu,num_gpus,tp,pp,ep,dp,precision,"
       "framework,isl,osl,concurrency,metric,value,notes\n"
       "trt,x,Llama-3.1-8B,H100-SXM-80GB,1,1,1,,,FP8,TensorRT-LLM,128,128,,"
       "output_tokens_per_s,28000,offline\n"
       "aic,x,meta-llama/Llama-3.1-70B,H200-SXM-141GB,4,4,1,1,1,fp8,"
       "TensorRT-LLM,1024,1024,16,tpot_ms,12,aggregated\n"
       "mlperf,x,Llama-2-70B,H200-SXM-141GB,8,,,,,FP8,TensorRT-LLM,,,,"
       "output_tokens_per_s,30000,\n";
  return path;
}

TEST(AccuracyServing, TablePrintsErrorsPerKind) {
  const std::string dir = testing::MakeTempDir();
  const auto run = Tune({"accuracy", "--csv", WriteCsv(dir)});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("throughput rows: 1/2 predicted, MAPE "),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("latency rows:    1/1 predicted, MAPE "),
            std::string::npos);
  EXPECT_NE(run.out.find("all rows:        2/3 predicted"), std::string::npos);
  EXPECT_NE(run.out.find("1 x isl/osl not stated (a variable-length dataset)"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(AccuracyServing, JsonHasRowsAndSummary) {
  const std::string dir = testing::MakeTempDir();
  const auto run = Tune({"accuracy", "--csv", WriteCsv(dir), "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  ASSERT_EQ(j["rows"].size(), 3u);
  EXPECT_GT(j["rows"][0]["predicted"].get<double>(), 0);
  EXPECT_EQ(j["rows"][0]["layout"], "tp1 pp1 adp1 ep1 fp8 kv:fp8");
  EXPECT_EQ(j["rows"][2]["skipped"],
            "isl/osl not stated (a variable-length dataset)");
  EXPECT_EQ(j["summary"]["all"]["predicted"], 2);
  EXPECT_EQ(j["summary"]["groups"].size(), 3u);
  std::filesystem::remove_all(dir);
}

TEST(AccuracyServing, TrainingOnlyFlagsAreInputErrors) {
  const std::string dir = testing::MakeTempDir();
  const std::string csv = WriteCsv(dir);
  const auto run = Tune({"accuracy", "--csv", csv, "--ablation"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(
      run.err.find(csv + " holds serving rows: --ablation, --with-best and "
                         "--source apply to training rows only"),
      std::string::npos)
      << run.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace meshtune::tuner
