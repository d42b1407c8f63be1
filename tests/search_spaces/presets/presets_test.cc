// Built-in presets: every file parses and validates, names and aliases
// resolve, numbers agree with the published calibration table, unknown names
// get suggestions, and `model:`-section files round-trip.
#include "search_spaces/presets/presets.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "search_spaces/embedded_file.h"

namespace meshtune::search_spaces {
namespace {

std::vector<std::string> Names(const std::vector<ModelSpec>& specs) {
  std::vector<std::string> out;
  for (const auto& s : specs) out.push_back(s.name);
  return out;
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("meshtune_presets_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// Parameters of the transformer blocks plus embeddings (no biases or norms):
// attention Q,O (h·a·d) and K,V (h·g·d); MLP 2·h·f (3·h·f gated); experts
// and shared experts replace the MLP in MoE layers, plus an h×E router.
// GPT-style layers only: MLA and hybrid presets are counted layer by layer in
// new_presets_test.cc.
double ApproxParamsB(const ModelSpec& m) {
  const double h = m.hidden_size;
  const double attn = 2 * h * m.query_projection_size() +
                      2 * h * m.num_query_groups * m.kv_channels;
  const double gated = m.gated_mlp() ? 3 : 2;
  const double mlp = gated * h * m.ffn_hidden_size;
  const double moe = m.num_experts * gated * h * m.expert_ffn_hidden_size() +
                     gated * h * m.moe_shared_expert_intermediate_size +
                     h * m.num_experts;
  double embed =
      m.vocab_size * h * (m.untie_embeddings_and_output_weights ? 2.0 : 1.0);
  if (m.position_embedding_type == PositionEmbedding::kLearnedAbsolute) {
    embed += m.seq_length * h;
  }
  return (m.num_dense_layers() * (attn + mlp) +
          m.num_moe_layers() * (attn + moe) + embed) /
         1e9;
}

TEST(ModelPresetsTest, EveryPresetParsesAndValidates) {
  const auto& models = ModelPresets();
  // 35 dense / Mixtral-style presets (Mistral 7B and GPT-J 6B for the
  // serving dev set), 15 of the 2025-26 architectures (new_presets_test.cc)
  // and moe-tiny (the engine's MoE tests).
  ASSERT_EQ(models.size(), 51u);
  size_t yaml_files = 0;
  for (const EmbeddedFile& f : EmbeddedPresetFiles()) {
    if (f.path.rfind("models/", 0) == 0) ++yaml_files;
  }
  EXPECT_EQ(yaml_files, models.size());
  for (const ModelSpec& m : models) {
    SCOPED_TRACE(m.name);
    EXPECT_TRUE(m.Validate().ok()) << m.Validate().message();
    EXPECT_FALSE(m.display_name.empty());
    EXPECT_GT(m.global_batch_size, 0);
    // Heads tile the hidden size, except where the published architecture
    // sets the head size apart (docs/sources.md §1.1: Qwen3-MoE, GPT-OSS;
    // §1.4: Nemotron 3 Nano, 32 x 128 at h 2688). MLA does not use
    // kv_channels for shapes (§1.3 note).
    const bool own_head_size = m.name.rfind("qwen3-", 0) == 0 ||
                               m.name.rfind("gpt-oss-", 0) == 0 ||
                               m.name == "nemotron3-nano";
    if (!m.multi_latent_attention) {
      EXPECT_EQ(m.kv_channels * m.num_attention_heads == m.hidden_size,
                !own_head_size);
    }
    // Published counts agree with the architecture (catches typos in dims).
    if (m.published_params_b > 0 && !m.multi_latent_attention &&
        !m.is_hybrid()) {
      EXPECT_NEAR(ApproxParamsB(m) / m.published_params_b, 1.0, 0.07);
    }
  }
}

TEST(ModelPresetsTest, RequiredModelsExistInFamilySizeOrder) {
  // Families in alphabetical order (the name without its last '-' part),
  // by size within one.
  const std::vector<std::string> expected = {
      "deepseek-v2",     "deepseek-v3",     "deepseek-v2-lite",
      "gpt-tiny",        "gpt-1.7b",        "gpt-3.6b",
      "gpt-7.5b",        "gpt-18.4b",       "gpt-22b",
      "gpt-39.1b",       "gpt-76.1b",       "gpt-145.6b",
      "gpt-310.1b",      "gpt-529.6b",      "gpt-530b",
      "gpt-1t",          "gpt-j-6b",        "gpt-oss-20b",
      "gpt-oss-120b",    "gpt3-1.3b",       "gpt3-5b",
      "gpt3-7b",         "gpt3-13b",        "gpt3-20b",
      "gpt3-70b",        "gpt3-175b",       "kimi-k2",
      "llama-tiny",      "llama2-7b",       "llama2-13b",
      "llama2-70b",      "llama3-8b",       "llama3-70b",
      "llama3-405b",     "llama4-scout",    "llama4-maverick",
      "mistral-7b",      "mixtral-8x7b",    "mixtral-8x22b",
      "moe-tiny",        "nemotron-8b",     "nemotron-22b",
      "nemotron-h-8b",   "nemotron-h-56b",  "nemotron3-nano",
      "nemotron3-super", "nemotron3-ultra", "nemotron4-15b",
      "nemotron4-340b",  "qwen3-235b-a22b", "qwen3-30b-a3b"};
  EXPECT_EQ(Names(ModelPresets()), expected);
}

TEST(ModelPresetsTest, FamilyConventions) {
  StatusOr<ModelSpec> gpt = ResolveModel("gpt3-175b");
  ASSERT_TRUE(gpt.ok());
  EXPECT_EQ(gpt->num_layers, 96);
  EXPECT_EQ(gpt->hidden_size, 12288);
  EXPECT_EQ(gpt->ffn_hidden_size, 4 * 12288);
  EXPECT_EQ(gpt->vocab_size, 51200);
  EXPECT_EQ(gpt->global_batch_size, 1536);
  EXPECT_EQ(gpt->normalization, Normalization::kLayerNorm);
  EXPECT_EQ(gpt->position_embedding_type, PositionEmbedding::kLearnedAbsolute);
  EXPECT_FALSE(gpt->untie_embeddings_and_output_weights);

  StatusOr<ModelSpec> llama = ResolveModel("llama3-405b");
  ASSERT_TRUE(llama.ok());
  EXPECT_EQ(llama->num_layers, 126);
  EXPECT_EQ(llama->num_query_groups, 8);
  EXPECT_EQ(llama->ffn_hidden_size, 53248);
  EXPECT_EQ(llama->vocab_size, 128256);
  EXPECT_EQ(llama->seq_length, 8192);
  EXPECT_EQ(llama->activation, Activation::kSwiglu);
  EXPECT_EQ(llama->normalization, Normalization::kRMSNorm);
  EXPECT_TRUE(llama->untie_embeddings_and_output_weights);

  StatusOr<ModelSpec> mixtral = ResolveModel("mixtral-8x22b");
  ASSERT_TRUE(mixtral.ok());
  EXPECT_TRUE(mixtral->is_moe());
  EXPECT_EQ(mixtral->num_experts, 8);
  EXPECT_EQ(mixtral->moe_router_topk, 2);
  EXPECT_EQ(mixtral->num_moe_layers(), 56);
  EXPECT_EQ(mixtral->vocab_size, 32768);
}

// Minimal CSV reader for tests/data/published_calibration.csv (quoted fields
// may contain commas).
std::vector<std::map<std::string, std::string>> ReadCsv(
    const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> fields(1);
    bool quoted = false;
    for (char c : line) {
      if (c == '"') {
        quoted = !quoted;
      } else if (c == ',' && !quoted) {
        fields.emplace_back();
      } else {
        fields.back() += c;
      }
    }
    rows.push_back(fields);
  }
  std::vector<std::map<std::string, std::string>> out;
  for (size_t r = 1; r < rows.size(); ++r) {
    std::map<std::string, std::string> row;
    for (size_t c = 0; c < rows[0].size() && c < rows[r].size(); ++c) {
      row[rows[0][c]] = rows[r][c];
    }
    out.push_back(row);
  }
  return out;
}

TEST(ModelPresetsTest, AgreeWithPublishedCalibrationTable) {
  const auto rows = ReadCsv(std::string(MESHTUNE_SOURCE_DIR) +
                            "/tests/data/published_calibration.csv");
  ASSERT_GT(rows.size(), 40u);
  // CSV model name -> preset (or alias) it must match.
  const std::map<std::string, std::string> preset_of = {
      {"GPT-1.7B", "gpt-1.7b"},
      {"GPT-3.6B", "gpt-3.6b"},
      {"GPT-7.5B", "gpt-7.5b"},
      {"GPT-18.4B", "gpt-18.4b"},
      {"GPT-39.1B", "gpt-39.1b"},
      {"GPT-76.1B", "gpt-76.1b"},
      {"GPT-145.6B", "gpt-145.6b"},
      {"GPT-310.1B", "gpt-310.1b"},
      {"GPT-529.6B", "gpt-529.6b"},
      {"GPT-1008.0B", "gpt-1t"},
      {"GPT-22B", "gpt-22b"},
      {"GPT-175B", "gpt3-175b"},
      {"GPT-530B", "gpt-530b"},
      {"GPT-1T", "gpt-1t-korthikanti"},
      {"GPT3-5B", "gpt3-5b"},
      {"GPT3-20B", "gpt3-20b"},
      {"GPT3-175B", "gpt3-175b"},
      {"LLAMA2-7B", "llama2-7b"},
      {"LLAMA2-13B", "llama2-13b"},
      {"LLAMA2-70B", "llama2-70b"},
      {"LLAMA3-8B", "llama3-8b"},
      {"LLAMA3-70B", "llama3-70b"},
      {"Nemotron-8B", "nemotron-8b"},
      {"Nemotron-22B", "nemotron-22b"},
      {"Nemotron-340B", "nemotron4-340b"}};
  std::set<std::string> checked;
  for (const auto& row : rows) {
    const std::string name = row.at("model");
    SCOPED_TRACE(name);
    ASSERT_TRUE(preset_of.count(name)) << "CSV model without a preset";
    StatusOr<ModelSpec> m = ResolveModel(preset_of.at(name));
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_EQ(std::to_string(m->num_layers), row.at("layers"));
    EXPECT_EQ(std::to_string(m->hidden_size), row.at("hidden"));
    EXPECT_EQ(std::to_string(m->num_attention_heads), row.at("heads"));
    EXPECT_EQ(std::to_string(m->num_query_groups), row.at("kv_heads"));
    EXPECT_EQ(std::to_string(m->ffn_hidden_size), row.at("ffn_hidden"));
    if (!row.at("vocab").empty()) {
      EXPECT_EQ(std::to_string(m->vocab_size), row.at("vocab"));
    }
    EXPECT_EQ(std::to_string(m->seq_length), row.at("seq_len"));
    // SC21 weak-scaling presets carry the batch of their row.
    if (row.at("source") == "Narayanan2021_SC21_Table1") {
      EXPECT_EQ(std::to_string(m->global_batch_size), row.at("gbs"));
    }
    checked.insert(m->name);
  }
  EXPECT_GE(checked.size(), 20u);
}

// The serving dev set's models (inference_dev.csv "Mistral-7B", "GPT-J-6B"):
// the names resolve, and the parameter counts are the published ones
// (by hand: Mistral 32·(2·4096·4096 + 2·4096·1024 + 3·4096·14336) +
// 2·32000·4096 = 7.2415B; GPT-J 28·(4·4096² + 2·4096·16384) +
// 2·50400·4096 = 6.0500B, norms and biases aside).
TEST(ModelPresetsTest, ServingDevSetModels) {
  StatusOr<ModelSpec> mistral = ResolveModel("Mistral-7B");
  ASSERT_TRUE(mistral.ok()) << mistral.status().message();
  EXPECT_EQ(mistral->name, "mistral-7b");
  EXPECT_EQ(mistral->num_query_groups, 8);
  EXPECT_EQ(mistral->ffn_hidden_size, 14336);
  EXPECT_EQ(mistral->vocab_size, 32000);  // v0.1 (v0.3: 32768)
  EXPECT_EQ(mistral->window_size, 4096);  // v0.1's sliding window
  EXPECT_EQ(mistral->rotary_base, 10000);
  EXPECT_TRUE(mistral->untie_embeddings_and_output_weights);
  EXPECT_NEAR(ApproxParamsB(*mistral), 7.2415, 1e-4);
  EXPECT_EQ(mistral->published_params_b, 7.24);

  StatusOr<ModelSpec> gptj = ResolveModel("GPT-J-6B");
  ASSERT_TRUE(gptj.ok()) << gptj.status().message();
  EXPECT_EQ(gptj->name, "gpt-j-6b");
  EXPECT_EQ(gptj->num_layers, 28);
  EXPECT_EQ(gptj->num_attention_heads, 16);
  EXPECT_EQ(gptj->kv_channels, 256);
  EXPECT_EQ(gptj->ffn_hidden_size, 16384);
  EXPECT_EQ(gptj->vocab_size, 50400);
  EXPECT_EQ(gptj->normalization, Normalization::kLayerNorm);
  EXPECT_EQ(gptj->activation, Activation::kGelu);
  EXPECT_EQ(gptj->position_embedding_type, PositionEmbedding::kRope);
  EXPECT_TRUE(gptj->untie_embeddings_and_output_weights);
  EXPECT_EQ(gptj->window_size, -1);
  EXPECT_NEAR(ApproxParamsB(*gptj), 6.0500, 1e-4);
  EXPECT_EQ(gptj->published_params_b, 6.05);
}

TEST(ResolveModelTest, AliasesAndCase) {
  for (const char* name : {"gpt3-175b", "175B", "GPT3-175B", "gpt3",
                           "gpt-3-175b", "gpt3_175b", "Gpt-175B"}) {
    StatusOr<ModelSpec> m = ResolveModel(name);
    ASSERT_TRUE(m.ok()) << name << ": " << m.status().message();
    EXPECT_EQ(m->name, "gpt3-175b") << name;
  }
  EXPECT_EQ(ResolveModel("gpt-1t-korthikanti")->name, "gpt-1t");
  EXPECT_EQ(ResolveModel("LLaMA-3-70B")->name, "llama3-70b");
  EXPECT_EQ(ResolveModel("llama3.1-405b")->name, "llama3-405b");
  EXPECT_EQ(ResolveModel("Nemotron-340B")->name, "nemotron4-340b");
}

TEST(ResolveModelTest, UnknownNameSuggests) {
  StatusOr<ModelSpec> m = ResolveModel("gpt5");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(m.status().ExitCode(), 2);
  EXPECT_EQ(m.status().message(), "unknown model preset 'gpt5'");
  EXPECT_EQ(m.status().hint(),
            "did you mean: gpt3-175b, gpt-1t, gpt3-5b? run 'tune models' for "
            "the list");

  // Substring matches come first: every 70B model.
  m = ResolveModel("70b");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().hint(),
            "did you mean: gpt3-70b, llama2-70b, llama3-70b? run 'tune "
            "models' for the list");

  m = ResolveModel("lama3-8b");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().hint().rfind("did you mean: llama3-8b, ", 0), 0u)
      << m.status().hint();
}

TEST(ResolveModelTest, FilesFromDisk) {
  StatusOr<ModelSpec> m = ResolveModel("no/such/model.yaml");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(m.status().message(), "model file 'no/such/model.yaml' not found");

  const std::string dir = TempPath("dir.yaml");
  std::filesystem::create_directories(dir);
  m = ResolveModel(dir);
  ASSERT_FALSE(m.ok());
  // An input problem (exit 2), like a missing file; not an I/O failure.
  EXPECT_EQ(m.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(m.status().message(), "model file '" + dir + "' is a directory");
  std::filesystem::remove(dir);

  // An existing file without a .yaml suffix is read from disk too, and its
  // errors name the path.
  const std::string path = TempPath("custom_model");
  WriteFile(path, "num_layers: 2\nhidden_size: 64\nnum_attention_heads: 4\n");
  m = ResolveModel(path);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            path + ":1: model is missing required key 'ffn_hidden_size'");
  std::filesystem::remove(path);
}

// `tune --out best.yaml` writes the model under `model:` next to other
// sections; `--model best.yaml` must read it back unchanged.
TEST(ResolveModelTest, ModelSectionRoundTrip) {
  for (const char* preset : {"llama3-70b", "gpt3-175b", "mixtral-8x7b"}) {
    SCOPED_TRACE(preset);
    const ModelSpec m = ResolveModel(preset).value();
    YAML::Emitter out;
    out << YAML::BeginMap << YAML::Key << "model" << YAML::Value
        << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << m.name + "-copy";
    out << YAML::Key << "display_name" << YAML::Value << m.display_name;
    out << YAML::Key << "num_layers" << YAML::Value << m.num_layers;
    out << YAML::Key << "hidden_size" << YAML::Value << m.hidden_size;
    out << YAML::Key << "num_attention_heads" << YAML::Value
        << m.num_attention_heads;
    out << YAML::Key << "num_query_groups" << YAML::Value << m.num_query_groups;
    out << YAML::Key << "kv_channels" << YAML::Value << m.kv_channels;
    out << YAML::Key << "ffn_hidden_size" << YAML::Value << m.ffn_hidden_size;
    out << YAML::Key << "vocab_size" << YAML::Value << m.vocab_size;
    out << YAML::Key << "seq_length" << YAML::Value << m.seq_length;
    out << YAML::Key << "normalization" << YAML::Value
        << ToString(m.normalization);
    out << YAML::Key << "activation" << YAML::Value << ToString(m.activation);
    out << YAML::Key << "position_embedding_type" << YAML::Value
        << ToString(m.position_embedding_type);
    out << YAML::Key << "untie_embeddings_and_output_weights" << YAML::Value
        << m.untie_embeddings_and_output_weights;
    out << YAML::Key << "num_experts" << YAML::Value << m.num_experts;
    if (m.is_moe()) {
      out << YAML::Key << "moe_router_topk" << YAML::Value << m.moe_router_topk;
      out << YAML::Key << "moe_ffn_hidden_size" << YAML::Value
          << m.moe_ffn_hidden_size;
      out << YAML::Key << "moe_layer_freq" << YAML::Value << m.moe_layer_freq;
    }
    out << YAML::Key << "global_batch_size" << YAML::Value
        << m.global_batch_size;
    out << YAML::EndMap;
    out << YAML::Key << "parallelism" << YAML::Value << YAML::BeginMap
        << YAML::Key << "tensor_model_parallel_size" << YAML::Value << 8
        << YAML::EndMap;
    out << YAML::Key << "cluster" << YAML::Value << "h100";
    out << YAML::EndMap;
    const std::string path = TempPath(std::string(preset) + "_best.yaml");
    WriteFile(path, out.c_str());
    StatusOr<ModelSpec> back = ResolveModel(path);
    std::filesystem::remove(path);
    ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << out.c_str();
    EXPECT_EQ(back->name, m.name + "-copy");
    EXPECT_EQ(back->display_name, m.display_name);
    EXPECT_EQ(back->num_layers, m.num_layers);
    EXPECT_EQ(back->hidden_size, m.hidden_size);
    EXPECT_EQ(back->num_attention_heads, m.num_attention_heads);
    EXPECT_EQ(back->num_query_groups, m.num_query_groups);
    EXPECT_EQ(back->kv_channels, m.kv_channels);
    EXPECT_EQ(back->ffn_hidden_size, m.ffn_hidden_size);
    EXPECT_EQ(back->vocab_size, m.vocab_size);
    EXPECT_EQ(back->seq_length, m.seq_length);
    EXPECT_EQ(back->normalization, m.normalization);
    EXPECT_EQ(back->activation, m.activation);
    EXPECT_EQ(back->position_embedding_type, m.position_embedding_type);
    EXPECT_EQ(back->untie_embeddings_and_output_weights,
              m.untie_embeddings_and_output_weights);
    EXPECT_EQ(back->num_experts, m.num_experts);
    EXPECT_EQ(back->moe_router_topk, m.moe_router_topk);
    EXPECT_EQ(back->moe_ffn_hidden_size, m.moe_ffn_hidden_size);
    EXPECT_EQ(back->moe_layer_freq, m.moe_layer_freq);
    EXPECT_EQ(back->global_batch_size, m.global_batch_size);
  }
}

TEST(ResolveModelTest, ModelSectionNamingAPreset) {
  StatusOr<ModelSpec> m =
      ParseModelYaml("model: 175b\nparallelism: {tp: 8}\n", "best.yaml");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->name, "gpt3-175b");
  // Errors inside a `model:` section carry the section's lines.
  m = ParseModelYaml("training: {}\nmodel:\n  num_layers: 2\n  hiden: 3\n",
                     "best.yaml");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "best.yaml:4: unknown key 'hiden' in model");
}

