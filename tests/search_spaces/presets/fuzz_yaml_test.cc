// Seeded-mutation fuzzing of the model, cluster and search-space YAML
// parsers (issue 16): thousands of hostile variants of the built-in presets,
// each parsed in-process; no crash, no exception, no hang, and every
// rejection one line. The inputs the fuzzer found crashing or misbehaving are
// plain regression tests at the end.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "search_spaces/embedded_file.h"
#include "search_spaces/presets/presets.h"
#include "search_spaces/space/enumerate.h"
#include "tests/fuzz_mutator.h"

namespace meshtune::search_spaces {
namespace {

// Inputs per parser: a second or two each on a slow, busy 2-core machine.
constexpr int kInputsPerParser = 2000;

std::vector<std::string> PresetTexts(const std::string& dir) {
  std::vector<std::string> out;
  for (const EmbeddedFile& f : EmbeddedPresetFiles()) {
    if (f.path.rfind(dir, 0) == 0) out.push_back(f.contents);
  }
  return out;
}

TEST(FuzzYaml, ModelParser) {
  std::vector<std::string> seeds = PresetTexts("models/");
  // The `model:` section of a `tune --out` file, with a preset reference.
  seeds.push_back(
      "model:\n  name: tiny\n  num_layers: 4\n  hidden_size: 64\n"
      "  num_attention_heads: 4\n  ffn_hidden_size: 256\n  vocab_size: 512\n"
      "  seq_length: 128\nparallelism:\n  tp: 1\n");
  seeds.push_back("model: gpt3-175b\n");
  meshtune::testing::FuzzParser("model_yaml", seeds, kInputsPerParser, 16001,
                                [](const std::string& text) -> Status {
                                  StatusOr<ModelSpec> m =
                                      ParseModelYaml(text, "fuzz.yaml");
                                  if (!m.ok()) return m.status();
                                  // What the parser accepts is a valid, bounded
                                  // model.
                                  return m->Validate();
                                });
}

TEST(FuzzYaml, ClusterParser) {
  std::vector<std::string> seeds = PresetTexts("clusters/");
  seeds.push_back(
      "cluster:\n  preset: h100\n  num_gpus: 64\n"
      "  gpus_per_node: 8\n");
  seeds.push_back(
      "name: mine\ngpu: h100\ngpus_per_node: 8\nnvlink_gbps: 450\n"
      "nvlink_busbw_gbps: 370\nnvlink_latency_us: 3.4\n"
      "nic_gbps: 50\nnic_busbw_gbps: 47\nnetwork_latency_us: 14\n");
  meshtune::testing::FuzzParser("cluster_yaml", seeds, kInputsPerParser, 16002,
                                [](const std::string& text) -> Status {
                                  StatusOr<ClusterSpec> c =
                                      ParseClusterYaml(text, "fuzz.yaml");
                                  if (!c.ok()) return c.status();
                                  return c->Validate();
                                });
}

TEST(FuzzYaml, SearchSpaceParser) {
  std::vector<std::string> seeds = PresetTexts("spaces/");
  seeds.push_back(
      "tensor_model_parallel_size: [1, 2, 4, 8]\n"
      "pipeline_model_parallel_size: [1, 2, 4]\n"
      "virtual_pipeline_model_parallel_size: 2\n"
      "context_parallel_size: [1, 2]\nexpert_model_parallel_size: 1\n"
      "data_parallel_size: [1, 2]\nsequence_parallel: [true, false]\n"
      "micro_batch_size: [1, 2]\n"
      "recompute_granularity: [none, selective, full]\n"
      "recompute_method: [uniform, block]\nrecompute_num_layers: [1, 2]\n"
      "use_distributed_optimizer: true\n"
      "max_tensor_model_parallel_size: 8\nmax_micro_batch_size: 4\n");
  // Every accepted space is also enumerated for a small model, so that
  // bounded-but-odd pins (max_micro_batch_size near the limit, pins far
  // above the GPU count) cannot hang or crash the search either.
  const ModelSpec model = ResolveModel("gpt-tiny").value();
  const ClusterSpec cluster = ResolveCluster("h100").value();
  TrainingSpec training;
  training.num_gpus = 8;
  training.global_batch_size = 16;
  training.seq_length = model.seq_length;
  meshtune::testing::FuzzParser(
      "space_yaml", seeds, kInputsPerParser, 16003,
      [&](const std::string& text) -> Status {
        StatusOr<SearchSpace> s = ParseSearchSpaceYaml(text, "fuzz.yaml");
        if (!s.ok()) return s.status();
        EnumerateConfigs(model, training, cluster, s.value());
        return Status::Ok();
      });
}

// ---- Regression inputs (each failed before the fix that it names). ----

TEST(FuzzYamlRegression, ScalarWithLineBreakIsQuotedOnOneLine) {
  // A quoted scalar may hold a line break; the message quotes it escaped.
  auto m = ParseModelYaml("num_layers: \"4\\n5\"\n", "m.yaml");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "m.yaml:1: num_layers: expected a positive integer, got '4\\n5'");
}

TEST(FuzzYamlRegression, KeyWithControlBytesIsEscaped) {
  auto m = ParseModelYaml("\"num\\x01\\nlayers\": 4\n", "m.yaml");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "m.yaml:1: unknown key 'num\\x01\\nlayers' in model");
}

TEST(FuzzYamlRegression, VeryLongValueIsCutInTheMessage) {
  auto m = ParseModelYaml("num_layers: " + std::string(100000, 'A') + "\n",
                          "m.yaml");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "m.yaml:1: num_layers: expected a positive "
            "integer, got '" +
                std::string(80, 'A') + "...'");
}

TEST(FuzzYamlRegression, DeepNestingIsMalformedYaml) {
  auto m =
      ParseModelYaml("num_layers: " + std::string(5000, '[') + "\n", "m.yaml");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(m.status().message().rfind("m.yaml:1: malformed YAML: ", 0), 0u)
      << m.status().message();
}

TEST(FuzzYamlRegression, HugeMaxMicroBatchSizeDoesNotLoopForever) {
  // Before the bound, 2^62 as max_micro_batch_size doubled the micro-batch
  // candidate past INT64_MAX (signed overflow) in the enumerator.
  auto s = ParseSearchSpaceYaml("max_micro_batch_size: 4611686018427387904\n",
                                "s.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "s.yaml:1: max_micro_batch_size: 4611686018427387904 is above the "
            "limit of 16777216 sequences");
}

}  // namespace
}  // namespace meshtune::search_spaces
