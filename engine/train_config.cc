#include "engine/train_config.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "search_spaces/pipeline_layout.h"

namespace meshtune::engine {
namespace {

std::string ShortFloat(float x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(x));
  return buf;
}

std::string Str(int64_t x) { return std::to_string(x); }

// Model features the engine does not build: refused before any rank starts,
// as Unimplemented (exit 1), naming the feature; a run without them would
// train another model than the one planned.
Status CheckModelFeatures(const search_spaces::ModelSpec& m) {
  auto no = [&](const std::string& what) {
    return Status::Unimplemented(
        "the training engine does not support " + what + " (" + m.name + ")",
        "train a model without it, or export the plan to Megatron-LM "
        "(tune export --format megatron)");
  };
  if (!m.hybrid_layer_pattern.empty()) return no("hybrid Mamba layers");
  if (m.multi_latent_attention) return no("multi-latent attention");
  if (m.mtp_num_layers > 0) return no("multi-token prediction");
  if (m.window_size >= 0) return no("sliding-window attention");
  if (m.qk_layernorm) return no("QK layernorm");
  if (!m.is_moe()) return Status::Ok();
  if (m.moe_latent_size > 0) return no("latent MoE");
  if (m.moe_router_score_function ==
      search_spaces::RouterScore::kSqrtSoftplus) {
    return no("the sqrtsoftplus router score");
  }
  if (m.moe_router_force_load_balancing) {
    return no("forced load balancing");
  }
  if (m.moe_pad_expert_input_to_capacity) {
    return no("padding expert inputs to capacity");
  }
  if (m.activation != search_spaces::Activation::kSwiglu ||
      m.add_bias_linear.value_or(false)) {
    return no("MoE layers with biases or GELU experts");
  }
  return Status::Ok();
}

// Expert parallelism (Megatron arguments.py and parallel_state.py rules).
Status ValidateExperts(const TrainConfig& c) {
  const auto& p = c.parallel;
  const auto& m = c.model;
  auto bad = [](const std::string& msg, const std::string& hint) {
    return Status::InvalidArgument(msg, hint);
  };
  const int64_t etp = p.expert_tp();
  if (p.ep < 1 || etp < 1) return bad("ep and etp must be >= 1", "");
  if (!m.is_moe()) {
    if (p.ep > 1 || etp != p.tp) {
      return bad("ep=" + Str(p.ep) + " etp=" + Str(etp) +
                     " need an MoE model (" + m.name + " is dense)",
                 "use --ep 1 and leave --etp unset");
    }
    return Status::Ok();
  }
  if (m.num_experts % p.ep != 0) {
    return bad("ep=" + Str(p.ep) + " does not divide num_experts (" +
                   Str(m.num_experts) + ")",
               "choose ep dividing the expert count");
  }
  if ((p.tp * p.cp * p.dp) % (etp * p.ep) != 0) {
    return bad("etp·ep = " + Str(etp * p.ep) +
                   " does not divide tp·cp·dp = " + Str(p.tp * p.cp * p.dp) +
                   " (the expert grid etp·ep·edp folds over the dense ranks)",
               "choose ep and etp whose product divides tp·cp·dp");
  }
  if (m.moe_router_topk < 1 || m.moe_router_topk > m.num_experts) {
    return bad("moe_router_topk " + Str(m.moe_router_topk) +
                   " must be in [1, num_experts = " + Str(m.num_experts) + "]",
               "");
  }
  if (m.expert_ffn_hidden_size() % etp != 0) {
    return bad("etp=" + Str(etp) + " does not divide the expert FFN size " +
                   Str(m.expert_ffn_hidden_size()),
               "");
  }
  if (m.moe_shared_expert_intermediate_size % p.tp != 0) {
    return bad("tp=" + Str(p.tp) + " does not divide the shared expert size " +
                   Str(m.moe_shared_expert_intermediate_size),
               "");
  }
  // Megatron arguments.py: "When using MoE and tensor parallelism, sequence
  // parallelism must be used."
  if (p.tp > 1 && !p.sp) {
    return bad("MoE with tensor parallelism (tp=" + Str(p.tp) +
                   ") needs sequence parallelism",
               "add --sp");
  }
  if (!(c.moe_aux_loss_coeff >= 0) || !std::isfinite(c.moe_aux_loss_coeff)) {
    return bad("moe_aux_loss_coeff must be a finite number >= 0",
               "use --moe-aux-loss-coeff 0.01, or 0 for none");
  }
  if (!(c.moe_router_bias_update_rate >= 0) ||
      !std::isfinite(c.moe_router_bias_update_rate)) {
    return bad("moe_router_bias_update_rate must be a finite number >= 0",
               "use --moe-router-bias-update-rate 1e-3 (Megatron's default)");
  }
  return Status::Ok();
}

}  // namespace

int64_t TrainConfig::padded_vocab_size() const {
  // Megatron _vocab_size_with_padding: round up to a multiple of
  // make_vocab_size_divisible_by · tp so every tp rank gets equal rows.
  const int64_t multiple = make_vocab_size_divisible_by * parallel.tp;
  return (model.vocab_size + multiple - 1) / multiple * multiple;
}

