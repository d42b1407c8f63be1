// The GPT / LLaMA-style decoder on one GPU (CUDA backend): the CPU model's
// layer (engine/transformer_layer.h) and head (engine/gpt_model.h) with the
// GPU ops, in bf16 with fp32 main grads (engine/cuda/ops.h precision rules).
//
// Scope today: the whole model on one GPU (tp = pp = cp = 1; the trainer
// runs data-parallel replicas of it, one GPU per rank); recompute none,
// selective or full (uniform or block, Megatron's segments: only the
// segment inputs are kept, the segment's forward runs again in the
// backward); hidden and attention dropout with the CPU engine's masks.
// Anything else is refused by CheckSupported with a message naming it.
//
// Core attention is the fused flash-style kernel (engine/cuda/
// flash_attention.h): a layer keeps the fp32 log-sum-exp [b·heads, s] of
// its scores, never the probabilities, so selective recompute has nothing
// extra to drop (as in Megatron with flash attention). The unfused
// cuBLASLt kernel (engine/cuda/attention.h, probabilities saved, or
// recomputed under selective recompute) runs instead when the environment
// variable MESHTUNE_CUDA_ATTENTION=unfused is set, read once when the model
// is created.
//
// Parameters are those of the CPU model (the same ParamStore registration
// and layout-independent initialization), found by their Megatron names.
#ifndef MESHTUNE_ENGINE_CUDA_GPT_MODEL_H_
#define MESHTUNE_ENGINE_CUDA_GPT_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "engine/cuda/attention.h"
#include "engine/cuda/device_params.h"
#include "engine/cuda/flash_attention.h"
#include "engine/cuda/linear.h"
#include "engine/param_store.h"
#include "engine/train_config.h"
#include "engine/transformer_layer.h"
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
  // Why `config` cannot run on the CUDA backend yet (OK if it can).
  static Status CheckSupported(const TrainConfig& config);

  // `store` holds the registered, initialized parameters (a CPU GptModel
  // built them); `params` their device copy. Neither is owned. Allocates
  // the activations of one micro-batch.
  static StatusOr<std::unique_ptr<CudaGptModel>> Create(
      const TrainConfig& config, const ParamStore& store, DeviceParams* params);
  ~CudaGptModel();

  // One micro-batch: tokens and targets [s·b] (host, sequence-major rows
  // si·b + bi); first_sample is the global dataset index of its sample 0,
  // which keys the dropout masks (engine/cpu/dropout_mask.h) exactly as on
  // the CPU. Returns the sum of its per-token losses.
  StatusOr<double> Forward(const std::vector<int32_t>& tokens,
                           const std::vector<int32_t>& targets,
                           int64_t first_sample = 0);
  // Backward of the last Forward with the loss scaled by `loss_scale` per
  // token; accumulates into the main grads. `on_layer_done(l)`, when given,
  // is called as soon as layer l's gradient kernels are enqueued (layers in
  // reverse order): the trainer starts that layer's data-parallel reduction
  // there, overlapping the layers below.
  Status Backward(float loss_scale,
                  const std::function<Status(int64_t)>& on_layer_done = {});

  // The store indices [first, last] of layer l's parameter tensors (they
  // are contiguous in the store: engine/transformer_layer.h registers a
  // layer's tensors together).
  std::pair<int, int> LayerTensors(int64_t layer) const;
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }

 private:
  struct Activations;
  struct Layer;
  CudaGptModel() = default;
  // One layer's activation set; `keep_probs`: the unfused kernel's
  // probabilities are saved (no selective recompute).
  StatusOr<std::unique_ptr<Activations>> AllocActivations(bool keep_probs);
  Status LayerForward(Layer& layer, const Bf16* x, Bf16* y);
  // x: the layer's forward input [n, h].
  Status LayerBackward(Layer& layer, const Bf16* x, const Bf16* dy, Bf16* dx);
  // Dropout specs of this micro-batch: hidden dropout at `site` of layer
  // `layer` (−1: the embedding), attention dropout of `layer`.
  cpu::DropoutSpec Hidden(int64_t layer, cpu::DropoutSite site) const;
  cpu::DropoutSpec AttentionDrop(int64_t layer) const;
  // The gradient of a dropped branch: a masked copy of `d` in `scratch`
  // (d itself without dropout).
  StatusOr<const Bf16*> DropGrad(const Bf16* d, int64_t layer,
                                 cpu::DropoutSite site, DeviceBuffer& scratch);

  TrainConfig config_;
  const ParamStore* store_ = nullptr;
  DeviceParams* params_ = nullptr;
  LayerShape sh_;
  int64_t padded_vocab_ = 0;
  int word_emb_ = -1, pos_emb_ = -1, final_w_ = -1, final_b_ = -1, output_ = -1;
  std::unique_ptr<GemmContext> gemm_;
  // Exactly one of the two is set (ParseAttentionKernel).
  std::unique_ptr<FlashAttention> flash_;
  std::unique_ptr<Attention> attention_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<std::unique_ptr<Activations>> activation_sets_;
  // [n] token ids and targets; x_[l] is layer l's input [n, h] (x_[L] the
  // final norm's input); head buffers; gradient ping-pong [n, h].
  DeviceBuffer tokens_, targets_;
  std::vector<DeviceBuffer> x_;
  DeviceBuffer final_out_, final_mean_, final_rstd_, logits_;
  DeviceBuffer row_max_, sum_exp_, target_logit_, loss_, scale_;
  DeviceBuffer grad_a_, grad_b_;
  // Backward scratch shared by the layers (one layer's backward at a time):
  // the unfused kernel's selective recompute's probabilities and output
  // (empty otherwise), dqkv, dattn, dfc1, dact, and the gradient of a
  // norm's output.
  DeviceBuffer probs_scratch_, attn_scratch_, dqkv_, dattn_, dfc1_, dact_, dln_,
      dx2_;
  float scale_value_ = -1.0f;
  int64_t first_sample_ = 0;  // of the micro-batch in flight
  DeviceBuffer drop_grad_;    // [n, h]: a dropped branch's gradient
};

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_GPT_MODEL_H_
