// ModelSpec: the architecture of a decoder-only transformer, in Megatron-LM's
// vocabulary (argument names with underscores, docs/design.md §2).
//
// Covers GPT (LayerNorm, GELU, learned positions, tied embeddings) and
// LLaMA-style models (RMSNorm, SwiGLU, RoPE, GQA, untied embeddings), dense and
// MoE, and the 2025-26 architectures: fine-grained MoE with shared and latent
// experts (DeepSeek-V3, Qwen3, GPT-OSS, Kimi-K2, Nemotron 3), multi-latent
// attention (MLA), multi-token prediction (MTP) and hybrid Mamba-2 models
// (Nemotron-H, Nemotron 3). Field names are Megatron-LM's argument names
// (docs/sources.md §2). A ModelSpec is a plain value;
// Validate() checks its internal consistency (sizes positive, heads divide
// hidden, the pattern's length matches num_layers, ...).
//
// Layers. Megatron counts a "layer" differently per model family, and so do
// we (DecoderLayers()):
//   GPT models: layer i = self-attention (GQA or MLA) + an MLP that is MoE
//     iff moe_layer_pattern[i] (or i % moe_layer_freq == 0 without a list).
//   Hybrid models (hybrid_layer_pattern set): every pattern symbol is one
//     layer with one block: M = Mamba-2 mixer, * = self-attention, - = dense
//     MLP, E = MoE MLP; '|' separates pipeline segments, '/' starts one MTP
//     depth (megatron/core/models/hybrid/hybrid_layer_allocation.py).
#ifndef MESHTUNE_SEARCH_SPACES_MODEL_SPEC_H_
#define MESHTUNE_SEARCH_SPACES_MODEL_SPEC_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "search_spaces/status.h"

namespace meshtune::search_spaces {

enum class Normalization { kLayerNorm, kRMSNorm };
// kSquaredRelu: Nemotron-H / Nemotron 3 (not gated). kQuickGeglu: GPT-OSS's
// clamped gated quick-GELU with +1 on the linear half (Megatron
// --quick-geglu --glu-linear-offset 1.0 --activation-func-clamp-value 7.0);
// gated like SwiGLU.
enum class Activation { kGelu, kSwiglu, kSquaredRelu, kQuickGeglu };
enum class PositionEmbedding { kLearnedAbsolute, kRope, kNone };
// Megatron --moe-router-score-function.
enum class RouterScore { kSoftmax, kSigmoid, kSqrtSoftplus };
// Megatron --moe-token-dispatcher-type.
enum class TokenDispatcher { kAllgather, kAlltoall, kFlex };

// What one layer holds (see "Layers" above). A GPT layer has a mixer and an
// MLP; a hybrid layer has exactly one of the two.
enum class Mixer { kNone, kAttention, kMla, kMamba };
enum class Mlp { kNone, kDense, kMoe };
struct LayerKind {
  Mixer mixer = Mixer::kAttention;
  Mlp mlp = Mlp::kDense;
  bool operator==(const LayerKind& o) const {
    return mixer == o.mixer && mlp == o.mlp;
  }
  bool operator!=(const LayerKind& o) const { return !(*this == o); }
};

// Megatron --tokenizer-type values a model file may name
// (megatron/training/tokenizer/tokenizer.py build_tokenizer).
inline constexpr const char* kTokenizerTypes[] = {"GPT2BPETokenizer",
                                                  "HuggingFaceTokenizer",
                                                  "GPTSentencePieceTokenizer",
                                                  "SentencePieceTokenizer",
                                                  "Llama2Tokenizer",
                                                  "TikTokenizer",
                                                  "NullTokenizer"};

struct ModelSpec {
  // Identity. `name` is the canonical preset name ("gpt3-175b"); aliases are
  // extra names it answers to ("175b", "gpt3"). display_name is for reports.
  std::string name;
  std::string display_name;
  std::vector<std::string> aliases;

