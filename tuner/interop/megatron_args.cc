#include "tuner/interop/megatron_args.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "search_spaces/pipeline_layout.h"

namespace meshtune::tuner {
namespace {

// Megatron --fp8-recipe value of an FP8 precision.
const char* Fp8RecipeName(search_spaces::Precision p) {
  using search_spaces::Precision;
  switch (p) {
    case Precision::kFp8Tensorwise:
      return "tensorwise";
    case Precision::kFp8Blockwise:
      return "blockwise";
    case Precision::kMxfp8:
      return "mxfp8";
    default:
      return "delayed";
  }
}

using search_spaces::Activation;
using search_spaces::Normalization;
using search_spaces::PositionEmbedding;
using search_spaces::Precision;
using search_spaces::RecomputeGranularity;

std::string Arg(const std::string& flag, int64_t value) {
  return flag + " " + std::to_string(value);
}

}  // namespace

const char* AttentionBackend(const search_spaces::ModelSpec& m,
                             bool flash_attention) {
  if (!flash_attention) return "unfused";
  return m.multi_latent_attention && m.mla_qk_head_dim() != m.v_head_dim
             ? "fused"
             : "flash";
}

std::string FormatMegatronNumber(double value) {
  if (std::isfinite(value) && value == std::floor(value) &&
      std::fabs(value) < 1e15) {
    return std::to_string(static_cast<int64_t>(value));
  }
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  return buf;
}

std::vector<std::string> MegatronArgs(const search_spaces::ModelSpec& m,
                                      const search_spaces::TrainingSpec& t,
                                      const search_spaces::ParallelConfig& c,
                                      bool flash_attention) {
  std::vector<std::string> a;
  a.push_back(Arg("--num-layers", m.num_layers));
  a.push_back(Arg("--hidden-size", m.hidden_size));
  a.push_back(Arg("--num-attention-heads", m.num_attention_heads));
  if (m.num_query_groups > 0 && m.num_query_groups != m.num_attention_heads) {
    a.push_back("--group-query-attention");
    a.push_back(Arg("--num-query-groups", m.num_query_groups));
  }
  // Megatron derives kv_channels as hidden/heads; only say it when it differs.
  if (m.kv_channels > 0 &&
      m.kv_channels * m.num_attention_heads != m.hidden_size) {
    a.push_back(Arg("--kv-channels", m.kv_channels));
  }
  if (m.multi_latent_attention) {
    // Megatron's CLI defaults (kv_lora_rank 32, ...) are not DeepSeek's, so
    // every rank is written; q_lora_rank 0 = a full query projection, which
    // is the flag left out (docs/sources.md §1.3, §2.4).
    a.push_back("--multi-latent-attention");
    if (m.q_lora_rank > 0) a.push_back(Arg("--q-lora-rank", m.q_lora_rank));
    a.push_back(Arg("--kv-lora-rank", m.kv_lora_rank));
    a.push_back(Arg("--qk-head-dim", m.qk_head_dim));
    a.push_back(Arg("--qk-pos-emb-head-dim", m.qk_pos_emb_head_dim));
    a.push_back(Arg("--v-head-dim", m.v_head_dim));
  }
  if (m.qk_layernorm) a.push_back("--qk-layernorm");
  if (m.window_size >= 0) {
    // Megatron's (left, right) window; a causal decoder's right is 0.
    a.push_back("--window-size " + std::to_string(m.window_size) + ",0");
    if (m.window_attn_skip_freq > 0) {
      a.push_back(Arg("--window-attn-skip-freq", m.window_attn_skip_freq));
    }
  }
  a.push_back(Arg("--ffn-hidden-size", m.ffn_hidden_size));
  a.push_back(Arg("--seq-length", t.seq_length));
  a.push_back(
      Arg("--max-position-embeddings", std::max(t.seq_length, m.seq_length)));
  if (m.normalization == Normalization::kRMSNorm) {
    a.push_back("--normalization RMSNorm");
  }
  if (m.activation == Activation::kSwiglu) a.push_back("--swiglu");
  if (m.activation == Activation::kSquaredRelu) a.push_back("--squared-relu");
  if (m.activation == Activation::kQuickGeglu) {
    // GPT-OSS's clamped gated activation (docs/sources.md §1.5).
    a.push_back("--quick-geglu");
    a.push_back("--glu-linear-offset 1.0");
    a.push_back("--activation-func-clamp-value 7.0");
  }
  if (m.position_embedding_type == PositionEmbedding::kRope) {
    a.push_back("--position-embedding-type rope");
    a.push_back("--rotary-base " + FormatMegatronNumber(m.rotary_base));
  } else if (m.position_embedding_type == PositionEmbedding::kNone) {
    a.push_back("--position-embedding-type none");
  }
  if (m.is_hybrid()) {
    // Quoted: '*' and '|' are shell syntax.
    a.push_back("--is-hybrid-model");
    a.push_back("--hybrid-layer-pattern '" + m.hybrid_layer_pattern + "'");
    a.push_back(Arg("--mamba-state-dim", m.mamba_state_dim));
    a.push_back(Arg("--mamba-head-dim", m.mamba_head_dim));
    a.push_back(Arg("--mamba-num-groups", m.mamba_num_groups));
    if (m.mamba_num_heads > 0) {
      a.push_back(Arg("--mamba-num-heads", m.mamba_num_heads));
    }
  }
  if (m.untie_embeddings_and_output_weights) {
    a.push_back("--untie-embeddings-and-output-weights");
  }
  // Megatron's add_bias_linear defaults to true; the cost model counts
  // biases only where the model has them (model_spec.h has_linear_biases).
  if (!m.has_linear_biases()) a.push_back("--disable-bias-linear");
  if (m.mtp_num_layers > 0) {
    // Hybrid models also carry the depths in the pattern's '/' part;
    // NVIDIA's Nemotron 3 lines pass both (docs/sources.md §2.4).
    a.push_back(Arg("--mtp-num-layers", m.mtp_num_layers));
    if (m.mtp_use_repeated_layer) a.push_back("--mtp-use-repeated-layer");
  }

  // The core-attention kernel the calibration priced (megatron_args.h).
  a.push_back(std::string("--attention-backend ") +
              AttentionBackend(m, flash_attention));

  a.push_back(Arg("--tensor-model-parallel-size", c.tp));
  a.push_back(Arg("--pipeline-model-parallel-size", c.pp));
  const search_spaces::PipelineLayout layout(m.num_layers, c);
  if (layout.uneven()) {
    // The first/middle/last layout family (search_spaces/pipeline_layout.h)
    // as Megatron's layout string; quoted, since '|' and '*' are shell
    // syntax. It also sets the virtual stages.
    a.push_back("--pipeline-model-parallel-layout '" +
                layout.MegatronString(m.mtp_num_layers) + "'");
  } else if (search_spaces::PipelineLayout::AccountsEmbeddingAndLoss(
                 m.num_layers, c.pp, c.vpp)) {
    // num_layers + 2 units split evenly (search_spaces/pipeline_layout.h).
    a.push_back("--account-for-embedding-in-pipeline-split");
    a.push_back("--account-for-loss-in-pipeline-split");
    if (c.vpp > 1) {
      a.push_back(Arg("--virtual-pipeline-model-parallel-size", c.vpp));
    }
  } else if (c.vpp > 1) {
    a.push_back(Arg("--num-layers-per-virtual-pipeline-stage",
                    m.num_layers / (c.pp * c.vpp)));
  }
  a.push_back(Arg("--context-parallel-size", c.cp));
  if (m.is_moe()) {
    a.push_back(Arg("--expert-model-parallel-size", c.ep));
    a.push_back(Arg("--expert-tensor-parallel-size", c.expert_tp()));
    a.push_back(Arg("--num-experts", m.num_experts));
    a.push_back(Arg("--moe-router-topk", m.moe_router_topk));
    if (m.moe_ffn_hidden_size > 0) {
      a.push_back(Arg("--moe-ffn-hidden-size", m.moe_ffn_hidden_size));
    }
    if (!m.moe_layer_pattern.empty()) {
      a.push_back("--moe-layer-freq '" +
                  search_spaces::FormatMoeLayerFreq(m.moe_layer_pattern) + "'");
    } else if (m.moe_layer_freq != 1) {
      a.push_back(Arg("--moe-layer-freq", m.moe_layer_freq));
    }
    if (m.moe_shared_expert_intermediate_size > 0) {
      a.push_back(Arg("--moe-shared-expert-intermediate-size",
                      m.moe_shared_expert_intermediate_size));
    }
    if (m.moe_latent_size > 0) {
      a.push_back(Arg("--moe-latent-size", m.moe_latent_size));
    }
    a.push_back(std::string("--moe-router-score-function ") +
                search_spaces::ToString(m.moe_router_score_function));
    if (m.moe_router_pre_softmax) a.push_back("--moe-router-pre-softmax");
    if (m.moe_router_num_groups > 0) {
      a.push_back(Arg("--moe-router-num-groups", m.moe_router_num_groups));
      a.push_back(Arg("--moe-router-group-topk", m.moe_router_group_topk));
    }
    if (m.moe_router_enable_expert_bias) {
      a.push_back("--moe-router-enable-expert-bias");
    }
    if (m.moe_router_force_load_balancing) {
      a.push_back("--moe-router-force-load-balancing");
    }
    if (m.moe_expert_capacity_factor > 0) {
      // Token dropping; without the flag Megatron is dropless.
      a.push_back("--moe-expert-capacity-factor " +
                  FormatMegatronNumber(m.moe_expert_capacity_factor));
      if (m.moe_pad_expert_input_to_capacity) {
        a.push_back("--moe-pad-expert-input-to-capacity");
      }
    }
    // Megatron's default dispatcher is allgather; the plan's is always said.
    a.push_back(std::string("--moe-token-dispatcher-type ") +
                search_spaces::ToString(m.moe_token_dispatcher_type));
    if (m.moe_grouped_gemm) a.push_back("--moe-grouped-gemm");
  }
  if (m.use_transformer_engine_op_fuser) {
    a.push_back("--use-transformer-engine-op-fuser");
    // The fused grouped MLP reads the GLU's gate and up rows interleaved in
    // blocks of 32 (NVIDIA's recipes: moe_mlp_glu_interleave_size 32).
    if (m.is_moe() && m.gated_mlp()) {
      a.push_back("--moe-mlp-glu-interleave-size 32");
    }
  }
  if (c.sp) a.push_back("--sequence-parallel");
  if (c.dist_opt) a.push_back("--use-distributed-optimizer");
  // The cost model assumes Megatron's overlap of the DP gradient reduce with
  // backward and, with the distributed optimizer, of the parameter all-gather
  // with forward; these flags turn that overlap on.
  a.push_back("--overlap-grad-reduce");
  if (c.dist_opt) a.push_back("--overlap-param-gather");
  switch (c.recompute.granularity) {
    case RecomputeGranularity::kNone:
      break;
    case RecomputeGranularity::kSelective:
      a.push_back("--recompute-granularity selective");
      break;
    case RecomputeGranularity::kFull:
      a.push_back("--recompute-granularity full");
      a.push_back(std::string("--recompute-method ") +
                  search_spaces::ToString(c.recompute.method));
      a.push_back(Arg("--recompute-num-layers", c.recompute.num_layers));
      break;
  }
  a.push_back(Arg("--micro-batch-size", c.mbs));
  a.push_back(Arg("--global-batch-size", t.global_batch_size));
  switch (t.precision) {
    case Precision::kBf16:
      a.push_back("--bf16");
      break;
    case Precision::kFp16:
      a.push_back("--fp16");
      break;
    case Precision::kFp8:
    case Precision::kFp8Tensorwise:
    case Precision::kFp8Blockwise:
    case Precision::kMxfp8:
      // FP8 GEMMs run inside a bf16 model (Transformer Engine recipe);
      // "hybrid" = E4M3 forward, E5M2 gradients; blockwise and mxfp8 use
      // E4M3 in both passes.
      a.push_back("--bf16");
      a.push_back(t.precision == Precision::kFp8 ||
                          t.precision == Precision::kFp8Tensorwise
                      ? "--fp8-format hybrid"
                      : "--fp8-format e4m3");
      // delayed is Megatron's default recipe.
      if (t.precision != Precision::kFp8) {
        a.push_back(std::string("--fp8-recipe ") + Fp8RecipeName(t.precision));
      }
      break;
    case Precision::kNvfp4:
      a.push_back("--bf16");
      a.push_back("--fp4-format e2m1");
      a.push_back("--fp4-recipe nvfp4");
      break;
  }
  if (t.fp8_param_gather) a.push_back("--fp8-param-gather");
  if (t.fp8_dot_product_attention && search_spaces::IsFp8(t.precision)) {
    a.push_back("--fp8-dot-product-attention");
  }
  if (t.grad_reduce_in_bf16) a.push_back("--grad-reduce-in-bf16");
  if (t.megatron_fsdp) {
    a.push_back("--use-megatron-fsdp");
    a.push_back("--data-parallel-sharding-strategy optim_grads_params");
  }
  if (t.cpu_offloading_num_layers > 0) {
    a.push_back("--cpu-offloading");
    a.push_back(
        Arg("--cpu-offloading-num-layers", t.cpu_offloading_num_layers));
  }
  // Megatron requires sequence parallelism for --tp-comm-overlap.
  if (t.tp_comm_overlap && c.sp && c.tp > 1) a.push_back("--tp-comm-overlap");
  // The cost model's EP overlap is Megatron's combined 1F1B with the
  // delayed wgrad (what NVIDIA's recipes set together).
  if (t.moe_ep_overlap && m.is_moe() && c.ep > 1) {
    a.push_back("--overlap-moe-expert-parallel-comm");
    a.push_back("--delay-wgrad-compute");
  }
  if (t.cuda_graphs.enabled()) {
    a.push_back(std::string("--cuda-graph-impl ") +
                search_spaces::ToString(t.cuda_graphs.impl));
    if (t.cuda_graphs.scope != 0) {
      a.push_back("--cuda-graph-scope " +
                  search_spaces::CudaGraphScopeString(t.cuda_graphs.scope));
    }
  }
  return a;
}

std::string FormatMegatronArgs(const std::vector<std::string>& args) {
  std::string out;
  for (size_t i = 0; i < args.size(); ++i) {
    out += args[i];
    out += i + 1 < args.size() ? " \\\n" : "\n";
  }
  return out;
}

}  // namespace meshtune::tuner