TEST(ClusterPresetsTest, EveryPresetParsesAndValidates) {
  const auto& clusters = ClusterPresets();
  std::vector<std::string> names;
  for (const ClusterSpec& c : clusters) {
    SCOPED_TRACE(c.name);
    names.push_back(c.name);
    EXPECT_TRUE(c.Validate().ok()) << c.Validate().message();
    EXPECT_EQ(c.memory_reserve_gib, 3.0);
    // Measured GEMM ceilings: 0.655 (B200 in the training's layouts,
    // clusters/b200.yaml) to 0.869 (A100 MAMF).
    EXPECT_GT(c.gpu.gemm_max_efficiency_bf16, 0.6);
    EXPECT_LT(c.gpu.gemm_max_efficiency_bf16, 0.9);
  }
  EXPECT_EQ(names, std::vector<std::string>(
                       {"a100-40g", "a100-80g", "l40s", "rtx-pro-6000", "h100",
                        "gh200", "h200", "b200", "b300", "gb200", "gb300"}));
}

TEST(ClusterPresetsTest, HandComputedNumbers) {
  const ClusterSpec a100 = ResolveCluster("a100-80g").value();
  // The driver exposes 81920 MiB = 80 GiB; minus the 3 GiB reserve.
  EXPECT_NEAR(a100.UsableMemoryGib(), 77.0, 1e-12);
  EXPECT_EQ(a100.gpu.PeakTflops(Precision::kBf16), 312);
  EXPECT_EQ(a100.gpu.PeakTflops(Precision::kFp8), 0);
  EXPECT_NEAR(a100.gpu.GemmMaxEfficiency(Precision::kBf16) * 312, 271.2, 0.1);
  EXPECT_EQ(a100.nvlink_busbw_gbps, 230);
  EXPECT_EQ(a100.nic_gbps, 25);

  const ClusterSpec h200 = ResolveCluster("H200-141G").value();
  // 143771 MiB = 140.4 GiB exposed, minus 3.
  EXPECT_NEAR(h200.UsableMemoryGib(), 137.4, 1e-9);
  EXPECT_EQ(h200.nvls_allreduce_busbw_gbps, 480);
  EXPECT_NEAR(h200.gpu.GemmMaxEfficiency(Precision::kFp8) * 1979, 1453.4, 1);

  const ClusterSpec gb200 = ResolveCluster("gb200-nvl72").value();
  // nvidia-smi reports 189471 MiB = 185.03 GiB; minus 3.
  EXPECT_NEAR(gb200.UsableMemoryGib(), 182.03, 1e-9);
  EXPECT_EQ(gb200.gpus_per_node, 4);
  EXPECT_EQ(gb200.nvlink_domain_gpus, 72);
  EXPECT_EQ(gb200.gpu.PeakTflops(Precision::kFp8), 5000);
}

