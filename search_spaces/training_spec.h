// TrainingSpec: what is trained, independent of how it is parallelised.
#ifndef MESHTUNE_SEARCH_SPACES_TRAINING_SPEC_H_
#define MESHTUNE_SEARCH_SPACES_TRAINING_SPEC_H_

#include <cstdint>

#include "search_spaces/cluster_spec.h"
#include "search_spaces/cuda_graphs.h"

namespace meshtune::search_spaces {

// Megatron --cross-entropy-fusion-impl: which fused kernel
// --cross-entropy-loss-fusion runs (costmodel/calibration.h has the bytes
// each moves per logit).
enum class CrossEntropyFusionImpl : uint8_t {
  // megatron/core/fusions/fused_cross_entropy.py (Megatron's default):
  // jit-fused pieces of the vocab-parallel cross-entropy, fp32 softmax.
  kNative,
  // Transformer Engine's parallel_cross_entropy (Triton): an online softmax
  // over the 16-bit logits whose gradient is written in place in forward.
  kTe,
};

struct TrainingSpec {
  int64_t num_gpus = 0;           // world size
  int64_t global_batch_size = 0;  // sequences per optimizer step (gbs)
  int64_t seq_length = 0;         // tokens per sequence
  Precision precision = Precision::kBf16;
  double train_tokens = 300e9;  // token budget for days_to_train

  // Megatron --grad-reduce-in-bf16 (false = the default: fp32 main-grad
  // buffer, 4 bytes per parameter, gradients reduced in fp32).
  bool grad_reduce_in_bf16 = false;
  // Megatron --fp8-param-gather (fp8 runs only): 16-bit model weights are kept
  // as fp8 (1 byte) and all-gathered in fp8 by the distributed optimizer.
  // NVIDIA's fp8 recipes set both (NeMo `fp8_params: true`,
  // `optim.grad_sync_dtype: bf16`).
  bool fp8_param_gather = false;
  // Megatron --tp-comm-overlap (Transformer Engine userbuffers; needs
  // sequence parallelism): the TP all-gathers and reduce-scatters are split
  // into chunks pipelined with their GEMMs. NeMo's H100 fp8 performance
  // recipes enable it for every tp > 1 configuration (tp_comm_overlap: true
  // with the ub_cfg_h100_* tables).
  bool tp_comm_overlap = false;
  // Megatron --overlap-moe-expert-parallel-comm with --delay-wgrad-compute:
  // the EP all-to-all of one micro-batch hides behind the computation of
  // another (1F1B merged forward/backward). Needs ep > 1, the alltoall or
  // flex dispatcher, no full recompute, and virtual stages when pp > 1
  // (docs/sources.md §2.3).
  bool moe_ep_overlap = false;
  // Megatron --fp8-dot-product-attention (fp8 runs only): Transformer
  // Engine runs the core attention (cuDNN fused attention, forward and
  // backward) in FP8 instead of 16-bit; NVIDIA's 26.06+ MXFP8 MoE recipes
  // on Blackwell set it (docs/costmodel.md §4, FP8 attention).
  bool fp8_dot_product_attention = false;
  // Megatron --overlap-grad-reduce / --overlap-param-gather: the DP
  // gradient reduce (and, with the distributed optimizer, the parameter
  // all-gather) overlaps backward (forward). Megatron's default is off;
  // meshtune's plans and exports turn both on, and a measured run's own
  // flags (`tune accuracy` megatron_args) say what it ran.
  bool overlap_grad_reduce = true;
  bool overlap_param_gather = true;
  // Megatron --cross-entropy-loss-fusion: the logits' softmax and loss in
  // one fused kernel (fewer fp32 logits copies in memory).
  bool cross_entropy_loss_fusion = false;
  // Megatron --cross-entropy-fusion-impl (only with the fusion on).
  CrossEntropyFusionImpl cross_entropy_fusion_impl =
      CrossEntropyFusionImpl::kNative;
  // Megatron --cp-comm-type a2a (Ulysses-style all-to-all) instead of the
  // default p2p ring.
  bool cp_comm_a2a = false;
  // Megatron --moe-shared-expert-overlap: the shared expert runs during the
  // dispatch all-to-all (exclusive with moe_ep_overlap).
  bool moe_shared_expert_overlap = false;
  // Megatron-FSDP: --use-megatron-fsdp with
  // --data-parallel-sharding-strategy optim_grads_params (ZeRO-3). The
  // weights, main gradients and optimizer state are sharded over the
  // data-parallel group (dp·cp; experts over their edp group) and each
  // FSDP unit (a transformer layer; the embedding and output layer) is
  // all-gathered just before use and freed after it, the next unit
  // prefetched (megatron/core/distributed/fsdp/src/megatron_fsdp). Off =
  // Megatron's DDP (with or without the distributed optimizer).
  bool megatron_fsdp = false;
  // Megatron --cpu-offloading with --cpu-offloading-num-layers N
  // (--cpu-offloading-activations, its default): the saved activations of
  // N transformer layers are copied to host memory in forward and back in
  // backward (Transformer Engine's CPU offload context). 0 = off.
  int64_t cpu_offloading_num_layers = 0;
  // Megatron --cuda-graph-impl / --cuda-graph-scope (cuda_graphs.h): which
  // modules launch from a CUDA graph instead of eagerly from Python.
  CudaGraphs cuda_graphs;
  // Whether the plan runs under Megatron-LM on PyTorch, whose eager
  // modules launch kernel by kernel from Python (the cost model's host-
  // launch term, costmodel/host_launch.h). meshtune's own engine (tune
  // train, tune validate) launches from C++ and predicts with it off.
  bool python_launches = true;

  // Bytes per parameter of the model weights and of the main-grad buffer.
  double weight_bytes_per_param() const {
    return fp8_param_gather && IsQuantized(precision) ? 1.0 : 2.0;
  }
  double grad_bytes_per_param() const {
    return grad_reduce_in_bf16 ? 2.0 : 4.0;
  }

  int64_t tokens_per_step() const { return global_batch_size * seq_length; }
};

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_TRAINING_SPEC_H_
