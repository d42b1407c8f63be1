// `tune models` (text and --json): every preset with its parameter counts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "search_spaces/presets/presets.h"
#include "tests/tuner/tune_in_process.h"

namespace meshtune::tuner {
namespace {

using testing::Tune;

TEST(ModelsCommand, JsonListsEveryPresetWithCounts) {
  const testing::InProcessRun run = Tune({"models", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  const nlohmann::json root = nlohmann::json::parse(run.out);
  ASSERT_TRUE(root.contains("models"));
  const nlohmann::json& models = root["models"];
  ASSERT_TRUE(models.is_array());
  const auto& presets = search_spaces::ModelPresets();
  ASSERT_EQ(models.size(), presets.size());
  std::set<std::string> names;
  for (size_t i = 0; i < models.size(); ++i) {
    const nlohmann::json& j = models[i];
    SCOPED_TRACE(presets[i].name);
    // The table's order, one object per preset.
    EXPECT_EQ(j.at("name").get<std::string>(), presets[i].name);
    names.insert(j.at("name").get<std::string>());
    ASSERT_TRUE(j.at("params_b").is_number());
    ASSERT_TRUE(j.at("active_params_b").is_number());
    const double total = j.at("params_b").get<double>();
    const double active = j.at("active_params_b").get<double>();
    EXPECT_GT(total, 0);
    EXPECT_GT(active, 0);
    EXPECT_LE(active, total * (1 + 1e-12));
    if (!presets[i].is_moe()) {
      EXPECT_DOUBLE_EQ(active, total);
    }
    // What the text table prints, too.
    EXPECT_EQ(j.at("display_name").get<std::string>(), presets[i].display_name);
    EXPECT_EQ(j.at("num_layers").get<int64_t>(), presets[i].num_layers);
    EXPECT_EQ(j.at("hidden_size").get<int64_t>(), presets[i].hidden_size);
    EXPECT_EQ(j.at("num_attention_heads").get<int64_t>(),
              presets[i].num_attention_heads);
    EXPECT_EQ(j.at("num_query_groups").get<int64_t>(),
              presets[i].num_query_groups);
    EXPECT_EQ(j.at("ffn_hidden_size").get<int64_t>(),
              presets[i].ffn_hidden_size);
    EXPECT_EQ(j.at("vocab_size").get<int64_t>(), presets[i].vocab_size);
    EXPECT_EQ(j.at("seq_length").get<int64_t>(), presets[i].seq_length);
    EXPECT_EQ(j.at("global_batch_size").get<int64_t>(),
              presets[i].global_batch_size);
    EXPECT_EQ(j.at("num_experts").get<int64_t>(), presets[i].num_experts);
    EXPECT_EQ(j.at("moe_router_topk").get<int64_t>(),
              presets[i].moe_router_topk);
    EXPECT_EQ(j.at("mtp_num_layers").get<int64_t>(), presets[i].mtp_num_layers);
  }
  EXPECT_EQ(names.size(), presets.size());
  for (const char* name :
       {"deepseek-v3", "nemotron3-super", "qwen3-30b-a3b", "gpt3-175b"}) {
    EXPECT_EQ(names.count(name), 1u) << name;
  }
}

// GPT-3 175B by hand (Megatron layout, LayerNorm with biases, tied
// embedding, learned positions): per layer QKV 3h² + 3h, projection h² + h,
// MLP 8h² + 5h (fc1 4h·h + 4h, fc2 4h·h + h), two LayerNorms 4h; plus the
// word embedding V·h (V = 51200 is already a multiple of 128), positions
// s·h and the final LayerNorm 2h.
TEST(ModelsCommand, JsonCountOfADensePreset) {
  const double h = 12288, layers = 96, vocab = 51200, seq = 2048;
  const double expected_b =
      (layers * (12 * h * h + 13 * h) + vocab * h + seq * h + 2 * h) / 1e9;
  const testing::InProcessRun run = Tune({"models", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json root = nlohmann::json::parse(run.out);
  bool found = false;
  for (const nlohmann::json& j : root.at("models")) {
    if (j.at("name") != "gpt3-175b") continue;
    found = true;
    EXPECT_NEAR(j.at("params_b").get<double>(), expected_b, 1e-9);
    EXPECT_NEAR(j.at("active_params_b").get<double>(), expected_b, 1e-9);
    EXPECT_NEAR(expected_b, 174.6, 0.05);  // Megatron's "175B"
  }
  EXPECT_TRUE(found);
}

TEST(ModelsCommand, TextTableHasTheActiveColumn) {
  const testing::InProcessRun run = Tune({"models"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string header = run.out.substr(0, run.out.find('\n'));
  EXPECT_NE(header.find("params_B"), std::string::npos);
  EXPECT_NE(header.find("active_B"), std::string::npos);
  // One line per preset after the header.
  size_t lines = 0;
  for (char c : run.out) lines += c == '\n';
  EXPECT_EQ(lines, search_spaces::ModelPresets().size() + 1);
  EXPECT_NE(run.out.find("\nnemotron3-super "), std::string::npos);
  EXPECT_NE(run.out.find("Nemotron 3 Super 120B-A12B"), std::string::npos);
  // Below 0.1 B three decimals: gpt-tiny's 4.27 M parameters are not 0.0.
  const size_t tiny = run.out.find("\ngpt-tiny ");
  ASSERT_NE(tiny, std::string::npos);
  const std::string row =
      run.out.substr(tiny, run.out.find('\n', tiny + 1) - tiny);
  EXPECT_NE(row.find("   0.004    0.004 "), std::string::npos) << row;
}

}  // namespace
}  // namespace meshtune::tuner
