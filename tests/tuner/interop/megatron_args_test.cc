// The Megatron-LM argument list for GPT-style, LLaMA-style (GQA) and MoE
// models, checked flag by flag against megatron/training/arguments.py names.
#include "tuner/interop/megatron_args.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace meshtune::tuner {
namespace {

using search_spaces::ModelSpec;
using search_spaces::ParallelConfig;
using search_spaces::Precision;
using search_spaces::RecomputeGranularity;
using search_spaces::RecomputeMethod;
using search_spaces::TrainingSpec;

bool Has(const std::vector<std::string>& args, const std::string& a) {
  return std::find(args.begin(), args.end(), a) != args.end();
}

ModelSpec Gpt175b() {
  ModelSpec m;
  m.name = "gpt3-175b";
  m.num_layers = 96;
  m.hidden_size = 12288;
  m.num_attention_heads = 96;
  m.num_query_groups = 96;
  m.kv_channels = 128;
  m.ffn_hidden_size = 49152;
  m.vocab_size = 50257;
  m.seq_length = 2048;
  return m;
}

ModelSpec Llama70b() {
  ModelSpec m;
  m.name = "llama3-70b";
  m.num_layers = 80;
  m.hidden_size = 8192;
  m.num_attention_heads = 64;
  m.num_query_groups = 8;
  m.kv_channels = 128;
  m.ffn_hidden_size = 28672;
  m.vocab_size = 128256;
  m.seq_length = 8192;
  m.normalization = search_spaces::Normalization::kRMSNorm;
  m.activation = search_spaces::Activation::kSwiglu;
  m.position_embedding_type = search_spaces::PositionEmbedding::kRope;
  m.untie_embeddings_and_output_weights = true;
  return m;
}

TEST(MegatronArgs, Gpt3WithInterleavingAndSelectiveRecompute) {
  TrainingSpec t;
  t.global_batch_size = 1536;
  t.seq_length = 2048;
  ParallelConfig c;
  c.tp = 8;
  c.pp = 8;
  c.vpp = 3;
  c.dp = 16;
  c.sp = true;
  c.recompute.granularity = RecomputeGranularity::kSelective;
  const auto a = MegatronArgs(Gpt175b(), t, c);
  EXPECT_TRUE(Has(a, "--num-layers 96"));
  EXPECT_TRUE(Has(a, "--hidden-size 12288"));
  EXPECT_TRUE(Has(a, "--num-attention-heads 96"));
  EXPECT_FALSE(Has(a, "--group-query-attention"));
  EXPECT_TRUE(Has(a, "--ffn-hidden-size 49152"));
  EXPECT_TRUE(Has(a, "--seq-length 2048"));
  EXPECT_TRUE(Has(a, "--max-position-embeddings 2048"));
  EXPECT_TRUE(Has(a, "--tensor-model-parallel-size 8"));
  EXPECT_TRUE(Has(a, "--pipeline-model-parallel-size 8"));
  EXPECT_TRUE(Has(a, "--num-layers-per-virtual-pipeline-stage 4"));  // 96/(8·3)
  EXPECT_TRUE(Has(a, "--context-parallel-size 1"));
  EXPECT_TRUE(Has(a, "--sequence-parallel"));
  EXPECT_FALSE(Has(a, "--use-distributed-optimizer"));
  EXPECT_TRUE(Has(a, "--overlap-grad-reduce"));
  EXPECT_FALSE(Has(a, "--overlap-param-gather"));  // needs dist opt
  EXPECT_TRUE(Has(a, "--recompute-granularity selective"));
  EXPECT_FALSE(Has(a, "--recompute-method uniform"));
  EXPECT_TRUE(Has(a, "--micro-batch-size 1"));
  EXPECT_TRUE(Has(a, "--global-batch-size 1536"));
  EXPECT_TRUE(Has(a, "--bf16"));
  EXPECT_FALSE(Has(a, "--swiglu"));
  EXPECT_FALSE(Has(a, "--expert-model-parallel-size 1"));  // dense model
}

TEST(MegatronArgs, LlamaGqaFullRecomputeFp8) {
  TrainingSpec t;
  t.global_batch_size = 1024;
  t.seq_length = 8192;
  t.precision = Precision::kFp8;
  ParallelConfig c;
  c.tp = 8;
  c.pp = 4;
  c.dp = 2;
  c.dist_opt = true;
  c.recompute.granularity = RecomputeGranularity::kFull;
  c.recompute.method = RecomputeMethod::kBlock;
  c.recompute.num_layers = 5;
  const auto a = MegatronArgs(Llama70b(), t, c);
  EXPECT_TRUE(Has(a, "--group-query-attention"));
  EXPECT_TRUE(Has(a, "--num-query-groups 8"));
  EXPECT_TRUE(Has(a, "--normalization RMSNorm"));
  EXPECT_TRUE(Has(a, "--swiglu"));
  EXPECT_TRUE(Has(a, "--position-embedding-type rope"));
  EXPECT_TRUE(Has(a, "--untie-embeddings-and-output-weights"));
  EXPECT_FALSE(Has(a, "--num-layers-per-virtual-pipeline-stage 20"));
  EXPECT_TRUE(Has(a, "--use-distributed-optimizer"));
  EXPECT_TRUE(Has(a, "--overlap-param-gather"));
  EXPECT_TRUE(Has(a, "--recompute-granularity full"));
  EXPECT_TRUE(Has(a, "--recompute-method block"));
  EXPECT_TRUE(Has(a, "--recompute-num-layers 5"));
  EXPECT_TRUE(Has(a, "--bf16"));
  EXPECT_TRUE(Has(a, "--fp8-format hybrid"));
  EXPECT_FALSE(Has(a, "--sequence-parallel"));
  EXPECT_FALSE(Has(a, "--fp8-param-gather"));
  EXPECT_FALSE(Has(a, "--grad-reduce-in-bf16"));

  EXPECT_FALSE(Has(a, "--fp8-dot-product-attention"));
  t.fp8_param_gather = true;
  t.grad_reduce_in_bf16 = true;
  t.fp8_dot_product_attention = true;
  const auto b = MegatronArgs(Llama70b(), t, c);
  EXPECT_TRUE(Has(b, "--fp8-param-gather"));
  EXPECT_TRUE(Has(b, "--fp8-dot-product-attention"));
  EXPECT_TRUE(Has(b, "--grad-reduce-in-bf16"));
  EXPECT_FALSE(Has(b, "--tp-comm-overlap"));  // not asked for
  t.tp_comm_overlap = true;
  EXPECT_FALSE(Has(MegatronArgs(Llama70b(), t, c), "--tp-comm-overlap"))
      << "Megatron needs --sequence-parallel for it";
  c.sp = true;
  EXPECT_TRUE(Has(MegatronArgs(Llama70b(), t, c), "--tp-comm-overlap"));
}

TEST(MegatronArgs, MoeFlags) {
  ModelSpec m = Llama70b();
  m.num_experts = 8;
  m.moe_router_topk = 2;
  m.moe_ffn_hidden_size = 14336;
  TrainingSpec t;
  t.global_batch_size = 256;
  t.seq_length = 4096;
  t.precision = Precision::kFp16;
  ParallelConfig c;
  c.tp = 2;
  c.ep = 4;
  c.dp = 8;
  const auto a = MegatronArgs(m, t, c);
  EXPECT_TRUE(Has(a, "--expert-model-parallel-size 4"));
  EXPECT_TRUE(Has(a, "--num-experts 8"));
  EXPECT_TRUE(Has(a, "--moe-router-topk 2"));
  EXPECT_TRUE(Has(a, "--moe-ffn-hidden-size 14336"));
  EXPECT_TRUE(Has(a, "--fp16"));
  EXPECT_FALSE(Has(a, "--bf16"));
  EXPECT_TRUE(Has(a, "--max-position-embeddings 8192"));
}

TEST(FormatMegatronArgs, TrailingBackslashesExceptLast) {
  EXPECT_EQ(FormatMegatronArgs({"--a 1", "--b", "--c 3"}),
            "--a 1 \\\n--b \\\n--c 3\n");
}

}  // namespace
}  // namespace meshtune::tuner