TEST(ClusterPresetsTest, BlockwiseFp8CeilingsAreNvidiasMeasuredGemms) {
  // The best fp8_block GEMM of NVIDIA's TensorRT-LLM sweep on each GPU over
  // its best per-tensor FP8 GEMM (TFLOP/s, the clusters/*.yaml comments):
  // 0.84 on Hopper, 0.96-0.99 on Blackwell; the blockwise ceiling is the
  // FP8 one times that.
  const std::vector<std::tuple<const char*, double, double>> best = {
      {"h100", 1271, 1507},  {"h200", 1286, 1534}, {"b200", 3099, 3151},
      {"gb200", 3365, 3493}, {"b300", 3349, 3376}, {"gb300", 3681, 3749}};
  for (const auto& [name, block, tensor] : best) {
    SCOPED_TRACE(name);
    const ClusterSpec c = ResolveCluster(name).value();
    EXPECT_NEAR(c.gpu.fp8_blockwise_relative, block / tensor, 0.0006);
    EXPECT_NEAR(c.gpu.GemmMaxEfficiency(Precision::kFp8Blockwise),
                c.gpu.gemm_max_efficiency_fp8 * c.gpu.fp8_blockwise_relative,
                1e-12);
  }
  // Their fused MoE, fitted on NVIDIA's sweeps of DeepSeek-V3's layer as
  // GEMM time plus moe_copy_bytes per routed copy and hidden element at the
  // serving HBM rate (80 % of hbm_gbps): the bytes from the sweeps over
  // every moe_tp and ep, the GEMM rate from the one-GPU points at
  // 8192-16384 tokens, capped at the dense rate (1). 0 bytes where no sweep
  // has the GPU.
  const std::vector<std::tuple<const char*, double, double, double, double>>
      moe = {{"h100", 0.66, 1.0, 12, 27},      {"h200", 0.85, 1.0, 13, 35},
             {"b200", 1.0, 0.69, 18, 16},      {"gb200", 1.0, 1.0, 18, 0},
             {"b300", 1.0, 1.0, 18, 0},        {"gb300", 1.0, 0.99, 17, 0},
             {"rtx-pro-6000", 1.0, 1.0, 6, 0}, {"a100-80g", 1.0, 1.0, 0, 0},
             {"l40s", 1.0, 1.0, 0, 0}};
  for (const auto& [name, blockwise, nvfp4, bytes, blockwise_bytes] : moe) {
    SCOPED_TRACE(name);
    const search_spaces::GpuSpec g = ResolveCluster(name)->gpu;
    EXPECT_EQ(g.moe_fp8_blockwise_relative, blockwise);
    EXPECT_EQ(g.moe_nvfp4_relative, nvfp4);
    EXPECT_EQ(g.moe_copy_bytes, bytes);
    EXPECT_EQ(g.moe_fp8_blockwise_copy_bytes, blockwise_bytes);
  }
  EXPECT_EQ(ResolveCluster("h200")->gpu.moe_nvfp4_relative, 1.0);
  // MLA decode over an FP8 cache on Blackwell: TensorRT-LLM's kernel's
  // TFLOP/s over the FP8 ceiling (peak · gemm_max_efficiency_fp8); Hopper's
  // run at the BF16 ceiling (0).
  const std::vector<std::tuple<const char*, double>> mla = {
      {"b200", 2860 / (4500 * 0.763)},
      {"b300", 2838 / (4500 * 0.745)},
      {"gb200", 2977 / (5000 * 0.723)},
      {"gb300", 2880 / (5000 * 0.723)},
      {"rtx-pro-6000", 701 / (1000 * 0.828)}};
  for (const auto& [name, relative] : mla) {
    SCOPED_TRACE(name);
    EXPECT_NEAR(ResolveCluster(name)->gpu.mla_fp8_kv_relative, relative, 0.006);
  }
  EXPECT_EQ(ResolveCluster("h200")->gpu.mla_fp8_kv_relative, 0.0);
  // Its fixed time per sequence (µs, at 256 and 1024 sequences) over the
  // 128 heads: ns per sequence and head; 0 (unpriced) without a sweep.
  const std::vector<std::tuple<const char*, double, double>> fixed = {
      {"h100", 0.306, 0.262},        {"h200", 0.282, 0.241},
      {"b200", 0.166, 0.125},        {"b300", 0.159, 0.122},
      {"gb200", 0.169, 0.122},       {"gb300", 0.160, 0.118},
      {"rtx-pro-6000", 0.429, 0.395}};
  for (const auto& [name, at256, at1024] : fixed) {
    SCOPED_TRACE(name);
    EXPECT_NEAR(ResolveCluster(name)->gpu.mla_decode_head_ns,
                (at256 + at1024) / 2 / 128 * 1e3, 0.005);
  }
  EXPECT_EQ(ResolveCluster("l40s")->gpu.mla_decode_head_ns, 0.0);
  // Without a measured value, FP8's ceiling.
  const ClusterSpec l40s = ResolveCluster("l40s").value();
  EXPECT_EQ(l40s.gpu.GemmMaxEfficiency(Precision::kFp8Blockwise),
            l40s.gpu.GemmMaxEfficiency(Precision::kFp8));
}

