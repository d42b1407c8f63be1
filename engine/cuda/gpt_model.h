// The part of a GPT / LLaMA-style decoder one rank holds, CUDA backend: the
// chunks of engine/model_layout.h (virtual pipeline stages, their layers,
// recompute segments and parameters, the same the CPU model runs) run with
// the GPU layer (engine/cuda/transformer_layer.h),
// in bf16 with fp32 main grads (engine/cuda/kernels/ops.h precision rules).
//
// - Tensor and sequence parallelism: vocab-parallel embedding (all-reduce,
//   or reduce-scatter to the sequence shards under SP), the layers' tp
//   collectives, the final norm on the shard, the vocab-parallel output
//   layer on the gathered sequence and the vocab-parallel cross-entropy
//   (max and sums all-reduced over tp, Megatron's cross_entropy.py).
// - Pipeline parallelism: a chunk reads its input from and writes its
//   output to device buffers of a micro-batch slot; the trainer moves them
//   between ranks. Every micro-batch in flight on a chunk holds a slot (its
//   input, output, their gradients, the head's logits), and from its
//   forward to the end of its backward one activation set per kept layer
//   from a pool shared by the rank's chunks, sized for the schedule's peak
//   (engine/pipeline/slots.h): Megatron's in-flight activations.
// - Recompute: selective (the unfused kernel's probabilities are rebuilt;
//   with the flash kernel there are none to drop) and full (uniform or
//   block, Megatron's segments: a slot keeps only each recomputed segment's
//   input, the segment's layers share one pool of activations and inputs
//   that exists only while the segment runs again in the backward).
// - Dropout with the CPU engine's masks (same elements, every layout).
//
// Core attention is the fused flash-style kernel (engine/cuda/
// flash_attention.h); the unfused cuBLASLt kernel
// (engine/cuda/kernels/attention.h) runs instead when
// MESHTUNE_CUDA_ATTENTION=unfused, read once at Create.
//
// Context parallelism (cp > 1): the rows are the cp rank's two chunks of
// the sequence (engine/context_parallel/sequence_chunks.h; the trainer
// selects them), core attention is ring attention over the cp group
// (engine/cuda/context_parallel/ring_attention.h), and the position
// embedding and dropout masks are taken at the rows' global positions.
//
// Activations between stages are [nl, h] bf16, nl = s·b/tp under SP, else
// s·b (rows sequence-major; s = seq/cp).
#ifndef MESHTUNE_ENGINE_CUDA_GPT_MODEL_H_
#define MESHTUNE_ENGINE_CUDA_GPT_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "engine/cuda/comm/device_communicator.h"
#include "engine/cuda/device_params.h"
#include "engine/cuda/kernels/attention.h"
#include "engine/cuda/kernels/flash_attention.h"
#include "engine/cuda/kernels/linear.h"
#include "engine/cuda/transformer_layer.h"
#include "engine/model_layout.h"
#include "engine/param_store.h"
#include "engine/process_groups.h"
#include "engine/train_config.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

// The core-attention kernel of the model.
enum class AttentionKernel { kFlash, kUnfused };

// The kernel MESHTUNE_CUDA_ATTENTION's value names: unset (nullptr) or
// empty or "flash" -> kFlash, "unfused" -> kUnfused; anything else is an
// error naming the value.
StatusOr<AttentionKernel> ParseAttentionKernel(const char* value);

class CudaGptModel {
 public:
  // Why `config` (valid for the engine: TrainConfig::Validate) cannot run
  // on the CUDA backend (OK if it can): an attention shape the selected
  // kernel does not take (the flash kernel: head_dim a multiple of 16 up to
  // 128, b·heads per tp rank ≤ 65535; under context parallelism at one
  // chunk of s/(2·cp) positions, and only the flash kernel runs the ring),
  // or a bad MESHTUNE_CUDA_ATTENTION. Needs no device.
  static Status CheckSupported(const TrainConfig& config);

  // `layout`: the CPU model that registered this rank's parameters in
  // `store` (finalized, initialized); `params` their device copy; `tp` the
  // device communicator of the tp group (null when tp == 1); slots[c]: how
  // many micro-batches of chunk c may be in flight at once
  // (engine/pipeline/slots.h CountPipelineSlots); activation_sets: the most
  // kept layers' activations in flight at once over all chunks
  // (PeakInFlightLayers with KeptLayers); `cp` the device communicator of
  // the cp group, required when cp > 1 (core attention is then ring
  // attention over it, engine/cuda/context_parallel/, and the rows are the
  // cp rank's two chunks). Nothing is owned; all must outlive the model.
  // Allocates everything up front.
  static StatusOr<std::unique_ptr<CudaGptModel>> Create(
      const TrainConfig& config, const ModelLayout& layout,
      const ParamStore& store, DeviceParams* params, DeviceCommunicator* tp,
      const std::vector<int>& slots, int64_t activation_sets,
      const CudaMoeComms& moe_comms = {}, DeviceCommunicator* cp = nullptr);
  // Per chunk of `layout`, its layers that keep their activations from the
  // forward to the backward (all but those under full recompute).
  static std::vector<int64_t> KeptLayers(const ModelLayout& layout);
  ~CudaGptModel();

  int num_chunks() const { return static_cast<int>(chunks_.size()); }
  bool HasEmbedding(int chunk) const { return layout_->HasEmbedding(chunk); }
  bool HasHead(int chunk) const { return layout_->HasHead(chunk); }
  // Elements of the activation passed between stages: nl·h.
  int64_t ActivationCount() const { return sh_.local_rows() * sh_.h; }

