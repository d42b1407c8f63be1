#include "tuner/interop/bridge_overrides.h"

#include "search_spaces/pipeline_layout.h"
#include "tuner/interop/launch_script.h"
#include "tuner/interop/megatron_args.h"

namespace meshtune::tuner {
namespace {

using search_spaces::Precision;
using search_spaces::RecomputeGranularity;

const char* Bool(bool b) { return b ? "true" : "false"; }

// The preset's own fp8_param_gather (megatron.bridge.training.
// mixed_precision): the delayed, tensorwise and MXFP8 presets gather FP8
// parameters, the blockwise and NVFP4 ones do not.
bool PresetGathersFp8Params(Precision p) {
  return p == Precision::kFp8 || p == Precision::kFp8Tensorwise ||
         p == Precision::kMxfp8;
}

}  // namespace

std::string BridgeMixedPrecision(const search_spaces::TrainingSpec& t) {
  std::string name;
  switch (t.precision) {
    case Precision::kBf16:
      name = "bf16_mixed";
      break;
    case Precision::kFp16:
      name = "fp16_mixed";
      break;
    case Precision::kFp8:
      name = "bf16_with_fp8_delayed_scaling_mixed";
      break;
    case Precision::kFp8Tensorwise:
      name = "bf16_with_fp8_current_scaling_mixed";
      break;
    case Precision::kFp8Blockwise:
      name = "bf16_with_fp8_subchannel_scaling_mixed";
      break;
    case Precision::kMxfp8:
      name = "bf16_with_mxfp8_mixed";
      break;
    case Precision::kNvfp4:
      name = "bf16_with_nvfp4_mixed";
      break;
  }
  if (PresetGathersFp8Params(t.precision) && !t.fp8_param_gather) {
    name += "_bf16_params";
  }
  if (t.grad_reduce_in_bf16) name += "_bf16_grad_reduce";
  return name;
}

std::vector<std::string> BridgeOverrides(const search_spaces::ModelSpec& m,
                                         const search_spaces::TrainingSpec& t,
                                         const search_spaces::ParallelConfig& c,
                                         bool flash_attention,
                                         const TrainingRun& run,
                                         std::vector<std::string>* notes) {
  std::vector<std::string> o;
  const auto set = [&o](const std::string& key, const std::string& value) {
    o.push_back(key + "=" + value);
  };
  const auto num = [&set](const std::string& key, int64_t value) {
    set(key, std::to_string(value));
  };
  num("model.tensor_model_parallel_size", c.tp);
  num("model.pipeline_model_parallel_size", c.pp);
  const search_spaces::PipelineLayout layout(m.num_layers, c);
  if (layout.uneven()) {
    // Quoted twice: '|' is shell syntax, and Hydra reads the value as a
    // string only in double quotes.
    o.push_back(ShellQuote("model.pipeline_model_parallel_layout=\"" +
                           layout.MegatronString(m.mtp_num_layers) + "\""));
  } else {
    if (c.vpp > 1) {
      num("model.virtual_pipeline_model_parallel_size", c.vpp);
    } else {
      set("model.virtual_pipeline_model_parallel_size", "null");
    }
    const bool units = search_spaces::PipelineLayout::AccountsEmbeddingAndLoss(
        m.num_layers, c.pp, c.vpp);
    set("model.account_for_embedding_in_pipeline_split", Bool(units));
    set("model.account_for_loss_in_pipeline_split", Bool(units));
  }
  num("model.context_parallel_size", c.cp);
  if (m.is_moe()) {
    num("model.expert_model_parallel_size", c.ep);
    num("model.expert_tensor_parallel_size", c.expert_tp());
    set("model.moe_token_dispatcher_type",
        search_spaces::ToString(m.moe_token_dispatcher_type));
    set("model.moe_grouped_gemm", Bool(m.moe_grouped_gemm));
    set("model.moe_expert_capacity_factor",
        m.moe_expert_capacity_factor > 0
            ? FormatMegatronNumber(m.moe_expert_capacity_factor)
            : "null");
    set("model.moe_pad_expert_input_to_capacity",
        Bool(m.moe_pad_expert_input_to_capacity));
    if (m.moe_router_force_load_balancing) {
      set("model.moe_router_force_load_balancing", "true");
    }
  }
  set("model.sequence_parallel", Bool(c.sp));
  switch (c.recompute.granularity) {
    case RecomputeGranularity::kNone:
      set("model.recompute_granularity", "null");
      break;
    case RecomputeGranularity::kSelective:
      set("model.recompute_granularity", "selective");
      break;
    case RecomputeGranularity::kFull:
      set("model.recompute_granularity", "full");
      set("model.recompute_method",
          search_spaces::ToString(c.recompute.method));
      num("model.recompute_num_layers", c.recompute.num_layers);
      break;
  }
  set("model.attention_backend", AttentionBackend(m, flash_attention));
  num("model.seq_length", t.seq_length);
  num("dataset.sequence_length", t.seq_length);
  num("train.micro_batch_size", c.mbs);
  num("train.global_batch_size", t.global_batch_size);
  num("train.train_iters", run.train_iters);

  set("ddp.use_distributed_optimizer", Bool(c.dist_opt));
  set("optimizer.use_distributed_optimizer", Bool(c.dist_opt));
  // The overlaps the cost model assumes (megatron_args.cc says why).
  set("ddp.overlap_grad_reduce", "true");
  set("ddp.overlap_param_gather", Bool(c.dist_opt));
  if (t.megatron_fsdp) {
    set("ddp.use_megatron_fsdp", "true");
    set("ddp.data_parallel_sharding_strategy", "optim_grads_params");
  }
  set("mixed_precision", BridgeMixedPrecision(t));
  if (t.fp8_param_gather && !PresetGathersFp8Params(t.precision)) {
    notes->push_back(std::string("the ") + BridgeMixedPrecision(t) +
                     " preset keeps BF16 parameters; the plan's FP8 "
                     "parameter gather needs a MixedPrecisionConfig with "
                     "fp8_param_gather=True in the recipe");
  }
  if (t.fp8_dot_product_attention && search_spaces::IsFp8(t.precision)) {
    notes->push_back(
        "FP8 attention is set by the mixed-precision preset, not by an "
        "override: give the recipe a MixedPrecisionConfig with "
        "fp8_dot_product_attention=True");
  }
  if (t.tp_comm_overlap && c.sp && c.tp > 1) {
    set("comm_overlap.tp_comm_overlap", "true");
  }
  if (t.moe_ep_overlap && m.is_moe() && c.ep > 1) {
    set("model.overlap_moe_expert_parallel_comm", "true");
    set("model.delay_wgrad_compute", "true");
  }
  if (t.cpu_offloading_num_layers > 0) {
    set("model.cpu_offloading", "true");
    num("model.cpu_offloading_num_layers", t.cpu_offloading_num_layers);
  }
  if (t.cuda_graphs.enabled()) {
    set("model.cuda_graph_impl", search_spaces::ToString(t.cuda_graphs.impl));
    if (t.cuda_graphs.scope != 0) {
      o.push_back(ShellQuote(
          "model.cuda_graph_scope=[" +
          search_spaces::CudaGraphScopeString(t.cuda_graphs.scope, ',') + "]"));
    }
  }

  // The tokenizer the vocabulary was costed with.
  if (!m.tokenizer_type.empty()) {
    set("tokenizer.tokenizer_type", m.tokenizer_type);
    if (!m.tokenizer_model.empty()) {
      set("tokenizer.tokenizer_model", m.tokenizer_model);
    } else if (m.tokenizer_type == "NullTokenizer") {
      num("tokenizer.vocab_size", m.vocab_size - 1);
    }
  }
  // The run's schedule (tuner/interop/training_run.h).
  set("optimizer.lr", FormatMegatronNumber(run.lr));
  set("optimizer.min_lr", FormatMegatronNumber(run.min_lr));
  set("optimizer.weight_decay", FormatMegatronNumber(kWeightDecay));
  set("optimizer.adam_beta1", FormatMegatronNumber(kAdamBeta1));
  set("optimizer.adam_beta2", FormatMegatronNumber(kAdamBeta2));
  set("optimizer.adam_eps", FormatMegatronNumber(kAdamEps));
  set("optimizer.clip_grad", FormatMegatronNumber(kClipGrad));
  set("scheduler.lr_decay_style", "cosine");
  num("scheduler.lr_warmup_iters", run.lr_warmup_iters);
  num("scheduler.lr_decay_iters", run.lr_decay_iters);
  return o;
}

}  // namespace meshtune::tuner
