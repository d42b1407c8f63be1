// --cuda-graph-impl / --cuda-graph-scope end to end: they reach the cost
// model (the host-launch term of a small MoE at mbs 1), the report, the
// stored search and its Megatron export, and the run-flags parser; bad
// values and combinations are one-line errors with exit code 2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "search_spaces/model_spec.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/training_spec.h"
#include "tests/tuner/tune_in_process.h"
#include "tuner/interop/megatron_args_parser.h"

namespace meshtune::tuner {
namespace {

using testing::MakeTempDir;
using testing::RunTuneInProcess;

constexpr const char* kQwen =
    "estimate --model qwen3-30b-a3b --gpus 8 --gpu h100 --gbs 64 --tp 1 "
    "--pp 1 --ep 8 --mbs 1 --recompute none --dist-opt --json ";

double HostLaunch_s(const std::string& flags) {
  const auto run = RunTuneInProcess(kQwen + flags);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  return j["time_s"]["host_launch"].get<double>();
}

TEST(CudaGraphFlags, GraphsShortenTheHostBoundSteps) {
  const double eager = HostLaunch_s("");
  const double partial = HostLaunch_s(
      "--cuda-graph-impl transformer_engine --cuda-graph-scope attn "
      "moe_router moe_preprocess");
  const double step =
      HostLaunch_s("--cuda-graph-impl local --cuda-graph-scope full_iteration");
  EXPECT_GT(eager, 0.0);
  EXPECT_LT(partial, eager);
  EXPECT_EQ(step, 0.0);
  // The same scope written with commas.
  EXPECT_EQ(HostLaunch_s("--cuda-graph-impl transformer_engine "
                         "--cuda-graph-scope attn,moe_router,moe_preprocess"),
            partial);
}

TEST(CudaGraphFlags, TableNamesTheGraphs) {
  const auto run = RunTuneInProcess(
      "estimate --model qwen3-30b-a3b --gpus 8 --gpu h100 --ep 8 --mbs 1 "
      "--cuda-graph-impl transformer_engine --cuda-graph-scope attn");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("cuda graphs  --cuda-graph-impl transformer_engine "
                         "--cuda-graph-scope attn: these modules launch as "
                         "graph replays\n"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("host_launch"), std::string::npos);
}

TEST(CudaGraphFlags, BadValuesAreUsageErrors) {
  const auto impl =
      RunTuneInProcess(std::string(kQwen) + "--cuda-graph-impl te");
  EXPECT_EQ(impl.exit_code, 2);
  EXPECT_EQ(impl.err,
            "tune: error: unknown --cuda-graph-impl 'te'\n"
            "tune: hint: use none, local or transformer_engine\n");
  const auto scope =
      RunTuneInProcess(std::string(kQwen) + "--cuda-graph-scope attn");
  EXPECT_EQ(scope.exit_code, 2);
  EXPECT_EQ(scope.err,
            "tune: error: --cuda-graph-scope attn has no effect with "
            "--cuda-graph-impl none\n"
            "tune: hint: add --cuda-graph-impl transformer_engine (or "
            "local)\n");
  const auto full = RunTuneInProcess(std::string(kQwen) +
                                     "--cuda-graph-impl transformer_engine "
                                     "--cuda-graph-scope full_iteration");
  EXPECT_EQ(full.exit_code, 2);
  EXPECT_NE(full.err.find("full_iteration needs --cuda-graph-impl local"),
            std::string::npos);
  const auto word = RunTuneInProcess(
      std::string(kQwen) + "--cuda-graph-impl local --cuda-graph-scope mlpp");
  EXPECT_EQ(word.exit_code, 2);
  EXPECT_NE(word.err.find("unknown --cuda-graph-scope value 'mlpp'"),
            std::string::npos);
}

TEST(CudaGraphFlags, StoredSearchExportsThem) {
  const std::string db = MakeTempDir() + "/graphs.db";
  const auto search = RunTuneInProcess(
      "search --model qwen3-30b-a3b --gpus 8 --gpu h100 --ep 8 --top 1 "
      "--cuda-graph-impl transformer_engine --cuda-graph-scope attn "
      "moe_router --db " +
      db);
  ASSERT_EQ(search.exit_code, 0) << search.err;
  const auto run =
      RunTuneInProcess("export --search 1 --format megatron --db " + db);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("--cuda-graph-impl transformer_engine"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("--cuda-graph-scope attn moe_router"),
            std::string::npos)
      << run.out;
}

TEST(CudaGraphFlags, RunFlagsReadMegatronsSpelling) {
  search_spaces::ModelSpec model;
  search_spaces::TrainingSpec t;
  search_spaces::ParallelConfig c;
  auto applied = ApplyMegatronFlags(
      "--cuda-graph-impl transformer_engine --cuda-graph-scope attn mamba",
      &model, &t, &c);
  ASSERT_TRUE(applied.ok()) << applied.status().message();
  EXPECT_EQ(t.cuda_graphs.impl,
            search_spaces::CudaGraphImpl::kTransformerEngine);
  EXPECT_EQ(t.cuda_graphs.scope,
            search_spaces::kGraphAttn | search_spaces::kGraphMamba);
  search_spaces::TrainingSpec t2;
  auto bad =
      ApplyMegatronFlags("--cuda-graph-scope full_iteration", &model, &t2, &c);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--cuda-graph-scope full_iteration has no effect with "
            "--cuda-graph-impl none");
}

}  // namespace
}  // namespace meshtune::tuner
