// `--json` output: exactly the docs/design.md §5 keys, parts that add up, and
// the --out YAML round trip through `--model FILE`.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tests/tuner/tune_in_process.h"

namespace meshtune::tuner {
namespace {

using nlohmann::json;
using testing::MakeTempDir;
using testing::ReadFile;
using testing::RunTuneInProcess;
using testing::TuneRun;

std::set<std::string> Keys(const json& j) {
  std::set<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.insert(it.key());
  return keys;
}

// Checks one estimate object against docs/design.md §5.
void CheckEstimateShape(const json& e) {
  EXPECT_EQ(Keys(e),
            (std::set<std::string>{
                "config", "fits", "infeasible_reason", "memory_gib",
                "near_capacity", "time_s", "step_time_s", "tokens_per_s",
                "tokens_per_s_per_gpu", "model_tflops_per_gpu", "mfu", "hfu",
                "days_to_train", "calibration"}));
  EXPECT_EQ(Keys(e["config"]),
            (std::set<std::string>{
                "tp", "pp", "dp", "cp", "ep", "etp", "vpp", "sp", "mbs", "gbs",
                "recompute", "recompute_num_layers", "dist_opt", "precision",
                "decoder_first_pipeline_num_layers",
                "decoder_last_pipeline_num_layers"}));
  EXPECT_EQ(Keys(e["memory_gib"]),
            (std::set<std::string>{"total", "weights", "gradients", "optimizer",
                                   "activations", "other"}));
  EXPECT_EQ(
      Keys(e["time_s"]),
      (std::set<std::string>{"compute", "recompute", "tp_comm", "cp_comm",
                             "ep_comm", "pp_comm", "pp_bubble", "dp_comm",
                             "optimizer", "host_launch", "core_sharing"}));

  double time_sum = 0;
  for (const auto& [k, v] : e["time_s"].items()) time_sum += v.get<double>();
  const double step = e["step_time_s"].get<double>();
  EXPECT_GT(step, 0);
  EXPECT_NEAR(time_sum, step, 1e-9 * step);

  const json& m = e["memory_gib"];
  const double mem_sum =
      m["weights"].get<double>() + m["gradients"].get<double>() +
      m["optimizer"].get<double>() + m["activations"].get<double>() +
      m["other"].get<double>();
  EXPECT_NEAR(mem_sum, m["total"].get<double>(), 1e-9 * mem_sum);

  EXPECT_TRUE(e["fits"].get<bool>() == e["infeasible_reason"].is_null());
  // Near capacity only when it fits; the capacity itself is not in the
  // object, so the flag's threshold is checked in report_table_test.cc.
  if (e["near_capacity"].get<bool>()) {
    EXPECT_TRUE(e["fits"].get<bool>());
  }
  EXPECT_GT(e["days_to_train"].get<double>(), 0);
  EXPECT_GT(e["mfu"].get<double>(), 0);
  EXPECT_LE(e["mfu"].get<double>(), e["hfu"].get<double>() + 1e-12);
  EXPECT_EQ(e["calibration"], "datasheet");
}

TEST(JsonReport, SearchHasExactlyTheContractKeys) {
  const TuneRun run =
      RunTuneInProcess("--model gpt3-1.3b --gpus 8 --json --top 4");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  const json j = json::parse(run.out);
  EXPECT_EQ(Keys(j),
            (std::set<std::string>{"inputs", "candidates", "evaluated",
                                   "feasible", "pruned", "elapsed_s"}));
  // The inputs, so that a saved file reads alone.
  const json& in = j["inputs"];
  EXPECT_EQ(Keys(in),
            (std::set<std::string>{
                "model", "model_display_name", "parameters", "gpus", "gpu",
                "gpu_display_name", "gpu_defaulted", "global_batch_size",
                "seq_length", "precision", "train_tokens", "cluster"}));
  EXPECT_EQ(in["model"], "gpt3-1.3b");
  EXPECT_EQ(in["gpus"], 8);
  EXPECT_EQ(in["gpu"], "a100-80g");
  EXPECT_TRUE(in["gpu_defaulted"].get<bool>());
  EXPECT_EQ(in["precision"], "bf16");
  EXPECT_EQ(in["global_batch_size"], 256);  // gpt3-1.3b's default
  EXPECT_EQ(in["seq_length"], 2048);
  EXPECT_NEAR(in["parameters"].get<double>(), 1.3e9, 0.05e9);
  EXPECT_DOUBLE_EQ(in["train_tokens"].get<double>(), 300e9);
  EXPECT_EQ(
      Keys(in["cluster"]),
      (std::set<std::string>{"name", "nodes", "gpus_per_node",
                             "nvlink_domain_gpus", "usable_memory_gib",
                             "memory_reserve_gib", "memory_headroom_gib"}));
  EXPECT_EQ(in["cluster"]["nodes"], 1);
  EXPECT_NEAR(in["cluster"]["usable_memory_gib"].get<double>(), 77.0, 0.01);
  ASSERT_EQ(j["candidates"].size(), 4u);
  double previous = 0;
  for (const json& c : j["candidates"]) {
    CheckEstimateShape(c);
    EXPECT_TRUE(c["fits"].get<bool>());
    // Ranked fastest first (ties within 0.1 % may swap).
    EXPECT_GE(c["step_time_s"].get<double>() * (1 + 1e-3), previous);
    previous = c["step_time_s"].get<double>();
  }
  int64_t pruned = 0;
  for (const auto& [reason, count] : j["pruned"].items()) {
    pruned += count.get<int64_t>();
  }
  EXPECT_EQ(j["evaluated"].get<int64_t>(),
            j["feasible"].get<int64_t>() + pruned);
  EXPECT_GE(j["elapsed_s"].get<double>(), 0);
}

TEST(JsonReport, EstimateIsOneObject) {
  const TuneRun run = RunTuneInProcess(
      "estimate --model 175b --gpus 1024 --tp 8 --pp 8 --vpp 3 --mbs 1 "
      "--gbs 1536 --sp --recompute full:block:2 --dist-opt --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json e = json::parse(run.out);
  CheckEstimateShape(e);
  EXPECT_EQ(e["config"]["tp"], 8);
  EXPECT_EQ(e["config"]["pp"], 8);
  EXPECT_EQ(e["config"]["vpp"], 3);
  EXPECT_EQ(e["config"]["dp"], 16);
  EXPECT_EQ(e["config"]["gbs"], 1536);
  EXPECT_EQ(e["config"]["sp"], true);
  EXPECT_EQ(e["config"]["dist_opt"], true);
  EXPECT_EQ(e["config"]["recompute"], "full:block:2");
  EXPECT_EQ(e["config"]["recompute_num_layers"], 2);
  EXPECT_EQ(e["config"]["precision"], "bf16");
}

TEST(JsonReport, ConfigCarriesEtpAndTheUnevenLayout) {
  // DeepSeek-V2-Lite's 27 layers do not split evenly over pp 2: the search
  // ranks uneven layouts (first/last stage layers) and MoE plans with etp.
  const TuneRun run = RunTuneInProcess(
      "--model deepseek-v2-lite --gpus 16 --gpu h100 --pp 2 --top 20 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json out = json::parse(run.out);
  ASSERT_FALSE(out["candidates"].empty());
  for (const json& e : out["candidates"]) {
    CheckEstimateShape(e);
    const json& c = e["config"];
    EXPECT_GE(c["etp"].get<int>(), 1);
    EXPECT_LE(c["etp"].get<int>(), c["tp"].get<int>());
    // The layout's decoder layers add up: first + middle stages + last.
    ASSERT_FALSE(c["decoder_first_pipeline_num_layers"].is_null());
    const int first = c["decoder_first_pipeline_num_layers"];
    const int last = c["decoder_last_pipeline_num_layers"];
    const int middle_stages = 2 * c["vpp"].get<int>() - 2;
    if (middle_stages == 0) {
      EXPECT_EQ(first + last, 27);
    } else {
      EXPECT_EQ((27 - first - last) % middle_stages, 0);
    }
  }
}

TEST(JsonReport, TokenBudgetScalesDaysToTrain) {
  const std::string flags =
      "estimate --model 175b --gpus 1024 --tp 8 --pp 8 --sp "
      "--recompute selective --json --tokens ";
  const json a = json::parse(RunTuneInProcess(flags + "300B").out);
  const json b = json::parse(RunTuneInProcess(flags + "1.2T").out);
  EXPECT_NEAR(b["days_to_train"].get<double>(),
              4 * a["days_to_train"].get<double>(),
              1e-9 * b["days_to_train"].get<double>());
}

TEST(YamlOut, RoundTripsThroughModelFile) {
  const std::string dir = MakeTempDir();
  const TuneRun first = RunTuneInProcess(
      "--model gpt3-1.3b --gpus 8 --out best.yaml --json --top 1", dir);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.err, "tune: wrote the best configuration to best.yaml\n");
  const std::string yaml = ReadFile(dir + "/best.yaml");
  for (const char* key : {"model:",
                          "parallelism:",
                          "training:",
                          "cluster:",
                          "tensor_model_parallel_size:",
                          "pipeline_model_parallel_size:",
                          "virtual_pipeline_model_parallel_size:",
                          "context_parallel_size:",
                          "expert_model_parallel_size:",
                          "sequence_parallel:",
                          "use_distributed_optimizer:",
                          "recompute_granularity:",
                          "recompute_method:",
                          "recompute_num_layers:",
                          "micro_batch_size:",
                          "global_batch_size:",
                          "seq_length:",
                          "precision:",
                          "train_tokens:",
                          "preset: \"a100-80g\"",
                          "num_gpus: 8",
                          "gpus_per_node: 8",
                          "# Predicted: step time "}) {
    EXPECT_NE(yaml.find(key), std::string::npos) << key;
  }
  // The same search on the written model file gives the same answer.
  const TuneRun second =
      RunTuneInProcess("--model best.yaml --gpus 8 --json --top 1", dir);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const json a = json::parse(first.out)["candidates"][0];
  const json b = json::parse(second.out)["candidates"][0];
  EXPECT_EQ(a["config"], b["config"]);
  EXPECT_EQ(a["step_time_s"], b["step_time_s"]);
  EXPECT_EQ(a["memory_gib"], b["memory_gib"]);
}

TEST(JsonReport, SearchOutputIsDeterministic) {
  const std::string args = "--model gpt3-13b --gpus 64 --json --top 20";
  json a = json::parse(RunTuneInProcess(args).out);
  json b = json::parse(RunTuneInProcess(args).out);
  a.erase("elapsed_s");
  b.erase("elapsed_s");
  EXPECT_EQ(a, b);
}

TEST(TableReport, GpusPerNodeOverrideAndTokenBudget) {
  const TuneRun run = RunTuneInProcess(
      "--model 175b --gpus 1024 --gpus-per-node 4 --tokens 1.4T --top 1");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("1024 GPUs = 256 nodes x 4 GPUs per node"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("token budget 1.4 T"), std::string::npos);
  EXPECT_NE(run.out.find("days to train 1.4 T tokens: "), std::string::npos);
}

// `tune search --format nemo|bridge`: the other exports of the same plan.
TEST(MegatronFormat, SearchAlsoWritesNemoAndBridge) {
  const std::string search = "--model llama3-8b --gpus 16 --gpu h100 --no-db";
  const TuneRun megatron =
      RunTuneInProcess("search " + search + " --format megatron");
  ASSERT_EQ(megatron.exit_code, 0) << megatron.err;
  const TuneRun nemo = RunTuneInProcess("search " + search + " --format nemo");
  ASSERT_EQ(nemo.exit_code, 0) << nemo.err;
  EXPECT_NE(nemo.out.find("  devices: 8\n"), std::string::npos) << nemo.out;
  const TuneRun bridge =
      RunTuneInProcess("search " + search + " --format bridge");
  ASSERT_EQ(bridge.exit_code, 0) << bridge.err;
  // The same tensor-parallel size in all three.
  const size_t at = megatron.out.find("--tensor-model-parallel-size ");
  ASSERT_NE(at, std::string::npos);
  const std::string tp = megatron.out.substr(at + 29, 1);
  EXPECT_NE(bridge.out.find("model.tensor_model_parallel_size=" + tp),
            std::string::npos)
      << bridge.out;
  EXPECT_NE(nemo.out.find("tensor_model_parallel_size: " + tp),
            std::string::npos)
      << nemo.out;
  const TuneRun bad = RunTuneInProcess("search " + search + " --format yaml");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err,
            "tune: error: --format: unknown format 'yaml'\ntune: hint: use "
            "--format table, megatron, nemo or bridge\n");
}

TEST(MegatronFormat, PrintsArgumentLinesForTheBest) {
  const TuneRun run = RunTuneInProcess(
      "--model llama3-8b --gpus 16 --gpu h100 --format megatron");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.rfind("--num-layers 32 \\\n", 0), 0u) << run.out;
  EXPECT_NE(run.out.find("--group-query-attention \\\n"), std::string::npos);
  EXPECT_NE(run.out.find("--swiglu \\\n"), std::string::npos);
  EXPECT_NE(run.out.find("--normalization RMSNorm \\\n"), std::string::npos);
  EXPECT_NE(run.out.find("--bf16 \\\n"), std::string::npos);
  // The model's tokenizer and the run follow the plan.
  EXPECT_NE(run.out.find("--tokenizer-model meta-llama/Meta-Llama-3-8B \\\n"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("--train-iters "), std::string::npos);
  // sqrt(2 / (5 · 4096)) = 0.0098821.
  EXPECT_EQ(run.out.substr(run.out.size() - 26), "--init-method-std 0.00988\n");
}

}  // namespace
}  // namespace meshtune::tuner