namespace meshtune::tuner {
namespace {

TEST(MegatronArgs, UnevenLayersCountEmbeddingAndLoss) {
  ModelSpec m = Llama70b();
  m.num_layers = 126;  // LLaMA-3 405B depth
  TrainingSpec t;
  t.global_batch_size = 2048;
  t.seq_length = 8192;
  ParallelConfig c;
  c.tp = 8;
  c.pp = 16;
  c.vpp = 2;
  c.dp = 16;
  const auto a = MegatronArgs(m, t, c);
  EXPECT_TRUE(Has(a, "--account-for-embedding-in-pipeline-split"));
  EXPECT_TRUE(Has(a, "--account-for-loss-in-pipeline-split"));
  EXPECT_TRUE(Has(a, "--virtual-pipeline-model-parallel-size 2"));
  c.pp = 2;  // 126 = 2 x 63: even
  c.vpp = 1;
  const auto b = MegatronArgs(m, t, c);
  EXPECT_FALSE(Has(b, "--account-for-embedding-in-pipeline-split"));
}

}  // namespace
}  // namespace meshtune::tuner

namespace meshtune::tuner {
namespace {

// DeepSeek-V3's published architecture (docs/sources.md §1.2, §1.3): every
// 2025-26 flag has its value from the spec.
TEST(MegatronArgs, MlaMoeMtpFlagsComeFromTheSpec) {
  ModelSpec m = Llama70b();
  m.num_layers = 61;
  m.hidden_size = 7168;
  m.num_attention_heads = 128;
  m.num_query_groups = 128;
  m.kv_channels = 128;
  m.multi_latent_attention = true;
  m.q_lora_rank = 1536;
  m.kv_lora_rank = 512;
  m.qk_head_dim = 128;
  m.qk_pos_emb_head_dim = 64;
  m.v_head_dim = 128;
  m.qk_layernorm = true;
  m.add_bias_linear = false;
  m.mtp_num_layers = 1;
  m.num_experts = 256;
  m.moe_router_topk = 8;
  m.moe_ffn_hidden_size = 2048;
  m.moe_shared_expert_intermediate_size = 2048;
  m.moe_router_score_function = search_spaces::RouterScore::kSigmoid;
  m.moe_router_num_groups = 8;
  m.moe_router_group_topk = 4;
  m.moe_router_enable_expert_bias = true;
  m.moe_expert_capacity_factor = 1.25;
  m.moe_pad_expert_input_to_capacity = true;
  m.moe_token_dispatcher_type = search_spaces::TokenDispatcher::kFlex;
  TrainingSpec t;
  t.global_batch_size = 4096;
  t.seq_length = 4096;
  ParallelConfig c;
  c.ep = 8;
  c.etp = 1;
  const auto a = MegatronArgs(m, t, c);
  for (const char* flag :
       {"--multi-latent-attention", "--q-lora-rank 1536", "--kv-lora-rank 512",
        "--qk-head-dim 128", "--qk-pos-emb-head-dim 64", "--v-head-dim 128",
        "--qk-layernorm", "--disable-bias-linear", "--mtp-num-layers 1",
        "--rotary-base 10000", "--kv-channels 128",
        "--moe-shared-expert-intermediate-size 2048",
        "--moe-router-score-function sigmoid", "--moe-router-num-groups 8",
        "--moe-router-group-topk 4", "--moe-router-enable-expert-bias",
        "--moe-expert-capacity-factor 1.25",
        "--moe-pad-expert-input-to-capacity",
        "--moe-token-dispatcher-type flex", "--moe-grouped-gemm",
        "--expert-tensor-parallel-size 1",
        // q/k 192 wide, v 128: FlashAttention-2 cannot, cuDNN can.
        "--attention-backend fused"}) {
    EXPECT_TRUE(Has(a, flag)) << flag;
  }
  EXPECT_FALSE(Has(a, "--moe-latent-size 0"));
  m.q_lora_rank = 0;  // DeepSeek-V2-Lite: a full query projection
  m.moe_grouped_gemm = false;
  m.moe_expert_capacity_factor = 0;
  const auto b = MegatronArgs(m, t, c, /*flash_attention=*/false);
  EXPECT_FALSE(Has(b, "--q-lora-rank 0"));
  EXPECT_FALSE(Has(b, "--moe-grouped-gemm"));
  EXPECT_FALSE(Has(b, "--moe-pad-expert-input-to-capacity"));
  EXPECT_TRUE(Has(b, "--attention-backend unfused"));
}

// GPT-OSS: biases kept, a 127-token left window on odd layers, RoPE base
// 150000 (docs/sources.md §1.5).
TEST(MegatronArgs, WindowBiasesAndRopeBase) {
  ModelSpec m = Llama70b();
  m.add_bias_linear = true;
  m.window_size = 127;
  m.window_attn_skip_freq = 2;
  m.rotary_base = 150000;
  TrainingSpec t;
  t.global_batch_size = 512;
  t.seq_length = 4096;
  const auto a = MegatronArgs(m, t, ParallelConfig());
  EXPECT_TRUE(Has(a, "--window-size 127,0"));
  EXPECT_TRUE(Has(a, "--window-attn-skip-freq 2"));
  EXPECT_TRUE(Has(a, "--rotary-base 150000"));
  EXPECT_FALSE(Has(a, "--disable-bias-linear"));
  EXPECT_TRUE(Has(a, "--attention-backend flash"));
  // GPT-3: learned positions, no RoPE base; LayerNorm models have biases.
  const auto g = MegatronArgs(Gpt175b(), t, ParallelConfig());
  EXPECT_FALSE(Has(g, "--disable-bias-linear"));
  for (const std::string& arg : g) EXPECT_NE(arg.rfind("--rotary-base", 0), 0u);
}

TEST(MegatronArgs, HybridLatentMoeAndMtp) {
  ModelSpec m = Llama70b();
  m.hybrid_layer_pattern = "M*ME/*E";
  m.num_layers = 4;
  m.mtp_num_layers = 1;
  m.position_embedding_type = search_spaces::PositionEmbedding::kNone;
  m.num_experts = 512;
  m.moe_router_topk = 22;
  m.moe_latent_size = 1024;
  m.mamba_num_heads = 128;
  TrainingSpec t;
  t.global_batch_size = 64;
  t.seq_length = 8192;
  const auto a = MegatronArgs(m, t, ParallelConfig());
  EXPECT_TRUE(Has(a, "--hybrid-layer-pattern 'M*ME/*E'"));
  EXPECT_TRUE(Has(a, "--mamba-num-heads 128"));
  EXPECT_TRUE(Has(a, "--mtp-num-layers 1"));
  EXPECT_TRUE(Has(a, "--moe-latent-size 1024"));
  EXPECT_TRUE(Has(a, "--moe-router-score-function softmax"));
  EXPECT_TRUE(Has(a, "--position-embedding-type none"));
  for (const std::string& arg : a) EXPECT_NE(arg.rfind("--rotary-base", 0), 0u);
}

TEST(FormatMegatronNumber, ShortestTextThatReadsBack) {
  EXPECT_EQ(FormatMegatronNumber(10000), "10000");
  EXPECT_EQ(FormatMegatronNumber(1e6), "1000000");
  EXPECT_EQ(FormatMegatronNumber(1.25), "1.25");
  EXPECT_EQ(FormatMegatronNumber(0.1), "0.1");
  EXPECT_EQ(FormatMegatronNumber(1.0 / 3), "0.3333333333333333");
}

}  // namespace
}  // namespace meshtune::tuner
