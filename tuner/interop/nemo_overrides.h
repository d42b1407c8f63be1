// `--format nemo`: a NeMo megatron_gpt YAML override block for one
// configuration, and the parser that reads such a block back.
//
// The block uses the key names of NeMo's megatron_gpt_config.yaml (NeMo 1
// Hydra configs; the same names are the fields NeMo 2 recipes set on
// MegatronStrategy / MegatronMixedPrecision): trainer.devices,
// trainer.num_nodes, trainer.precision, and under model: the parallel sizes,
// sequence_parallel, micro/global batch, encoder_seq_length, the
// activations_checkpoint_* keys, fp8 / fp8_hybrid / fp8_params,
// ub_tp_comm_overlap and optim (distributed_fused_adam with overlap and
// grad_sync_dtype). It overrides the parallel plan of a config that already
// describes the model; the architecture itself is not part of it (a comment
// names the model). docs/export.md has the full mapping.
#ifndef MESHTUNE_TUNER_INTEROP_NEMO_OVERRIDES_H_
#define MESHTUNE_TUNER_INTEROP_NEMO_OVERRIDES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "search_spaces/model_spec.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/status.h"
#include "search_spaces/training_spec.h"

namespace meshtune::tuner {

// The override block. trainer.devices is min(gpus, gpus_per_node) and
// trainer.num_nodes the rest; InvalidArgument when the GPUs are not whole
// nodes (more than one node and not a multiple of gpus_per_node).
// grad_reduce_in_bf16 is exported as optim.grad_sync_dtype, which exists only
// for distributed_fused_adam: without dist_opt it is not exported (a comment
// says so).
// For MoE models the block also carries the run choices the cost model
// priced, under Megatron-Core TransformerConfig names as Megatron-Bridge
// sets them on model: expert_tensor_parallel_size, moe_token_dispatcher_type,
// moe_grouped_gemm, moe_expert_capacity_factor (null = dropless) and
// moe_pad_expert_input_to_capacity; every block has attention_backend
// (`flash_attention` as in MegatronArgs), and an uneven pipeline
// pipeline_model_parallel_layout.
StatusOr<std::string> NemoOverrides(const search_spaces::ModelSpec& model,
                                    const search_spaces::TrainingSpec& training,
                                    const search_spaces::ParallelConfig& config,
                                    int64_t gpus_per_node,
                                    bool flash_attention = true);

struct ParsedNemoOverrides {
  // num_gpus (devices × num_nodes), global_batch_size, seq_length
  // (encoder_seq_length), precision, fp8_param_gather,
  // fp8_dot_product_attention, grad_reduce_in_bf16, tp_comm_overlap.
  // train_tokens keeps its default.
  search_spaces::TrainingSpec training;
  // All axes; dp = num_gpus / (tp·pp·cp).
  search_spaces::ParallelConfig config;
  int64_t gpus_per_node = 0;  // trainer.devices
  // The Megatron-Core keys, when present (unset = the key was absent).
  std::optional<search_spaces::TokenDispatcher> moe_token_dispatcher_type;
  std::optional<bool> moe_grouped_gemm;
  std::optional<bool> use_transformer_engine_op_fuser;
  double moe_expert_capacity_factor = 0;  // 0 = null/absent (dropless)
  std::optional<bool> moe_pad_expert_input_to_capacity;
  std::string attention_backend;  // "" = absent
  // Adjustments NeMo/Megatron would make, one sentence each.
  std::vector<std::string> notes;
};

// Reads an override block (as NemoOverrides writes it, or written by hand:
// absent parallel sizes default to 1, switches to off). trainer.devices,
// trainer.num_nodes, trainer.precision, model.micro_batch_size,
// model.global_batch_size and model.encoder_seq_length are required. Errors
// are one line `source:line: message` with a hint; unknown keys name the
// closest known one. `model` (not owned; may be null) gives the layer and
// MTP counts that pipeline_model_parallel_layout is read against; a layout
// without it is an error.
StatusOr<ParsedNemoOverrides> ParseNemoOverrides(
    const std::string& yaml_text, const std::string& source = "NeMo overrides",
    const search_spaces::ModelSpec* model = nullptr);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_INTEROP_NEMO_OVERRIDES_H_