  // Megatron architecture keys.
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  int64_t num_attention_heads = 0;
  int64_t num_query_groups = 0;  // = num_attention_heads for MHA
  int64_t kv_channels = 0;       // head dim; hidden_size / heads when 0 in YAML
  int64_t ffn_hidden_size = 0;
  int64_t vocab_size = 0;  // as given; padding is applied by the cost model
  int64_t seq_length = 0;  // default sequence length of the recipe
  Normalization normalization = Normalization::kLayerNorm;
  Activation activation = Activation::kGelu;
  PositionEmbedding position_embedding_type =
      PositionEmbedding::kLearnedAbsolute;
  bool untie_embeddings_and_output_weights = false;

  // MoE (num_experts == 0 means dense).
  int64_t num_experts = 0;
  int64_t moe_router_topk = 0;
  int64_t moe_ffn_hidden_size = 0;  // expert FFN size; ffn_hidden_size if 0
  int64_t moe_layer_freq = 1;       // layer i is MoE iff i % freq == 0
  // Megatron's list form of --moe-layer-freq ("([0]*3+[1]*58)"), expanded:
  // one 0/1 entry per decoder layer. Empty = use the integer moe_layer_freq.
  std::vector<uint8_t> moe_layer_pattern;
  // Total width of all shared experts (count x per-expert size); 0 = none.
  int64_t moe_shared_expert_intermediate_size = 0;
  // Latent MoE (Nemotron 3 Super/Ultra): routed experts work at this width,
  // with an h -> latent projection before dispatch and back after combine;
  // 0 = experts at hidden_size.
  int64_t moe_latent_size = 0;
  RouterScore moe_router_score_function = RouterScore::kSoftmax;
  bool moe_router_pre_softmax = false;
  // Group-limited routing (DeepSeek-V3: 8 groups, top 4); 0 = off.
  int64_t moe_router_num_groups = 0;
  int64_t moe_router_group_topk = 0;
  // Aux-loss-free balancing with a per-expert router bias.
  bool moe_router_enable_expert_bias = false;
  // Megatron --moe-router-force-load-balancing: the router assigns tokens
  // round-robin so every expert gets exactly k·T/E (NVIDIA's MoE benchmark
  // tables run this way); off, the busiest expert gets more
  // (costmodel::MoeLoadImbalance).
  bool moe_router_force_load_balancing = false;
  // Token dropping: per-expert capacity = ceil(T·k/E · factor); 0 = dropless.
  double moe_expert_capacity_factor = 0;
  bool moe_pad_expert_input_to_capacity = false;
  // Megatron's default dispatcher is allgather; every NVIDIA MoE recipe uses
  // alltoall (or flex), so that is ours, and exports always write the flag.
  TokenDispatcher moe_token_dispatcher_type = TokenDispatcher::kAlltoall;
  bool moe_grouped_gemm = true;
  // Megatron --use-transformer-engine-op-fuser (TransformerConfig
  // use_transformer_engine_op_fuser): with MXFP8 on Blackwell, grouped
  // GEMMs and NVTE_CUTEDSL_FUSED_GROUPED_MLP=1, the expert MLP (FC1, the
  // GLU, FC2) runs as Transformer Engine's CuTeDSL fused grouped MLP
  // instead of GroupedLinear's per-expert GEMMs. Exports add
  // --moe-mlp-glu-interleave-size 32 (the fused kernel's weight layout) for
  // gated experts. NVIDIA's 26.06+ MXFP8 MoE recipes set it
  // (cutedsl_fused_grouped_mlp).
  bool use_transformer_engine_op_fuser = false;

  // Linear-layer biases (Megatron add_bias_linear; --disable-bias-linear
  // turns them off). Unset: GPT-style models (LayerNorm) have them,
  // LLaMA-style ones (RMSNorm) do not. GPT-OSS has RMSNorm and biases, so
  // Megatron requires expert_tensor_parallel_size 1 for it.
  std::optional<bool> add_bias_linear;
  bool qk_layernorm = false;
  double rotary_base = 10000;  // --rotary-base (RoPE models)