TEST(ClusterPresetsTest, BlackwellNvfp4RatesAreNvidiasMeasuredGemms) {
  // The best NVFP4 GEMM of NVIDIA's TensorRT-LLM sweep on each GPU (TFLOP/s,
  // the clusters/*.yaml comments), over the dense FP4 peak: about half the
  // peak, where the FP8 ceilings are 0.72-0.76.
  // Their decode GEMMs stream NVFP4 weights at 0.62-0.63 of the BF16 rate
  // (TB/s over TB/s in the same sweep).
  const std::vector<std::tuple<const char*, double, double, double>> best = {
      {"b200", 4546.5, 9000, 3.72 / 5.98},
      {"gb200", 5202, 10000, 3.79 / 6.05},
      {"b300", 5988, 13500, 3.72 / 5.97},
      {"gb300", 6463, 15000, 3.76 / 5.95}};
  for (const auto& [name, tflops, peak, stream] : best) {
    SCOPED_TRACE(name);
    const ClusterSpec c = ResolveCluster(name).value();
    EXPECT_EQ(c.gpu.PeakTflops(Precision::kNvfp4), peak);
    EXPECT_NEAR(c.gpu.GemmMaxEfficiency(Precision::kNvfp4) * peak, tflops,
                0.005 * tflops);
    EXPECT_LT(c.gpu.GemmMaxEfficiency(Precision::kNvfp4),
              c.gpu.GemmMaxEfficiency(Precision::kFp8));
    EXPECT_NEAR(c.gpu.nvfp4_stream_relative, stream, 0.005);
  }
  // The RTX PRO 6000's: 1.09 / 1.47; GPUs without FP4: 1.
  EXPECT_NEAR(ResolveCluster("rtx-pro-6000")->gpu.nvfp4_stream_relative,
              1.09 / 1.47, 0.005);
  EXPECT_EQ(ResolveCluster("h100")->gpu.nvfp4_stream_relative, 1.0);
  // Fused MoE GEMMs at the dense rate everywhere but on Ampere, whose
  // TensorRT-LLM sweep takes 1.70 times the dense model's time.
  EXPECT_NEAR(ResolveCluster("a100-80g")->gpu.moe_gemm_relative, 1 / 1.70,
              0.005);
  EXPECT_EQ(ResolveCluster("a100-40g")->gpu.moe_gemm_relative,
            ResolveCluster("a100-80g")->gpu.moe_gemm_relative);
  EXPECT_EQ(ResolveCluster("h200")->gpu.moe_gemm_relative, 1.0);
}

