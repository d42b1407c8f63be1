// ModelToYaml against ParseModelYaml: every preset written and read back is
// the same model (written again it gives the same text, and the fields that
// change the cost or the launch, from MLA ranks to the tokenizer, are
// equal), so a `tune search --out` file keeps the model that was costed.
#include <gtest/gtest.h>

#include <string>

#include "search_spaces/presets/presets.h"

namespace meshtune::search_spaces {
namespace {

TEST(ModelToYaml, EveryPresetReadsBackAsItself) {
  for (const ModelSpec& m : ModelPresets()) {
    const std::string text = "model:\n" + ModelToYaml(m, "  ");
    const auto back = ParseModelYaml(text, m.name + ".yaml");
    ASSERT_TRUE(back.ok()) << m.name << ": " << back.status().message() << "\n"
                           << text;
    EXPECT_EQ("model:\n" + ModelToYaml(*back, "  "), text) << m.name;
    EXPECT_EQ(back->num_layers, m.num_layers) << m.name;
    EXPECT_EQ(back->multi_latent_attention, m.multi_latent_attention);
    EXPECT_EQ(back->kv_lora_rank, m.kv_lora_rank) << m.name;
    EXPECT_EQ(back->moe_layer_pattern, m.moe_layer_pattern) << m.name;
    EXPECT_EQ(back->num_moe_layers(), m.num_moe_layers()) << m.name;
    EXPECT_EQ(back->moe_shared_expert_intermediate_size,
              m.moe_shared_expert_intermediate_size)
        << m.name;
    EXPECT_EQ(back->hybrid_layer_pattern, m.hybrid_layer_pattern) << m.name;
    EXPECT_EQ(back->mtp_num_layers, m.mtp_num_layers) << m.name;
    EXPECT_EQ(back->mtp_use_repeated_layer, m.mtp_use_repeated_layer) << m.name;
    EXPECT_EQ(back->has_linear_biases(), m.has_linear_biases()) << m.name;
    EXPECT_EQ(back->rotary_base, m.rotary_base) << m.name;
    EXPECT_EQ(back->window_size, m.window_size) << m.name;
    EXPECT_EQ(back->tokenizer_type, m.tokenizer_type) << m.name;
    EXPECT_EQ(back->tokenizer_model, m.tokenizer_model) << m.name;
    EXPECT_EQ(back->lr, m.lr) << m.name;
    EXPECT_EQ(back->published_params_b, m.published_params_b) << m.name;
  }
}

TEST(ModelToYaml, QuotesNamesAndWritesShortNumbers) {
  ModelSpec m = ResolveModel("deepseek-v3").value();
  m.name = "a\"b\nc";
  const std::string text = ModelToYaml(m, "");
  EXPECT_NE(text.find("name: \"a\\\"b\\x0ac\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lr: 0.00022\n"), std::string::npos) << text;
  EXPECT_NE(text.find("moe_layer_freq: \"([0]*3+[1]*58)\"\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("multi_latent_attention: true\n"), std::string::npos);
}

}  // namespace
}  // namespace meshtune::search_spaces
