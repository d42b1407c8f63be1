// TrainConfig: everything one training run needs besides the data, with
// Megatron-LM's argument names and defaults where Megatron has them.
#ifndef MESHTUNE_ENGINE_TRAIN_CONFIG_H_
#define MESHTUNE_ENGINE_TRAIN_CONFIG_H_

#include <cstdint>
#include <string>

#include "search_spaces/model_spec.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/status.h"

namespace meshtune::engine {

// Optimizer and learning-rate schedule (Megatron arguments.py names).
struct OptimizerConfig {
  float lr = 3e-4f;             // --lr (peak)
  float min_lr = 3e-5f;         // --min-lr
  int64_t lr_warmup_iters = 0;  // --lr-warmup-iters (linear from 0)
  int64_t lr_decay_iters = 0;   // --lr-decay-iters (0 = train_iters)
  enum class DecayStyle {
    kConstant,
    kLinear,
    kCosine
  } lr_decay_style = DecayStyle::kCosine;  // --lr-decay-style
  float adam_beta1 = 0.9f;                 // --adam-beta1
  float adam_beta2 = 0.95f;   // --adam-beta2 (GPT-3 recipe; Megatron 0.999)
  float adam_eps = 1e-8f;     // --adam-eps
  float weight_decay = 0.1f;  // --weight-decay (GPT-3 recipe; Megatron 0.01)
  float clip_grad = 1.0f;     // --clip-grad (0 = no clipping)
  // DDP gradient bucket size in elements (Megatron --ddp-bucket-size;
  // 0 = one bucket for the whole buffer).
  int64_t ddp_bucket_size = 0;
};

struct TrainConfig {
  search_spaces::ModelSpec model;
  search_spaces::ParallelConfig parallel;
  int64_t global_batch_size = 0;  // sequences per step
  int64_t seq_length = 0;         // tokens per sequence (model.seq_length if 0)
  int64_t train_iters = 0;        // --train-iters (steps)
  OptimizerConfig optimizer;

  // Model numerics.
  float init_method_std = 0.02f;   // --init-method-std
  float norm_epsilon = 1e-5f;      // --norm-epsilon
  float rotary_base = 10000.0f;    // --rotary-base
  float attention_dropout = 0.0f;  // --attention-dropout (off by default)
  float hidden_dropout = 0.0f;     // --hidden-dropout (off by default)
  int64_t make_vocab_size_divisible_by = 128;
  uint64_t seed = 1234;  // --seed (Megatron default)
  // MoE load-balancing loss coefficient (Megatron --moe-aux-loss-coeff,
  // default 0: no aux loss) and its kind (--moe-router-load-balancing-type:
  // aux_loss over each micro-batch, seq_aux_loss per sequence, none).
  double moe_aux_loss_coeff = 0.0;
  enum class LoadBalancing {
    kAuxLoss,
    kSeqAuxLoss,
    kNone
  } moe_router_load_balancing_type = LoadBalancing::kAuxLoss;
  // Megatron --moe-router-bias-update-rate: the step of the aux-loss-free
  // expert bias (models with moe_router_enable_expert_bias).
  double moe_router_bias_update_rate = 1e-3;

  // Checkpoints.
  std::string save_dir;       // --save ("" = none)
  std::string load_dir;       // --load ("" = none)
  int64_t save_interval = 0;  // --save-interval (0 = only at the end)

  int64_t log_interval = 1;  // --log-interval
  // How long a collective or receive waits for its peers before the job is
  // aborted naming the rank that did not answer (Megatron
  // --distributed-timeout-minutes, default 10 minutes; communicator.h).
  double distributed_timeout_s = 600.0;
  // Model FLOPs of one iteration (Megatron num_floating_point_operations;
  // the caller computes it with costmodel::ModelFlopsPerStep) for the
  // TFLOP/s column of the log; 0 prints 0.
  double model_flops_per_iteration = 0;

  int64_t seq() const { return seq_length > 0 ? seq_length : model.seq_length; }
  // Whether MoE layers add a load-balancing loss.
  bool moe_aux_loss_on() const {
    return model.is_moe() && moe_aux_loss_coeff > 0 &&
           moe_router_load_balancing_type != LoadBalancing::kNone;
  }
  int64_t num_microbatches() const {
    return parallel.num_microbatches(global_batch_size);
  }
  // Vocabulary padded to a multiple of make_vocab_size_divisible_by · tp
  // (Megatron _vocab_size_with_padding).
  int64_t padded_vocab_size() const;

  // Checks what the engine supports and that the config is consistent:
  // world = tp·pp·cp·dp, gbs divisible by mbs·dp, layers split over pp·vpp
  // (search_spaces::PipelineLayout),
  // heads and groups divisible by tp, seq divisible by tp under SP, by 2·cp
  // with context parallelism (2·cp·tp with SP too); for MoE models the
  // expert grid (ep divides the experts, etp·ep divides tp·cp·dp, sp with
  // tp > 1); model features the engine does not build (MLA, MTP, hybrid,
  // expert bias, ...) are Unimplemented.
  Status Validate() const;
};

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_TRAIN_CONFIG_H_