  // Device buffers [ActivationCount()] of a chunk's micro-batch slot: its
  // input (a non-first virtual stage receives into it before Forward), its
  // output (sent on after Forward; not on the last virtual stage), the
  // gradient of its output (received before Backward; not on the last
  // virtual stage) and of its input (sent back after Backward; not on the
  // first virtual stage).
  Bf16* Input(int chunk, int slot);
  const Bf16* Output(int chunk, int slot) const;
  Bf16* OutputGrad(int chunk, int slot);
  const Bf16* InputGrad(int chunk, int slot) const;

  // Forward of `chunk` for one micro-batch in `slot`: tokens and targets
  // [s·b] (host, sequence-major rows si·b + bi; read by the first and last
  // virtual stages only); first_sample is the global dataset index of its
  // sample 0, which keys the dropout masks exactly as on the CPU. The last
  // virtual stage adds the sum of the micro-batch's per-token losses (the
  // same on every tp rank) to a device accumulator (TakeLossSum): nothing
  // here waits for the GPU.
  Status Forward(int chunk, int slot, const std::vector<int32_t>& tokens,
                 const std::vector<int32_t>& targets, int64_t first_sample);
  // The losses Forward accumulated since the last call (0 off the last
  // virtual stage), read from the device (synchronizing), and resets it.
  StatusOr<double> TakeLossSum();
  // The MoE layers' partial aux losses of this rank's forwards since the
  // last call (recomputed forwards not counted again), and resets it.
  double TakeAuxLossSum();
  // The aux-loss-free expert bias of every MoE layer of this rank, once per
  // step after the optimizer (CudaMoeBlock::UpdateExpertBias over the tp
  // and dp·cp groups of `groups`), written into `store`'s bias entries (the
  // host copy the routing reads). No-op without an expert bias.
  void UpdateExpertBias(float rate, ProcessGroups* groups, ParamStore* store);
  // The store indices of those biases (their truth is the host store).
  std::vector<int> ExpertBiasTensors() const;
  // Backward of `chunk` for the micro-batch in `slot` (the last virtual
  // stage starts from the loss scaled by `loss_scale` per token);
  // accumulates into the main grads. `on_layer_done(l)`, when given, is
  // called with the global layer number as soon as layer l's gradient
  // kernels are enqueued (layers in reverse order): the trainer starts that
  // layer's data-parallel reduction there.
  Status Backward(int chunk, int slot, float loss_scale,
                  const std::function<Status(int64_t)>& on_layer_done = {});

  // The store indices [first, last] of global layer l's parameter tensors
  // (contiguous: engine/transformer_layer.h registers a layer's tensors
  // together). REQUIRES: this rank holds layer l.
  std::pair<int, int> LayerTensors(int64_t layer) const;

 private:
  struct Slot;
  struct Chunk;
  CudaGptModel() = default;
  const Bf16* W(int i) const;
  float* G(int i) const;
  cpu::DropoutSpec EmbeddingDropout(int64_t first_sample) const;
  // This rank's sequence chunks under cp (ring_), else null.
  const context_parallel::SequenceChunks* Chunks() const;
  Status EmbeddingForward(Slot& slot);
  Status EmbeddingBackward(Slot& slot, Bf16* dx);
  Status HeadForward(Slot& slot, const Bf16* x);
  // dx [nl, h]: the gradient of the final norm's input.
  Status HeadBackward(Slot& slot, const Bf16* x, float loss_scale, Bf16* dx);
  // The input buffer of layer l (within the chunk) of a slot: the slot's
  // own, or the recompute pool's inside a recomputed segment.
  Bf16* LayerInput(Chunk& chunk, Slot& slot, int64_t l);
  Bf16* LayerOutput(Chunk& chunk, Slot& slot, int64_t l);

  TrainConfig config_;
  const ModelLayout* layout_ = nullptr;
  const ParamStore* store_ = nullptr;
  DeviceParams* params_ = nullptr;
  DeviceCommunicator* tp_ = nullptr;
  int tp_rank_ = 0;
  LayerShape sh_;
  int64_t vocab_start_ = 0, vocab_local_ = 0;
  std::unique_ptr<GemmContext> gemm_;
  // Exactly one of the two is set (ParseAttentionKernel).
  std::unique_ptr<FlashAttention> flash_;
  std::unique_ptr<Attention> attention_;
  // cp > 1: ring attention (then flash_ and attention_ are null).
  std::unique_ptr<DeviceRingAttention> ring_;
  std::unique_ptr<LayerScratch> scratch_;
  // MoE models: the rows' dispatcher and one block per MoE layer.
  std::unique_ptr<DeviceTokenDispatcher> dispatcher_;
  std::vector<std::unique_ptr<CudaMoeBlock>> moe_blocks_;
  double aux_loss_sum_ = 0;
  std::vector<std::unique_ptr<Chunk>> chunks_;
  // Kept layers' activation sets in flight, and the free ones.
  std::vector<std::unique_ptr<LayerActivations>> sets_;
  std::vector<LayerActivations*> free_sets_;
  // Recompute pool: activations and inputs of a recomputed segment's
  // layers (index l − segment begin), shared by every chunk and slot.
  std::vector<std::unique_ptr<LayerActivations>> pool_;
  // Backward ping-pong [nl, h]; per-token loss scale [n] (uploaded when it
  // changes).
  DeviceBuffer grad_a_, grad_b_, scale_;
  DeviceBuffer loss_sum_;  // one double: Σ losses since TakeLossSum
  float scale_value_ = -1.0f;
};

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_GPT_MODEL_H_