TEST(ClusterPresetsTest, AliasesAndSuggestions) {
  EXPECT_EQ(ResolveCluster("a100")->name, "a100-80g");
  EXPECT_EQ(ResolveCluster("A100-80GB")->name, "a100-80g");
  EXPECT_EQ(ResolveCluster("h100-80g")->name, "h100");
  EXPECT_EQ(ResolveCluster("h200-141g")->name, "h200");
  StatusOr<ClusterSpec> c = ResolveCluster("h300");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "unknown cluster preset 'h300'");
  EXPECT_EQ(c.status().hint(),
            "did you mean: h100, h200, b300? run 'tune gpus' for the list");
}

// One rule for table rows, driver names and the profiler's peaks.
TEST(ClusterPresetsTest, GpuNamesMapBySubstring) {
  EXPECT_EQ(ClusterPresetForGpu("A100-SXM4-80GB (Selene DGX A100)"),
            "a100-80g");
  EXPECT_EQ(ClusterPresetForGpu("NVIDIA A100 40GB PCIe"), "a100-40g");
  EXPECT_EQ(ClusterPresetForGpu("NVIDIA A100-SXM4-40GB"), "a100-40g");
  EXPECT_EQ(ClusterPresetForGpu("A100"), "");  // which one is unknown
  EXPECT_EQ(ClusterPresetForGpu("H100-SXM-80GB (DGX-H100)"), "h100");
  EXPECT_EQ(ClusterPresetForGpu("NVIDIA H100 80GB HBM3"), "h100");
  EXPECT_EQ(ClusterPresetForGpu("NVIDIA H100 PCIe"), "");  // not the SXM
  EXPECT_EQ(ClusterPresetForGpu("NVIDIA H200 (sm_90, 139.80 GiB)"), "h200");
  EXPECT_EQ(ClusterPresetForGpu("DGX H200"), "h200");
  EXPECT_EQ(ClusterPresetForGpu("GB200 NVL72"), "gb200");  // not b200
  EXPECT_EQ(ClusterPresetForGpu("HGX B200"), "b200");
  EXPECT_EQ(ClusterPresetForGpu("gb300 nvl72"), "gb300");
  EXPECT_EQ(ClusterPresetForGpu("NVIDIA B300 SXM6 AC"), "b300");
  EXPECT_EQ(ClusterPresetForGpu("MI300X"), "");
  EXPECT_EQ(ClusterPresetForGpu("NVIDIA GeForce RTX 4090"), "");
  // The serving dev set's names (inference_dev.csv) and nvidia-smi's.
  EXPECT_EQ(ClusterPresetForGpu("GH200-480GB"), "gh200");  // not h200
  EXPECT_EQ(ClusterPresetForGpu("NVIDIA GH200 480GB"), "gh200");
  EXPECT_EQ(ClusterPresetForGpu("NVIDIA GH200 120GB"), "gh200");
  EXPECT_EQ(ClusterPresetForGpu("NVIDIA GH200 144G HBM3e"), "");
  EXPECT_EQ(ClusterPresetForGpu("L40S"), "l40s");
  EXPECT_EQ(ClusterPresetForGpu("NVIDIA L40S"), "l40s");
  EXPECT_EQ(ClusterPresetForGpu("NVIDIA L40"), "");  // half the FP8 rate
  EXPECT_EQ(ClusterPresetForGpu("RTX-PRO-6000-Blackwell-Server"),
            "rtx-pro-6000");
  EXPECT_EQ(ClusterPresetForGpu("NVIDIA RTX PRO 6000 Blackwell Server Edition"),
            "rtx-pro-6000");
  EXPECT_EQ(
      ClusterPresetForGpu("NVIDIA RTX PRO 6000 Blackwell Workstation Edition"),
      "");
  EXPECT_EQ(ClusterPresetForGpu(
                "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"),
            "");
  EXPECT_EQ(ClusterPresetForGpu("NVIDIA RTX 6000 Ada Generation"), "");
  // Every name the rule returns is a preset.
  for (const char* gpu :
       {"A100 80GB", "A100 40GB", "H100", "H200", "B200", "B300", "GB200",
        "GB300", "GH200", "L40S", "RTX PRO 6000"}) {
    const std::string name = ClusterPresetForGpu(gpu);
    ASSERT_FALSE(name.empty()) << gpu;
    EXPECT_TRUE(ResolveCluster(name).ok()) << name;
  }
}

