// The size bounds of search_spaces/limits.h, each with its exact message:
// in model, cluster and search-space YAML, and on specs built in code. A
// value at the bound is accepted; one above it, or too large for int64_t, is
// a one-line InvalidArgument (exit 2).
#include "search_spaces/limits.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "search_spaces/presets/presets.h"
#include "search_spaces/space/enumerate.h"

namespace meshtune::search_spaces {
namespace {

// A valid model file whose `key` line is replaced by `key: value`.
std::string ModelWith(const std::string& key, const std::string& value) {
  std::map<std::string, std::string> keys = {{"name", "big"},
                                             {"num_layers", "4"},
                                             {"hidden_size", "64"},
                                             {"num_attention_heads", "4"},
                                             {"ffn_hidden_size", "256"},
                                             {"vocab_size", "512"},
                                             {"seq_length", "128"},
                                             {"global_batch_size", "8"}};
  keys[key] = value;
  std::string text;
  for (const auto& [k, v] : keys) text += k + ": " + v + "\n";
  return text;
}

// The line of `key` in ModelWith's text (keys are written sorted).
int LineOf(const std::string& text, const std::string& key) {
  int line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, key.size() + 1, key + ":") == 0 &&
        (i == 0 || text[i - 1] == '\n')) {
      return line;
    }
    if (text[i] == '\n') ++line;
  }
  return -1;
}

struct Bound {
  std::string key;
  int64_t max;
  std::string unit;  // with its leading space, or ""
  std::string hint;
};

TEST(SizeLimits, EveryModelKeyIsBoundedWithItsOwnMessage) {
  const std::vector<Bound> bounds = {
      {"num_layers", 10000, " layers",
       "the largest published models have under 200 layers; check the value"},
      {"hidden_size", 1 << 20, "",
       "the largest published models have hidden sizes near 25000; check the "
       "value"},
      {"num_attention_heads", 1 << 16, " heads",
       "the largest published models have under 200 heads; check the value"},
      {"kv_channels", 1 << 16, "",
       "head dimensions are 64 to 256 in published models; check the value"},
      {"ffn_hidden_size", 1 << 22, "",
       "the largest published models have FFN sizes near 100000; check the "
       "value"},
      {"vocab_size", 1 << 24, " tokens",
       "published vocabularies have under 300000 tokens; check the value"},
      {"seq_length", 1 << 24, " tokens",
       "the longest published contexts are a few million tokens; check the "
       "value"},
      {"num_experts", 1 << 16, " experts",
       "published MoE models have at most a few hundred experts; check the "
       "value"},
      {"global_batch_size", 1 << 24, " sequences",
       "published global batches are 512 to 16384 sequences; check the "
       "value"},
  };
  for (const Bound& b : bounds) {
    SCOPED_TRACE(b.key);
    const std::string above = std::to_string(b.max + 1);
    const std::string text = ModelWith(b.key, above);
    auto m = ParseModelYaml(text, "big.yaml");
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(m.status().message(),
              "big.yaml:" + std::to_string(LineOf(text, b.key)) + ": " + b.key +
                  ": " + above + " is above the limit of " +
                  std::to_string(b.max) + b.unit);
    EXPECT_EQ(m.status().hint(), b.hint);
    // Too large for int64_t: the same message, with the number as written.
    const std::string huge = "99999999999999999999";
    auto h = ParseModelYaml(ModelWith(b.key, huge), "big.yaml");
    ASSERT_FALSE(h.ok());
    EXPECT_EQ(h.status().message(),
              "big.yaml:" + std::to_string(LineOf(text, b.key)) + ": " + b.key +
                  ": " + huge + " is above the limit of " +
                  std::to_string(b.max) + b.unit);
  }
}

TEST(SizeLimits, ValuesAtTheBoundAreAccepted) {
  // The bounds are limits, not errors: a model at every bound parses (the
  // cost model then says it does not fit, which is an answer).
  std::string text =
      "name: huge\nnum_layers: 10000\nhidden_size: 1048576\n"
      "num_attention_heads: 65536\nkv_channels: 65536\n"
      "ffn_hidden_size: 4194304\nvocab_size: 16777216\n"
      "seq_length: 16777216\nglobal_batch_size: 16777216\n"
      "num_experts: 65536\nmoe_router_topk: 65536\nmoe_layer_freq: 10000\n";
  auto m = ParseModelYaml(text, "huge.yaml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->num_layers, 10000);
}

TEST(SizeLimits, TwoBillionLayersIsAnErrorNotAnAllocation) {
  // Issue 16 D1: `sed 's/^num_layers: 4/num_layers: 2000000000/'` on
  // gpt-tiny.yaml made the search allocate per layer and die with
  // std::bad_alloc. The file is now refused while parsing.
  auto m = ParseModelYaml(ModelWith("num_layers", "2000000000"), "big.yaml");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "big.yaml:6: num_layers: 2000000000 is above the limit of 10000 "
            "layers");
}

