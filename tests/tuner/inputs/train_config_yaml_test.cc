// `tune train --config FILE`: the file `tune search --out` writes reads back
// into the same TrainConfig, and every malformed file is one located error.
#include "tuner/inputs/train_config_yaml.h"

#include <gtest/gtest.h>

#include <string>

#include "costmodel/estimate.h"
#include "search_spaces/presets/presets.h"
#include "tests/tuner/run_tune.h"
#include "tuner/inputs/inputs.h"
#include "tuner/render/report_yaml.h"

namespace meshtune::tuner {
namespace {

using search_spaces::ParallelConfig;
using search_spaces::RecomputeGranularity;
using search_spaces::RecomputeMethod;

// What `tune search --model <model> --out` would write for `config`.
std::string SearchOutYaml(const std::string& model, const ParallelConfig& c,
                          int64_t gbs, int64_t seq) {
  Inputs in;
  in.model = search_spaces::ResolveModel(model).value();
  in.cluster = search_spaces::ResolveCluster("a100-80g").value();
  in.training.num_gpus = c.world();
  in.training.global_batch_size = gbs;
  in.training.seq_length = seq;
  costmodel::Estimate e;
  e.config = c;
  e.fits = true;
  return ConfigToYaml(in, e);
}

void ExpectSameModel(const search_spaces::ModelSpec& a,
                     const search_spaces::ModelSpec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.num_query_groups, b.num_query_groups);
  EXPECT_EQ(a.kv_channels, b.kv_channels);
  EXPECT_EQ(a.ffn_hidden_size, b.ffn_hidden_size);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.seq_length, b.seq_length);
  EXPECT_EQ(a.normalization, b.normalization);
  EXPECT_EQ(a.activation, b.activation);
  EXPECT_EQ(a.position_embedding_type, b.position_embedding_type);
  EXPECT_EQ(a.untie_embeddings_and_output_weights,
            b.untie_embeddings_and_output_weights);
  EXPECT_EQ(a.global_batch_size, b.global_batch_size);
}

TEST(TrainConfigYaml, SearchOutputRoundTrips) {
  ParallelConfig c;
  c.tp = 2;
  c.pp = 2;
  c.vpp = 2;
  c.dp = 1;
  c.sp = true;
  c.mbs = 2;
  c.dist_opt = true;
  c.recompute.granularity = RecomputeGranularity::kFull;
  c.recompute.method = RecomputeMethod::kBlock;
  c.recompute.num_layers = 1;
  for (const char* model : {"gpt-tiny", "llama-tiny"}) {
    const std::string yaml = SearchOutYaml(model, c, 8, 128);
    StatusOr<TrainFileConfig> file = ParseTrainConfigYaml(yaml, "best.yaml");
    ASSERT_TRUE(file.ok()) << file.status().message() << "\n" << yaml;
    EXPECT_TRUE(file->has_model);
    ExpectSameModel(file->config.model,
                    search_spaces::ResolveModel(model).value());
    EXPECT_EQ(file->config.parallel, c);
    EXPECT_EQ(file->config.parallel.recompute.method, RecomputeMethod::kBlock);
    EXPECT_EQ(file->config.global_batch_size, 8);
    EXPECT_EQ(file->config.seq_length, 128);
    EXPECT_EQ(file->config.train_iters, 0) << "not in the file";
    EXPECT_TRUE(file->data_path.empty());
    engine::TrainConfig runnable = file->config;
    runnable.train_iters = 1;  // from --steps
    EXPECT_TRUE(runnable.Validate().ok()) << runnable.Validate().message();
  }
}

TEST(TrainConfigYaml, NullKeysMeanTheDefaults) {
  ParallelConfig c;  // vpp 1, no recompute: the search writes null
  c.dp = 4;
  c.recompute.granularity = RecomputeGranularity::kSelective;
  const std::string yaml = SearchOutYaml("gpt-tiny", c, 16, 256);
  EXPECT_NE(yaml.find("virtual_pipeline_model_parallel_size: null"),
            std::string::npos);
  EXPECT_NE(yaml.find("recompute_num_layers: null"), std::string::npos);
  StatusOr<TrainFileConfig> file = ParseTrainConfigYaml(yaml, "best.yaml");
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->config.parallel, c);
  EXPECT_EQ(file->config.parallel.vpp, 1);
  EXPECT_EQ(file->config.parallel.recompute.granularity,
            RecomputeGranularity::kSelective);
}

TEST(TrainConfigYaml, EngineKeysUseMegatronNames) {
  StatusOr<TrainFileConfig> file = ParseTrainConfigYaml(
      "model: gpt-tiny\n"
      "training:\n"
      "  train_iters: 7\n"
      "  lr: 1.0e-3\n"
      "  min_lr: 0\n"
      "  lr_warmup_iters: 2\n"
      "  lr_decay_style: linear\n"
      "  weight_decay: 0.01\n"
      "  clip_grad: 0.5\n"
      "  hidden_dropout: 0.1\n"
      "  attention_dropout: 0.05\n"
      "  seed: 7\n"
      "  data_path: 0.3 corpus_a 0.7 corpus_b\n"
      "  save: ckpt\n"
      "  save_interval: 5\n"
      "  log_interval: 2\n",
      "t.yaml");
  ASSERT_TRUE(file.ok()) << file.status().message();
  const engine::TrainConfig& c = file->config;
  EXPECT_EQ(c.model.name, "gpt-tiny");
  EXPECT_EQ(c.train_iters, 7);
  EXPECT_FLOAT_EQ(c.optimizer.lr, 1e-3f);
  EXPECT_FLOAT_EQ(c.optimizer.min_lr, 0.0f);
  EXPECT_EQ(c.optimizer.lr_warmup_iters, 2);
  EXPECT_EQ(c.optimizer.lr_decay_style,
            engine::OptimizerConfig::DecayStyle::kLinear);
  EXPECT_FLOAT_EQ(c.optimizer.weight_decay, 0.01f);
  EXPECT_FLOAT_EQ(c.optimizer.clip_grad, 0.5f);
  EXPECT_FLOAT_EQ(c.hidden_dropout, 0.1f);
  EXPECT_FLOAT_EQ(c.attention_dropout, 0.05f);
  EXPECT_EQ(c.seed, 7u);
  EXPECT_EQ(file->data_path,
            (std::vector<std::string>{"0.3", "corpus_a", "0.7", "corpus_b"}));
  EXPECT_EQ(c.save_dir, "ckpt");
  EXPECT_EQ(c.save_interval, 5);
  EXPECT_EQ(c.log_interval, 2);
  // Untouched keys keep TrainConfig's defaults.
  EXPECT_EQ(c.parallel, ParallelConfig());
  EXPECT_FLOAT_EQ(c.optimizer.adam_beta2, engine::OptimizerConfig().adam_beta2);
}