// The GPUs of the serving dev set (inference_dev.csv) that the training
// presets lacked: the CSV's names resolve, and the numbers are the ones
// their YAML derives by hand.
TEST(ClusterPresetsTest, ServingDevSetGpus) {
  for (const auto& [csv_name, preset] :
       std::vector<std::pair<std::string, std::string>>{
           {"L40S", "l40s"},
           {"RTX-PRO-6000-Blackwell-Server", "rtx-pro-6000"},
           {"GH200-480GB", "gh200"}}) {
    SCOPED_TRACE(csv_name);
    StatusOr<ClusterSpec> c = ResolveCluster(csv_name);
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(c->name, preset);
    EXPECT_EQ(ClusterPresetForGpu(csv_name), preset);
  }

  // L40S: Ada, FP8 but no FP4; 46068 MiB exposed; PCIe Gen4 as the
  // intra-node tier, no NVLink SHARP.
  const ClusterSpec l40s = ResolveCluster("l40s").value();
  EXPECT_EQ(l40s.gpu.PeakTflops(Precision::kBf16), 362.05);
  EXPECT_EQ(l40s.gpu.PeakTflops(Precision::kFp8Tensorwise), 733);
  EXPECT_EQ(l40s.gpu.PeakTflops(Precision::kNvfp4), 0);
  EXPECT_EQ(l40s.gpu.hbm_gbps, 864);
  EXPECT_NEAR(l40s.UsableMemoryGib(), 46068.0 / 1024 - 3, 1e-12);
  EXPECT_NEAR(l40s.gpu.GemmMaxEfficiency(Precision::kBf16) * 362.05, 278.0,
              0.1);
  EXPECT_NEAR(l40s.gpu.GemmMaxEfficiency(Precision::kFp8) * 733, 433.4, 0.5);
  EXPECT_EQ(l40s.nvlink_domain_gpus, l40s.gpus_per_node);
  EXPECT_EQ(l40s.nvlink_gbps, 32);  // PCIe Gen4 x16, one direction
  EXPECT_EQ(l40s.nvlink_busbw_gbps, 12.4);
  EXPECT_EQ(l40s.nvlink_latency_us, 5.7);  // NCCL's PCI ring step
  EXPECT_EQ(l40s.nvls_allreduce_busbw_gbps, 0);

  // RTX PRO 6000 Server: FP4 = 2 x FP8 = 4 x BF16; 97887 MiB exposed; PCIe
  // Gen5 measured at 24.7 GB/s over 8 GPUs.
  const ClusterSpec rtx = ResolveCluster("rtx-pro-6000").value();
  EXPECT_EQ(rtx.gpu.PeakTflops(Precision::kBf16), 500);
  EXPECT_EQ(rtx.gpu.PeakTflops(Precision::kFp8), 1000);
  EXPECT_EQ(rtx.gpu.PeakTflops(Precision::kNvfp4), 2000);
  EXPECT_EQ(rtx.gpu.hbm_gbps, 1600);
  EXPECT_NEAR(rtx.UsableMemoryGib(), 97887.0 / 1024 - 3, 1e-12);
  EXPECT_NEAR(rtx.gpu.GemmMaxEfficiency(Precision::kBf16) * 500, 439.5, 0.1);
  EXPECT_NEAR(rtx.gpu.GemmMaxEfficiency(Precision::kNvfp4) * 2000, 1536.9, 1);
  EXPECT_EQ(rtx.nvlink_domain_gpus, rtx.gpus_per_node);
  EXPECT_EQ(rtx.nvlink_gbps, 64);  // PCIe Gen5 x16, one direction
  EXPECT_EQ(rtx.nvlink_busbw_gbps, 24.7);
  EXPECT_EQ(rtx.nvls_allreduce_busbw_gbps, 0);

  // GH200 480GB: an H100 with 96 GB HBM3 at 4 TB/s (97871 MiB exposed), one
  // per node, launched from Grace; its NVLink4 numbers are H100's.
  const ClusterSpec gh200 = ResolveCluster("gh200").value();
  const ClusterSpec h100 = ResolveCluster("h100").value();
  EXPECT_EQ(gh200.gpu.PeakTflops(Precision::kBf16), 989);
  EXPECT_EQ(gh200.gpu.PeakTflops(Precision::kFp8), 1979);
  EXPECT_EQ(gh200.gpu.PeakTflops(Precision::kNvfp4), 0);
  EXPECT_EQ(gh200.gpu.hbm_gb, 96);
  EXPECT_EQ(gh200.gpu.hbm_gbps, 4000);
  EXPECT_NEAR(gh200.UsableMemoryGib(), 97871.0 / 1024 - 3, 1e-12);
  EXPECT_NEAR(gh200.gpu.GemmMaxEfficiency(Precision::kBf16) * 989, 828.6, 0.5);
  EXPECT_NEAR(gh200.gpu.GemmMaxEfficiency(Precision::kFp8) * 1979, 1535.0, 1);
  EXPECT_EQ(gh200.gpus_per_node, 1);
  EXPECT_EQ(gh200.nvlink_domain_gpus, 1);
  EXPECT_EQ(gh200.host_launch_factor, 1.5);
  EXPECT_EQ(gh200.nvlink_gbps, h100.nvlink_gbps);
  EXPECT_EQ(gh200.nvlink_busbw_gbps, h100.nvlink_busbw_gbps);
  EXPECT_EQ(gh200.nvlink_latency_us, h100.nvlink_latency_us);
}

TEST(SearchSpacePresetsTest, BuiltInSpaces) {
  StatusOr<SearchSpace> d = ResolveSearchSpace("default");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_TRUE(d->tp.empty() && d->pp.empty() && d->recompute.empty());
  StatusOr<SearchSpace> n = ResolveSearchSpace("NVLink-TP");
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(n->tp, std::vector<int64_t>({1, 2, 4, 8}));
  ASSERT_EQ(n->recompute.size(), 2u);
  EXPECT_EQ(n->recompute[0].granularity, RecomputeGranularity::kNone);
  EXPECT_EQ(n->recompute[1].granularity, RecomputeGranularity::kSelective);
  StatusOr<SearchSpace> u = ResolveSearchSpace("wide");
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(u.status().message(), "unknown search space preset 'wide'");
  EXPECT_EQ(u.status().hint(),
            "available: default, nvlink-tp; or give a .yaml path");
  StatusOr<SearchSpace> f = ResolveSearchSpace("missing.yml");
  EXPECT_EQ(f.status().message(), "search space file 'missing.yml' not found");
}

}  // namespace
}  // namespace meshtune::search_spaces