TEST(SizeLimits, EnumerationMemoryDoesNotGrowWithLayers) {
  // A model at the layer bound enumerates quickly: the recompute domains are
  // kept per distinct layers-per-stage count, not in a vector of num_layers.
  ModelSpec m = ResolveModel("gpt-tiny").value();
  m.num_layers = limits::kNumLayers.max;
  ASSERT_TRUE(m.Validate().ok());
  TrainingSpec t;
  t.num_gpus = 8;
  t.global_batch_size = 16;
  t.seq_length = m.seq_length;
  const auto start = std::chrono::steady_clock::now();
  const Enumeration e =
      EnumerateConfigs(m, t, ResolveCluster("h100").value(), SearchSpace());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_GT(e.configs.size(), 0u);
  EXPECT_LT(seconds, 10.0);
}

TEST(SizeLimits, SpecsBuiltInCodeAreBoundedByValidate) {
  ModelSpec m = ResolveModel("gpt-tiny").value();
  m.num_layers = 2000000000;
  const Status s = m.Validate("args");
  EXPECT_EQ(s.message(),
            "args: num_layers: 2000000000 is above the limit of 10000 layers");
  m = ResolveModel("gpt-tiny").value();
  m.seq_length = int64_t{1} << 40;
  EXPECT_EQ(m.Validate().message(),
            "seq_length: 1099511627776 is above the limit of 16777216 tokens");
}

TEST(SizeLimits, ClusterNodeAndDomainSizes) {
  const std::string base =
      "name: mine\ngpu: h100\nnvlink_gbps: 450\nnvlink_busbw_gbps: 370\n"
      "nvlink_latency_us: 3.4\nnic_gbps: 50\nnic_busbw_gbps: 47\n"
      "network_latency_us: 14\n";
  // 2^32 + 8 used to be narrowed to int (8) without a word.
  auto c = ParseClusterYaml(base + "gpus_per_node: 4294967304\n", "c.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "c.yaml:9: gpus_per_node: 4294967304 is above the limit of 1024 "
            "GPUs");
  EXPECT_EQ(c.status().hint(),
            "nodes hold 4 to 8 GPUs (72 share NVLink in a GB200 NVL72); check "
            "the value");
  c = ParseClusterYaml(base + "gpus_per_node: 8\nnvlink_domain_gpus: 1048577\n",
                       "c.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "c.yaml:10: nvlink_domain_gpus: 1048577 is above the limit of "
            "1048576 GPUs");
  c = ParseClusterYaml("cluster:\n  preset: h100\n  gpus_per_node: 2048\n",
                       "best.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "best.yaml:3: gpus_per_node: 2048 is above the limit of 1024 GPUs");
}

TEST(SizeLimits, SearchSpacePins) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"tensor_model_parallel_size: [8, 1048577]",
       "s.yaml:1: tensor_model_parallel_size: 1048577 is above the limit of "
       "1048576"},
      {"pipeline_model_parallel_size: 99999999999999999999",
       "s.yaml:1: pipeline_model_parallel_size: 99999999999999999999 is above "
       "the limit of 1048576"},
      {"context_parallel_size: 1048577",
       "s.yaml:1: context_parallel_size: 1048577 is above the limit of "
       "1048576"},
      {"expert_model_parallel_size: 1048577",
       "s.yaml:1: expert_model_parallel_size: 1048577 is above the limit of "
       "1048576"},
      {"data_parallel_size: 1048577",
       "s.yaml:1: data_parallel_size: 1048577 is above the limit of 1048576"},
      {"virtual_pipeline_model_parallel_size: 10001",
       "s.yaml:1: virtual_pipeline_model_parallel_size: 10001 is above the "
       "limit of 10000"},
      {"micro_batch_size: 16777217",
       "s.yaml:1: micro_batch_size: 16777217 is above the limit of 16777216 "
       "sequences"},
      {"recompute_granularity: full\nrecompute_num_layers: 10001",
       "s.yaml:2: recompute_num_layers: 10001 is above the limit of 10000"},
      {"max_tensor_model_parallel_size: 1048577",
       "s.yaml:1: max_tensor_model_parallel_size: 1048577 is above the limit "
       "of 1048576"},
  };
  for (const auto& [text, message] : cases) {
    auto s = ParseSearchSpaceYaml(text + "\n", "s.yaml");
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.status().message(), message);
  }
}

}  // namespace
}  // namespace meshtune::search_spaces