Status TrainConfig::Validate() const {
  const auto& p = parallel;
  const auto& m = model;
  auto bad = [](const std::string& msg, const std::string& hint) {
    return Status::InvalidArgument(msg, hint);
  };
  MESHTUNE_RETURN_IF_ERROR(CheckModelFeatures(m));
  if (p.tp < 1 || p.pp < 1 || p.dp < 1 || p.vpp < 1 || p.mbs < 1) {
    return bad("tp, pp, dp, vpp and mbs must be >= 1", "");
  }
  if (p.cp < 1) {
    return bad("cp must be >= 1 (got " + std::to_string(p.cp) + ")",
               "use --cp 1 (no context parallelism) or more");
  }
  if (train_iters < 1) {
    return bad("--steps must be >= 1 (got " + std::to_string(train_iters) + ")",
               "");
  }
  const int64_t s = seq();
  if (s < 1) return bad("seq_length must be >= 1", "");
  if (global_batch_size < 1 || global_batch_size % (p.mbs * p.dp) != 0) {
    return bad(
        "global batch size " + std::to_string(global_batch_size) +
            " is not a multiple of mbs·dp = " + std::to_string(p.mbs * p.dp),
        "pick --gbs as a multiple of " + std::to_string(p.mbs * p.dp));
  }
  // Megatron interleaves only across pipeline ranks (the schedule has no
  // warm-up with one rank, so a chunk's backward would come before its
  // forward); the enumerator rejects it as vpp_requires_pp.
  if (p.vpp > 1 && p.pp < 2) {
    return bad("virtual pipeline stages (vpp = " + std::to_string(p.vpp) +
                   ") need pp >= 2",
               "use --vpp 1, or --pp 2 or more");
  }
  // Even split, or Megatron's embedding/loss accounting (num_layers + 2
  // units), exactly as the tuner enumerates (search_spaces/pipeline_layout.h).
  if (!search_spaces::PipelineLayout::Valid(m.num_layers, p.pp, p.vpp)) {
    return bad(std::to_string(m.num_layers) +
                   " layers do not split over pp·vpp = " +
                   std::to_string(p.pp * p.vpp) +
                   " virtual stages (neither evenly nor with the embedding "
                   "and loss counted as layers)",
               "choose pp and vpp whose product divides num_layers");
  }
  if (p.vpp > 1 && num_microbatches() % p.pp != 0) {
    return bad("the interleaved schedule needs the number of micro-batches (" +
                   std::to_string(num_microbatches()) +
                   ") to be a multiple of pp (" + std::to_string(p.pp) + ")",
               "adjust --gbs or --mbs");
  }
  if (m.num_attention_heads % p.tp != 0 || m.num_query_groups % p.tp != 0) {
    return bad("tp=" + std::to_string(p.tp) +
                   " does not divide the attention heads (" +
                   std::to_string(m.num_attention_heads) +
                   ") and query groups (" + std::to_string(m.num_query_groups) +
                   ")",
               "choose tp dividing num_query_groups");
  }
  MESHTUNE_RETURN_IF_ERROR(ValidateExperts(*this));
  if (m.ffn_hidden_size % p.tp != 0) {
    return bad("tp=" + std::to_string(p.tp) +
                   " does not divide ffn_hidden_size " +
                   std::to_string(m.ffn_hidden_size),
               "");
  }
  if (p.sp && p.tp > 1 && s % p.tp != 0) {
    return bad("sequence parallelism needs seq_length (" + std::to_string(s) +
                   ") divisible by tp (" + std::to_string(p.tp) + ")",
               "");
  }
  // Context parallelism cuts the sequence into 2·cp equal chunks, two per
  // cp rank (engine/context_parallel/sequence_chunks.h); under SP each cp
  // rank's s/cp positions are further split over tp (Megatron's
  // get_batch_on_this_cp_rank, then the SP scatter).
  if (p.cp > 1) {
    const int64_t chunks = 2 * p.cp;
    const bool sp = p.sp && p.tp > 1;
    const int64_t multiple = sp ? chunks * p.tp : chunks;
    if (s % multiple != 0) {
      return bad("context parallelism needs seq_length (" + std::to_string(s) +
                     ") divisible by " +
                     (sp ? "2·cp·tp = " + std::to_string(multiple) +
                               " (2·cp chunks, each cp rank's split over tp by "
                               "sequence parallelism)"
                         : "2·cp = " + std::to_string(multiple) +
                               " (the sequence is cut into 2·cp chunks)"),
                 "use --seq-len a multiple of " + std::to_string(multiple) +
                     ", or another --cp");
    }
  }
  if (m.position_embedding_type ==
          search_spaces::PositionEmbedding::kLearnedAbsolute &&
      s > m.seq_length) {
    return bad("seq_length " + std::to_string(s) +
                   " exceeds the learned position table (" +
                   std::to_string(m.seq_length) + " positions)",
               "use --seq-len <= " + std::to_string(m.seq_length));
  }
  if (p.recompute.granularity == search_spaces::RecomputeGranularity::kFull &&
      p.recompute.num_layers < 1) {
    return bad("recompute num_layers must be >= 1", "");
  }
  // !(x >= 0 && x < 1) also rejects NaN.
  if (!(hidden_dropout >= 0.0f && hidden_dropout < 1.0f)) {
    return bad(
        "hidden_dropout must be in [0, 1), got " + ShortFloat(hidden_dropout),
        "use --hidden-dropout 0.1 (Megatron's default) or 0 (off)");
  }
  if (!(attention_dropout >= 0.0f && attention_dropout < 1.0f)) {
    return bad("attention_dropout must be in [0, 1), got " +
                   ShortFloat(attention_dropout),
               "use --attention-dropout 0.1 (Megatron's default) or 0 (off)");
  }
  // !(x > 0) also rejects NaN; infinity means "wait for ever", which is
  // exactly the hang the timeout exists to prevent.
  if (!(distributed_timeout_s > 0) || !std::isfinite(distributed_timeout_s)) {
    return bad("distributed_timeout_s must be a positive number of seconds",
               "use --distributed-timeout-minutes 10 (Megatron's default)");
  }
  return Status::Ok();
}

}  // namespace meshtune::engine