  // Sliding-window attention: left window in tokens (Megatron --window-size
  // L,0; -1 = full attention everywhere). With window_attn_skip_freq N > 0,
  // layers whose 1-based number is a multiple of N use full attention
  // (GPT-OSS: 128 and 2).
  int64_t window_size = -1;
  int64_t window_attn_skip_freq = 0;

  // Multi-latent attention (DeepSeek-V2/V3, Kimi-K2). q_lora_rank 0 = a full
  // query projection (DeepSeek-V2-Lite).
  bool multi_latent_attention = false;
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_head_dim = 0;          // non-RoPE part of the q/k head
  int64_t qk_pos_emb_head_dim = 0;  // RoPE part (k part shared by heads)
  int64_t v_head_dim = 0;

  // Multi-token prediction depths (DeepSeek-V3: 1). Each depth is one more
  // layer of the last decoder layer's kind (hybrid: the pattern after '/'),
  // plus its norms, a 2h -> h projection and one more output-layer GEMM.
  int64_t mtp_num_layers = 0;
  // Megatron --mtp-use-repeated-layer: every depth runs one shared block
  // (Nemotron 3 Super's two depths of one *E block), so the weights are one
  // depth's while each depth still computes and keeps its activations.
  bool mtp_use_repeated_layer = false;

  // Hybrid models: Megatron --hybrid-layer-pattern as written (symbols
  // M * - E, '|' segments, '/' MTP depths). Empty = a GPT model.
  std::string hybrid_layer_pattern;
  // Mamba-2 sizes (Megatron defaults; num_heads 0 = 2·hidden / head_dim).
  int64_t mamba_state_dim = 128;
  int64_t mamba_head_dim = 64;
  int64_t mamba_num_groups = 8;
  int64_t mamba_num_heads = 0;
  int64_t mamba_conv_kernel = 4;  // --mamba-d-conv

  // Training defaults of the recipe (overridable from the command line).
  int64_t global_batch_size = 0;

  // The published model's tokenizer as Megatron's --tokenizer-type (one of
  // kTokenizerTypes) and --tokenizer-model (a Hugging Face id or a file;
  // empty = none published). Launch scripts pass them, so the model trained
  // has the vocabulary the plan was costed with. Empty type = unknown: the
  // scripts then require $TOKENIZER_TYPE.
  std::string tokenizer_type;
  std::string tokenizer_model;

  // The parallel layout NVIDIA publishes for this model (its NeMo /
  // Megatron-Bridge recipe or performance table), which `tune explain`
  // compares the best plan with: a configuration string as `tune compare`
  // reads it ("tp8 pp4 mbs1 sp dist-opt"; tuner/inputs/compare_config.h),
  // the batch and sequence it was published with (0 = the model's), and the
  // source. Empty config = none published.
  std::string recipe_config;
  int64_t recipe_global_batch_size = 0;
  int64_t recipe_seq_length = 0;
  std::string recipe_source;

  // The recipe's learning-rate schedule (Megatron --lr, --min-lr,
  // --lr-warmup-iters) where the model's authors publish it; 0 = not
  // published: tuner/interop/training_run.h derives one from the model size.
  double lr = 0;
  double min_lr = 0;
  int64_t lr_warmup_iters = 0;

  // Published parameter count in billions, for reports and tests (0 = unknown).
  double published_params_b = 0.0;

