// The best plans of the 2025-26 presets, as `tune search` finds them, survive
// MegatronArgs -> FormatMegatronArgs -> ParseMegatronArgs (and the NeMo
// override block -> ParseNemoOverrides) with every model field, the
// ParallelConfig and the precision unchanged (issue 17, last check).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "search_spaces/pipeline_layout.h"
#include "tuner/inputs/inputs.h"
#include "tuner/interop/megatron_args.h"
#include "tuner/interop/megatron_args_parser.h"
#include "tuner/interop/nemo_overrides.h"
#include "tuner/machine/calibration_source.h"
#include "tuner/search/search_driver.h"

namespace meshtune::tuner {
namespace {

using search_spaces::ModelSpec;
using search_spaces::PositionEmbedding;

// Every ModelSpec field MegatronArgs writes, compared one by one so that a
// failure names the field.
void ExpectSameModel(const ModelSpec& p, const ModelSpec& m) {
  EXPECT_EQ(p.num_layers, m.num_layers);
  EXPECT_EQ(p.hidden_size, m.hidden_size);
  EXPECT_EQ(p.num_attention_heads, m.num_attention_heads);
  EXPECT_EQ(p.num_query_groups, m.num_query_groups);
  EXPECT_EQ(p.kv_channels, m.kv_channels);
  EXPECT_EQ(p.ffn_hidden_size, m.ffn_hidden_size);
  EXPECT_EQ(p.normalization, m.normalization);
  EXPECT_EQ(p.activation, m.activation);
  EXPECT_EQ(p.position_embedding_type, m.position_embedding_type);
  EXPECT_EQ(p.untie_embeddings_and_output_weights,
            m.untie_embeddings_and_output_weights);
  EXPECT_EQ(p.has_linear_biases(), m.has_linear_biases());
  if (m.position_embedding_type == PositionEmbedding::kRope) {
    EXPECT_EQ(p.rotary_base, m.rotary_base);
  }
  EXPECT_EQ(p.qk_layernorm, m.qk_layernorm);
  EXPECT_EQ(p.window_size, m.window_size);
  EXPECT_EQ(p.window_attn_skip_freq, m.window_attn_skip_freq);
  EXPECT_EQ(p.multi_latent_attention, m.multi_latent_attention);
  EXPECT_EQ(p.q_lora_rank, m.q_lora_rank);
  EXPECT_EQ(p.kv_lora_rank, m.kv_lora_rank);
  EXPECT_EQ(p.qk_head_dim, m.qk_head_dim);
  EXPECT_EQ(p.qk_pos_emb_head_dim, m.qk_pos_emb_head_dim);
  EXPECT_EQ(p.v_head_dim, m.v_head_dim);
  EXPECT_EQ(p.mtp_num_layers, m.mtp_num_layers);
  EXPECT_EQ(p.mtp_use_repeated_layer, m.mtp_use_repeated_layer);
  EXPECT_EQ(p.hybrid_layer_pattern, m.hybrid_layer_pattern);
  if (m.is_hybrid()) {
    EXPECT_EQ(p.mamba_state_dim, m.mamba_state_dim);
    EXPECT_EQ(p.mamba_head_dim, m.mamba_head_dim);
    EXPECT_EQ(p.mamba_num_groups, m.mamba_num_groups);
    EXPECT_EQ(p.mamba_heads(), m.mamba_heads());
  }
  EXPECT_EQ(p.num_experts, m.num_experts);
  EXPECT_EQ(p.moe_router_topk, m.moe_router_topk);
  EXPECT_EQ(p.expert_ffn_hidden_size(), m.expert_ffn_hidden_size());
  EXPECT_EQ(p.moe_layer_freq, m.moe_layer_freq);
  EXPECT_EQ(p.moe_layer_pattern, m.moe_layer_pattern);
  EXPECT_EQ(p.DecoderLayers(), m.DecoderLayers());
  EXPECT_EQ(p.MtpDepthLayers(), m.MtpDepthLayers());
  EXPECT_EQ(p.moe_shared_expert_intermediate_size,
            m.moe_shared_expert_intermediate_size);
  EXPECT_EQ(p.moe_latent_size, m.moe_latent_size);
  EXPECT_EQ(p.moe_router_score_function, m.moe_router_score_function);
  EXPECT_EQ(p.moe_router_pre_softmax, m.moe_router_pre_softmax);
  EXPECT_EQ(p.moe_router_num_groups, m.moe_router_num_groups);
  EXPECT_EQ(p.moe_router_group_topk, m.moe_router_group_topk);
  EXPECT_EQ(p.moe_router_enable_expert_bias, m.moe_router_enable_expert_bias);
  EXPECT_EQ(p.moe_expert_capacity_factor, m.moe_expert_capacity_factor);
  EXPECT_EQ(p.moe_pad_expert_input_to_capacity,
            m.moe_pad_expert_input_to_capacity);
  EXPECT_EQ(p.moe_token_dispatcher_type, m.moe_token_dispatcher_type);
  EXPECT_EQ(p.moe_grouped_gemm, m.moe_grouped_gemm);
  ModelSpec with_vocab = p;  // Megatron takes the vocabulary from the tokenizer
  with_vocab.vocab_size = m.vocab_size;
  with_vocab.name = m.name;  // and the arguments carry no name
  EXPECT_TRUE(with_vocab.Validate().ok()) << with_vocab.Validate().message();
}

struct Problem {
  const char* model;
  const char* gpu;
  const char* gpus;
  const char* precision;
  // Pins that keep the search under a few seconds ("" = the tune default).
  const char* tp = "";
  const char* pp = "";
  // tune search --overlap-moe-expert-parallel-comm.
  bool moe_ep_overlap = false;
};

// The best plan of `tune search` for the problem, with its inputs and
// whether its calibration assumes flash attention.
struct BestPlan {
  Inputs in;
  costmodel::Estimate best;
  bool flash_attention = true;
  double search_s = 0;
};

BestPlan Search(const Problem& problem) {
  BestPlan plan;
  InputFlags flags;
  flags.model = problem.model;
  flags.gpu = problem.gpu;
  flags.gpus = problem.gpus;
  flags.precision = problem.precision;
  flags.tp = problem.tp;
  flags.pp = problem.pp;
  flags.moe_ep_overlap = problem.moe_ep_overlap;
  auto in = ResolveInputs(flags);
  EXPECT_TRUE(in.ok()) << in.status().message();
  if (!in.ok()) return plan;
  plan.in = std::move(in).value();
  // No results database: the datasheet calibration, as `tune search --no-db`.
  auto calibration = ChooseCalibration(nullptr, plan.in.cluster);
  EXPECT_TRUE(calibration.ok()) << calibration.status().message();
  if (!calibration.ok()) return plan;
  plan.flash_attention = calibration.value()->UsesFlashAttention();
  const auto start = std::chrono::steady_clock::now();
  const SearchResult result =
      RunSearch(plan.in.model, plan.in.cluster, plan.in.training, plan.in.space,
                *calibration.value());
  plan.search_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_FALSE(result.ranked.empty())
      << problem.model << ": " << FormatRejections(result);
  if (!result.ranked.empty()) plan.best = result.ranked.front();
  return plan;
}

void ExpectRoundTrip(const Problem& problem) {
  SCOPED_TRACE(std::string(problem.model) + " on " + problem.gpus + " " +
               problem.gpu + " " + problem.precision);
  const BestPlan plan = Search(problem);
  ASSERT_TRUE(plan.best.fits);
  const search_spaces::ParallelConfig& c = plan.best.config;
  const ModelSpec& m = plan.in.model;
  const std::string text = FormatMegatronArgs(
      MegatronArgs(m, plan.in.training, c, plan.flash_attention));
  SCOPED_TRACE(search_spaces::ToString(c) + "\n" + text);
  std::printf("%s: best %s (search %.2f s)\n", problem.model,
              search_spaces::ToString(c).c_str(), plan.search_s);

  auto parsed = ParseMegatronArgs(text, plan.in.training.num_gpus);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ExpectSameModel(parsed->model, m);
  EXPECT_EQ(parsed->config, c) << search_spaces::ToString(parsed->config);
  // operator== compares expert_tp(); the layout fields and dp too.
  EXPECT_EQ(parsed->config.expert_tp(), c.expert_tp());
  EXPECT_EQ(parsed->config.dp, c.dp);
  EXPECT_EQ(parsed->training.precision, plan.in.training.precision);
  EXPECT_EQ(parsed->training.global_batch_size,
            plan.in.training.global_batch_size);
  EXPECT_EQ(parsed->training.seq_length, plan.in.training.seq_length);
  EXPECT_EQ(parsed->training.num_gpus, plan.in.training.num_gpus);
  const bool ep_overlap =
      plan.in.training.moe_ep_overlap && m.is_moe() && c.ep > 1;
  EXPECT_EQ(parsed->training.moe_ep_overlap, ep_overlap);
  EXPECT_EQ(parsed->attention_backend,
            AttentionBackend(m, plan.flash_attention));
  EXPECT_TRUE(parsed->ignored.empty());
  EXPECT_TRUE(parsed->notes.empty());

  // The NeMo block of the same plan reads back to the same configuration
  // and MoE run choices.
  auto nemo =
      NemoOverrides(m, plan.in.training, c, plan.in.cluster.gpus_per_node,
                    plan.flash_attention);
  ASSERT_TRUE(nemo.ok()) << nemo.status().message();
  auto back = ParseNemoOverrides(nemo.value(), "nemo", &m);
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << nemo.value();
  EXPECT_EQ(back->config, c) << nemo.value();
  EXPECT_EQ(back->training.num_gpus, plan.in.training.num_gpus);
  EXPECT_EQ(back->training.moe_ep_overlap, ep_overlap);
  EXPECT_EQ(back->attention_backend, AttentionBackend(m, plan.flash_attention));
  if (m.is_moe()) {
    EXPECT_EQ(back->moe_token_dispatcher_type, m.moe_token_dispatcher_type);
    EXPECT_EQ(back->moe_grouped_gemm, m.moe_grouped_gemm);
    EXPECT_EQ(back->moe_expert_capacity_factor, m.moe_expert_capacity_factor);
  }
}

// With the EP overlap, as NVIDIA's H100 DeepSeek-V3 recipes ran it: the
// best plan meets its preconditions and exports
// --overlap-moe-expert-parallel-comm --delay-wgrad-compute.
TEST(MegatronArgsRoundTrip, DeepSeekV3On1024H100Fp8) {
  Problem p{"deepseek-v3", "h100", "1024", "fp8"};
  p.moe_ep_overlap = true;
  ExpectRoundTrip(p);
}

// The full Qwen3 search took 4.5 s here (94 layers, every tp): tp 1 and 2,
// which hold its best plan (tp1 pp8 vpp4 cp4 ep8), keep it near one second.
TEST(MegatronArgsRoundTrip, Qwen3_235bOn256H100) {
  ExpectRoundTrip({"qwen3-235b-a22b", "h100", "256", "bf16", "1,2"});
}

TEST(MegatronArgsRoundTrip, GptOss120bOn64H100) {
  ExpectRoundTrip({"gpt-oss-120b", "h100", "64", "bf16"});
}

TEST(MegatronArgsRoundTrip, Nemotron3SuperOn64B200) {
  ExpectRoundTrip({"nemotron3-super", "b200", "64", "bf16"});
}

}  // namespace
}  // namespace meshtune::tuner