TEST(TrainConfigYaml, NoModelSectionIsAllowed) {
  StatusOr<TrainFileConfig> file =
      ParseTrainConfigYaml("parallelism:\n  data_parallel_size: 2\n", "t.yaml");
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_FALSE(file->has_model);
  EXPECT_EQ(file->config.parallel.dp, 2);
}

void ExpectError(const std::string& yaml, const std::string& message,
                 const std::string& hint) {
  StatusOr<TrainFileConfig> file = ParseTrainConfigYaml(yaml, "best.yaml");
  ASSERT_FALSE(file.ok()) << yaml;
  EXPECT_EQ(file.status().message(), message);
  EXPECT_EQ(file.status().hint(), hint);
  EXPECT_EQ(file.status().ExitCode(), 2);
}

TEST(TrainConfigYaml, MalformedYamlNamesFileAndLine) {
  ExpectError(
      "model: gpt-tiny\nparallelism:\n  tensor_model_parallel_size: "
      "[2\n  pipeline_model_parallel_size: 1\n",
      "best.yaml:4: malformed YAML: end of sequence flow not found",
      "fix the YAML syntax on that line (indentation, ':' after keys, "
      "matching brackets and quotes)");
}

TEST(TrainConfigYaml, UnknownKeysSuggestTheMegatronName) {
  ExpectError("model: gpt-tiny\nparallelism:\n  tensor_parallel_size: 2\n",
              "best.yaml:3: unknown key 'tensor_parallel_size' in parallelism",
              "did you mean 'tensor_model_parallel_size'?");
  ExpectError("model: gpt-tiny\ntrainig:\n  lr: 1\n",
              "best.yaml:2: unknown key 'trainig' in training config",
              "did you mean 'training'?");
  ExpectError("training:\n  lr_decay_stlye: linear\n",
              "best.yaml:2: unknown key 'lr_decay_stlye' in training",
              "did you mean 'lr_decay_style'?");
}

TEST(TrainConfigYaml, BadValuesNameKeyAndLine) {
  ExpectError("training:\n  micro_batch_size: 1\n  global_batch_size: many\n",
              "best.yaml:3: global_batch_size: expected a positive integer, "
              "got 'many'",
              "write a whole number greater than 0, e.g. "
              "'global_batch_size: 8'");
  ExpectError("parallelism:\n  sequence_parallel: maybe\n",
              "best.yaml:2: sequence_parallel: expected true or false, got "
              "'maybe'",
              "write true or false, e.g. 'sequence_parallel: true'");
  ExpectError(
      "parallelism:\n  recompute_granularity: selective\n"
      "  recompute_num_layers: 2\n",
      "best.yaml:3: recompute_num_layers applies to recompute_granularity "
      "full only",
      "set recompute_granularity: full, or write 'recompute_num_layers: "
      "null'");
  StatusOr<TrainFileConfig> style = ParseTrainConfigYaml(
      "training:\n  lr_decay_style: exponential\n", "best.yaml");
  ASSERT_FALSE(style.ok());
  EXPECT_EQ(style.status().message().rfind("best.yaml:2: lr_decay_style", 0),
            0u)
      << style.status().message();
}

TEST(TrainConfigYaml, ModelErrorsComeFromTheModelParser) {
  ExpectError("model:\n  num_layers: 2\n  hidden_size: abc\n",
              "best.yaml:3: hidden_size: expected a positive integer, got "
              "'abc'",
              "write a whole number greater than 0, e.g. 'hidden_size: 8'");
}

TEST(TrainConfigYaml, MissingFileNamesTheFlag) {
  StatusOr<TrainFileConfig> file =
      ReadTrainConfigYaml("/nonexistent-dir/best.yaml");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().message(),
            "--config file '/nonexistent-dir/best.yaml' not found");
  EXPECT_EQ(file.status().hint(),
            "write one with 'tune search ... --out /nonexistent-dir/best.yaml'"
            ", or check the path");
  EXPECT_EQ(file.status().ExitCode(), 2);
}

TEST(TrainConfigYaml, ReadsAFileFromDisk) {
  const std::string dir = testing::MakeTempDir();
  ParallelConfig c;
  c.dp = 2;
  testing::WriteFile(dir + "/best.yaml", SearchOutYaml("gpt-tiny", c, 4, 64));
  StatusOr<TrainFileConfig> file = ReadTrainConfigYaml(dir + "/best.yaml");
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->config.parallel.dp, 2);
  EXPECT_EQ(file->config.global_batch_size, 4);
  std::remove((dir + "/best.yaml").c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace meshtune::tuner
