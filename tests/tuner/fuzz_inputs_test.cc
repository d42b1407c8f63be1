// Seeded-mutation fuzzing of the tuner's text inputs (issue 16): the
// published-runs CSV of `tune accuracy` (reader, row mapping and the
// prediction of every row it accepts) and the Megatron-LM arguments parser.
// Each input is parsed in-process; no crash, no exception, no hang, and
// every rejection is one line. The inputs the fuzzer found are plain
// regression tests at the end.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz_mutator.h"
#include "tests/tuner/export_round_trip.h"
#include "tuner/accuracy/cases.h"
#include "tuner/interop/megatron_args.h"
#include "tuner/interop/megatron_args_parser.h"
#include "tuner/io/csv_reader.h"

namespace meshtune::tuner {
namespace {

// Inputs per parser: a second or two each on a slow, busy 2-core machine.
constexpr int kInputsPerParser = 2000;

// The header and the first `rows` records of the published calibration CSV.
std::string PublishedCsvHead(int rows) {
  std::ifstream in(std::string(MESHTUNE_SOURCE_DIR) +
                   "/tests/data/published_calibration.csv");
  std::string line, out;
  for (int i = 0; i <= rows && std::getline(in, line); ++i) out += line + "\n";
  return out;
}

TEST(FuzzInputs, AccuracyCsv) {
  const std::string full = PublishedCsvHead(8);
  ASSERT_GT(full.size(), 100u);
  const std::vector<std::string> seeds = {
      full, PublishedCsvHead(2),
      "source,model,gpu,num_gpus,tp,pp,gbs,precision,measured_metric,"
      "measured_value,cp,ep,vp,mbs,dp,sp,recompute,layers,hidden,heads\n"
      "Mine,GPT-3 175B,H100,1024,8,8,1536,bf16,step_time_s,10,1,1,2,1,16,1,"
      "selective,96,12288,96\n"
      "\"Mine, quoted\",\"LLaMA\n2 7B\",A100 80GB,8,1,1,16,fp8,tokens_per_s,"
      "5000,,,,,,,none,,,\r\n"};
  const Estimator estimator = DefaultEstimator();
  meshtune::testing::FuzzParser("accuracy_csv", seeds, kInputsPerParser, 16004,
                                [&](const std::string& text) -> Status {
                                  auto table = ParseCsv(text, "fuzz.csv");
                                  if (!table.ok()) return table.status();
                                  auto cases = MapAccuracyRows(table.value());
                                  if (!cases.ok()) return cases.status();
                                  // Rows the mapping accepts go through the
                                  // cost model, as in `tune accuracy`: the
                                  // bounds must keep it finite and crash-free.
                                  for (const AccuracyCase& c : cases.value()) {
                                    if (c.skipped_reason.empty())
                                      Predict(c, estimator);
                                  }
                                  return Status::Ok();
                                });
}

TEST(FuzzInputs, MegatronArgs) {
  std::vector<std::string> seeds;
  const std::vector<testing::RoundTripCase> cases = testing::RoundTripCases();
  for (size_t i = 0; i < cases.size(); i += 7) {
    const testing::RoundTripCase& c = cases[i];
    seeds.push_back(
        FormatMegatronArgs(MegatronArgs(c.model, c.training, c.config)));
  }
  seeds.push_back(
      "torchrun --nproc_per_node 8 pretrain_gpt.py \\\n"
      "  --num-layers 24 --hidden-size 2048 --num-attention-heads 16 \\\n"
      "  --seq-length 2048 --max-position-embeddings 2048 \\\n"
      "  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \\\n"
      "  --num-layers-per-virtual-pipeline-stage 3 --sequence-parallel \\\n"
      "  --micro-batch-size 1 --global-batch-size 512 --bf16 \\\n"
      "  --recompute-granularity full --recompute-method uniform \\\n"
      "  --recompute-num-layers 1 --lr 1e-4 '--data-path' \"a b\" # done\n");
  meshtune::testing::FuzzParser("megatron_args", seeds, kInputsPerParser, 16005,
                                [](const std::string& text) -> Status {
                                  auto parsed = ParseMegatronArgs(text, 64);
                                  return parsed.ok() ? Status::Ok()
                                                     : parsed.status();
                                });
}

// ---- Regression inputs (each failed before the fix that it names). ----

TEST(FuzzInputsRegression, CsvCellsWhoseProductWrapsToZero) {
  // tp = pp = 2^32: tp·pp·cp wrapped to 0 and num_gpus / 0 killed the
  // process with SIGFPE. The cells are now bounded.
  const std::string text =
      "source,model,gpu,num_gpus,tp,pp,gbs,precision,measured_metric,"
      "measured_value\n"
      "s,GPT-3 175B,H100,8,4294967296,4294967296,16,bf16,step_time_s,1\n";
  auto table = ParseCsv(text, "runs.csv");
  ASSERT_TRUE(table.ok());
  auto cases = MapAccuracyRows(table.value());
  ASSERT_FALSE(cases.ok());
  EXPECT_EQ(cases.status().message(),
            "runs.csv:2: column 'tp': 4294967296 is above the limit of "
            "1048576");
  EXPECT_EQ(cases.status().hint(),
            "a parallel size splits the GPUs, so it is at most --gpus; check "
            "the value");
}

TEST(FuzzInputsRegression, CsvCellTooLargeForInt64) {
  const std::string text =
      "source,model,gpu,num_gpus,tp,pp,gbs,precision,measured_metric,"
      "measured_value\n"
      "s,GPT-3 175B,H100,99999999999999999999,8,8,16,bf16,step_time_s,1\n";
  auto cases = MapAccuracyRows(ParseCsv(text, "runs.csv").value());
  ASSERT_FALSE(cases.ok());
  EXPECT_EQ(cases.status().message(),
            "runs.csv:2: column 'num_gpus': 99999999999999999999 is above the "
            "limit of 1048576 GPUs");
}

TEST(FuzzInputsRegression, CsvCellWithLineBreakIsQuotedOnOneLine) {
  const std::string text =
      "source,model,gpu,num_gpus,tp,pp,gbs,precision,measured_metric,"
      "measured_value\n"
      "s,GPT-3 175B,H100,\"8\n9\",8,8,16,bf16,step_time_s,1\n";
  auto cases = MapAccuracyRows(ParseCsv(text, "runs.csv").value());
  ASSERT_FALSE(cases.ok());
  EXPECT_EQ(cases.status().message(),
            "runs.csv:2: column 'num_gpus' is '8\\n9', not a positive integer");
}

TEST(FuzzInputsRegression, MegatronSizesWhoseProductWrapsToZero) {
  // --pipeline-model-parallel-size 2^32 with 2^32 layers per virtual stage
  // wrapped pp·per_stage to 0 and divided by it.
  auto p = ParseMegatronArgs(
      "--num-layers 24 --hidden-size 64 --num-attention-heads 4 "
      "--seq-length 128 --global-batch-size 8 --bf16 "
      "--pipeline-model-parallel-size 4294967296 "
      "--num-layers-per-virtual-pipeline-stage 4294967296");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "--pipeline-model-parallel-size: 4294967296 is above the limit of "
            "1048576");
  p = ParseMegatronArgs(
      "--num-layers 2000000000 --hidden-size 64 --num-attention-heads 4 "
      "--seq-length 128 --global-batch-size 8 --bf16");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "--num-layers: 2000000000 is above the limit of 10000 layers");
  p = ParseMegatronArgs(
      "--num-layers 24 --hidden-size 64 --num-attention-heads 4 "
      "--seq-length 128 --global-batch-size 99999999999999999999 --bf16");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "--global-batch-size: 99999999999999999999 is above the limit of "
            "16777216 sequences");
}

TEST(FuzzInputsRegression, MegatronWordWithLineBreakIsEscaped) {
  auto p = ParseMegatronArgs("'--num-layers\n--x' 4");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "unknown Megatron argument '--num-layers\\n--x'");
}

}  // namespace
}  // namespace meshtune::tuner