  bool is_moe() const { return num_experts > 0; }
  bool is_hybrid() const { return !hybrid_layer_pattern.empty(); }
  bool has_linear_biases() const {
    return add_bias_linear.value_or(normalization == Normalization::kLayerNorm);
  }
  // Activations with two up-projections (gate and up).
  bool gated_mlp() const {
    return activation == Activation::kSwiglu ||
           activation == Activation::kQuickGeglu;
  }
  // What each of the num_layers decoder layers holds (see "Layers" above),
  // and what one MTP depth holds (empty without MTP). Only meaningful on a
  // spec that passed Validate().
  std::vector<LayerKind> DecoderLayers() const;
  std::vector<LayerKind> MtpDepthLayers() const;
  // True when decoder layer i has an MoE MLP.
  bool IsMoeLayer(int64_t i) const;
  // Number of decoder layers with an MoE MLP.
  int64_t num_moe_layers() const;
  int64_t num_dense_layers() const { return num_layers - num_moe_layers(); }
  // Mamba-2 heads (mamba_num_heads, or 2·hidden / head_dim when 0).
  int64_t mamba_heads() const {
    return mamba_num_heads > 0
               ? mamba_num_heads
               : 2 * hidden_size / std::max<int64_t>(1, mamba_head_dim);
  }
  // Whether decoder layer `layer_number` (1-based, Megatron's numbering;
  // MTP layers numbered after the decoder's) attends over the sliding
  // window: window_size >= 0 and, with window_attn_skip_freq N > 0, a
  // number that is not a multiple of N
  // (megatron/core/transformer/utils.py is_layer_window_attention). The
  // one home of the rule: the training FLOPs, the serving KV cache and
  // attention use it.
  bool IsWindowLayer(int64_t layer_number) const {
    return window_size >= 0 && (window_attn_skip_freq <= 0 ||
                                layer_number % window_attn_skip_freq != 0);
  }
  // The MTP depths with weights of their own: one for a repeated layer.
  int64_t mtp_weight_depths() const {
    return mtp_use_repeated_layer ? std::min<int64_t>(1, mtp_num_layers)
                                  : mtp_num_layers;
  }
  // Query/key head width with MLA (qk_head_dim + qk_pos_emb_head_dim).
  int64_t mla_qk_head_dim() const { return qk_head_dim + qk_pos_emb_head_dim; }
  // Query projection width a·d_h (usually == hidden_size).
  int64_t query_projection_size() const {
    return num_attention_heads * kv_channels;
  }
  int64_t expert_ffn_hidden_size() const {
    return moe_ffn_hidden_size > 0 ? moe_ffn_hidden_size : ffn_hidden_size;
  }

  // Checks sizes and divisibility. `where` prefixes messages ("file.yaml:3").
  Status Validate(const std::string& where = "") const;
};

const char* ToString(Normalization n);
const char* ToString(Activation a);
const char* ToString(PositionEmbedding p);
const char* ToString(RouterScore r);
const char* ToString(TokenDispatcher d);

// Megatron's list expression for --moe-layer-freq: digits, ',', '[', ']',
// '(', ')', '+' and '*' ("([0]*3+[1]*58)", "[0,1]*24", "[1,1,0]"), expanded
// to one 0/1 entry per layer. Errors name the expression and the position.
StatusOr<std::vector<uint8_t>> ParseMoeLayerFreq(const std::string& expr);
// The shortest run-length expression of `pattern` ("([0]*3+[1]*58)"), which
// ParseMoeLayerFreq reads back.
std::string FormatMoeLayerFreq(const std::vector<uint8_t>& pattern);

// A hybrid pattern split into its parts: the decoder symbols without '|'
// (one per layer), the number of '|'-separated segments, and the MTP
// pattern of one depth with the number of depths ("M*E/*E/*E" -> "*E", 2).
struct HybridPattern {
  std::string layers;
  int64_t segments = 1;
  std::string mtp_depth;
  int64_t mtp_depths = 0;
};
// Errors name the bad symbol and its position; MTP depths must repeat one
// pattern.
StatusOr<HybridPattern> ParseHybridPattern(const std::string& pattern);

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_MODEL_SPEC_H_
