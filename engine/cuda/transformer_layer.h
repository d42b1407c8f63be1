// One transformer layer on one tensor-parallel rank, CUDA backend: the CPU
// layer (engine/transformer_layer.h) with the GPU ops, in bf16 with fp32
// main grads (engine/cuda/kernels/ops.h precision rules), and the same
// Megatron-Core parallel semantics: column-parallel QKV and fc1,
// row-parallel attention projection and fc2, sequence-parallel norms,
// residuals and dropout when sp is on. Collectives run on the tp device
// communicator in stream order, exactly the ones the CPU layer issues
// (search_spaces::TransformerLayerTpCommOps):
//   forward  (SP) all-gather before QKV and fc1, reduce-scatter after the
//            projection and fc2; (no SP, tp > 1) all-reduce after them;
//   backward the transposes: all-gathers of the output gradients and of the
//            saved norm outputs (Megatron keeps only the shard under SP),
//            reduce-scatters (or all-reduces) of the input gradients.
//
// Row-parallel biases are added once: tp rank 0's GEMM epilogue adds the
// bias to its partial sum, so the reduction over tp carries it into every
// rank's result (the CPU layer adds it after the reduction; the sums agree
// within one bf16 rounding). Their gradient: without SP every rank computes
// it from the full output gradient (a replicated parameter, counted once in
// the norm); under SP the parameter is marked sequence_parallel and the
// trainer all-reduces it over tp, so rank 0 computes it from the gathered
// full gradient and the other ranks add nothing.
//
// Shapes (per rank, one micro-batch): n = s·b rows, nl = n/tp under SP
// (else n), h hidden, qw = (heads + 2·groups)·d and hd = heads·d with the
// rank's heads, ffn and fc1 width per rank (engine/transformer_layer.h
// LayerShape).
#ifndef MESHTUNE_ENGINE_CUDA_TRANSFORMER_LAYER_H_
#define MESHTUNE_ENGINE_CUDA_TRANSFORMER_LAYER_H_

#include <cstdint>
#include <memory>

#include "engine/cpu/dropout_mask.h"
#include "engine/cuda/comm/device_communicator.h"
#include "engine/cuda/context_parallel/ring_attention.h"
#include "engine/cuda/device_params.h"
#include "engine/cuda/kernels/attention.h"
#include "engine/cuda/kernels/flash_attention.h"
#include "engine/cuda/kernels/linear.h"
#include "engine/cuda/moe/moe_block.h"
#include "engine/cuda/runtime/device.h"
#include "engine/param_store.h"
#include "engine/transformer_layer.h"
#include "search_spaces/status.h"

namespace meshtune::engine::cuda {

// What one layer keeps from its forward for its backward (bf16 unless
// noted). Layers under full recompute share a pool of these: they exist
// only while their segment is recomputed.
struct LayerActivations {
  // [nl, h] the layer's input, when the layer is not its chunk's first
  // (the chunk's input lives in its micro-batch slot) nor a recomputed
  // segment's first (kept in the slot: it is all the segment keeps).
  DeviceBuffer input;
  DeviceBuffer mean1, rstd1, mean2, rstd2;  // fp32 [nl]
  DeviceBuffer ln1;                         // [nl, h] norm1 output (shard)
  DeviceBuffer qkv;                         // [n, qw], after RoPE
  // Unfused kernel: probabilities [b·heads, s, s] (empty under selective
  // recompute); flash kernel: fp32 log-sum-exp [b·heads, s] (always kept:
  // with flash, selective recompute saves nothing extra, as in Megatron).
  DeviceBuffer probs, lse;
  DeviceBuffer attn;     // [n, hd]
  DeviceBuffer x2, ln2;  // [nl, h]
  DeviceBuffer fc1;      // [n, fc1 width] pre-activation
  DeviceBuffer act;      // [n, ffn]
  // MoE layers: the routing and the rows (moe_block.h), instead of fc1 and
  // act; allocated for every set of a model with MoE layers (its buffers
  // grow on first use), null otherwise.
  std::unique_ptr<MoeActivations> moe;
};

// Scratch of one layer's forward or backward at a time, shared by every
// layer of a rank (all work is ordered on one stream).
struct LayerScratch {
  DeviceBuffer gathered;  // [n, h] an all-gathered shard (SP)
  DeviceBuffer partial;   // [n, h] row-parallel partial sums / input grads
  DeviceBuffer reduced;   // [nl, h] a reduce-scattered partial sum (SP)
  // The unfused kernel's selective recompute: probabilities and output.
  DeviceBuffer probs, attn;
  DeviceBuffer dqkv, dattn, dfc1, dact;  // [n, qw], [n, hd], [n, fc1], [n, ffn]
  DeviceBuffer dln, dx2;                 // [nl, h]
  DeviceBuffer drop;                     // [nl, h] a dropped branch's gradient
};

// The core-attention kernel of a layer: exactly one is non-null. `ring`:
// context parallelism (cp > 1), ring attention over the cp group on the
// flash chunk kernels; the layer's rows are then its cp rank's two chunks
// and its position-wise ops (RoPE, hidden dropout) use their global
// positions.
struct AttentionKernels {
  FlashAttention* flash = nullptr;
  Attention* unfused = nullptr;
  DeviceRingAttention* ring = nullptr;
};

// [nl, h] -> [n, h]: all-gathered over tp into `gathered` [n, h] under SP
// (and returned), else `in` itself (already full).
StatusOr<const Bf16*> GatherSequence(const LayerShape& shape,
                                     DeviceCommunicator* tp, const Bf16* in,
                                     Bf16* gathered);
// Partial sums [n, h] over tp (in `partial`, may be modified) -> [nl, h]
// reduced: reduce-scattered into `out` [nl, h] under SP (returned), else
// all-reduced in place when tp > 1 (`partial` returned).
StatusOr<Bf16*> ReduceOverTp(const LayerShape& shape, DeviceCommunicator* tp,
                             Bf16* partial, Bf16* out);

// The MoE weights of a layer's params `p`, each tensor's device pointer
// `weight(index)` (which gives null for a missing tensor, index -1): the
// trainer's layers and the generator take them alike.
template <typename Weight>
CudaMoeWeights CudaMoeWeightsOf(const LayerParams& p, const Weight& weight) {
  CudaMoeWeights w;
  w.router = weight(p.router);
  for (int i : p.expert_fc1) w.fc1.push_back(weight(i));
  for (int i : p.expert_fc2) w.fc2.push_back(weight(i));
  w.shared_fc1 = weight(p.shared_fc1);
  w.shared_fc2 = weight(p.shared_fc2);
  return w;
}

class CudaTransformerLayer {
 public:
  // Allocates one layer's activations; keep_probs: the unfused kernel's
  // probabilities are saved (no selective recompute).
  static StatusOr<std::unique_ptr<LayerActivations>> AllocActivations(
      const LayerShape& shape, const AttentionKernels& kernels,
      bool keep_probs);
  // selective: recompute under the unfused kernel (its probabilities are
  // rebuilt in the backward). dropout: hidden dropout is on.
  static StatusOr<std::unique_ptr<LayerScratch>> AllocScratch(
      const LayerShape& shape, const AttentionKernels& kernels, bool selective,
      bool dropout);

  // Nothing is owned. `tp` may be null when shape.tp == 1. global_layer
  // and shape.seed key the dropout masks (engine/cpu/dropout_mask.h).
  CudaTransformerLayer(const LayerShape& shape, const LayerParams& params,
                       int64_t global_layer, const ParamStore* store,
                       DeviceParams* device_params, GemmContext* gemm,
                       AttentionKernels kernels, DeviceCommunicator* tp,
                       LayerScratch* scratch);
  // Runs `moe` (not owned; its shape is this layer's) as the MLP: the
  // layer's params must be an MoE layer's (LayerParams::moe).
  void set_moe(CudaMoeBlock* moe) { moe_ = moe; }

  // x [nl, h] -> y [nl, h] (y must not alias x); fills `a`. first_sample:
  // the global dataset index of the micro-batch's sample 0 (dropout).
  Status Forward(const Bf16* x, Bf16* y, LayerActivations* a,
                 int64_t first_sample);
  // x: the forward input [nl, h]; dy [nl, h] -> dx [nl, h] (dx may not
  // alias dy); accumulates into the fp32 main grads.
  Status Backward(const Bf16* x, const Bf16* dy, Bf16* dx,
                  const LayerActivations& a, int64_t first_sample);

  const LayerParams& params() const { return p_; }
  int64_t global_layer() const { return layer_; }

 private:
  const Bf16* W(int i) const;
  float* G(int i) const;
  cpu::DropoutSpec Hidden(cpu::DropoutSite site, int64_t first_sample) const;
  cpu::DropoutSpec AttentionDropout(int64_t first_sample) const;
  // The ops.h position-wise ops at the rows' global positions: these
  // members hide the namespace functions of the same signature, so every
  // call in the layer goes through them. Without cp they are the ops.h
  // calls; under cp (kernels_.ring) one call per run of consecutive global
  // positions (engine/context_parallel/sequence_chunks.h Runs), with the
  // run's positions (RoPE) or first global row (dropout), as the CPU layer.
  // HiddenDropout's x holds the rows [d.first_row, + rows) of the rank's
  // local rows (its SP shard).
  Status HiddenDropout(Bf16* x, int64_t rows, int64_t h, int64_t b,
                       const cpu::DropoutSpec& d, Stream stream) const;
  Status RopeForward(Bf16* qkv, int64_t s, int64_t b, int64_t heads,
                     int64_t groups, int64_t head_dim, float base,
                     int64_t pos_offset, Stream stream) const;
  Status RopeBackward(Bf16* dqkv, int64_t s, int64_t b, int64_t heads,
                      int64_t groups, int64_t head_dim, float base,
                      int64_t pos_offset, Stream stream) const;
  // This rank's sequence chunks under cp (kernels_.ring), else null.
  const context_parallel::SequenceChunks* Chunks() const;
  Status Norm(const Bf16* x, const Bf16* residual, Bf16* sum_out, int w, int b,
              Bf16* out, DeviceBuffer& mean, DeviceBuffer& rstd);
  Status NormBackward(const Bf16* dout, const Bf16* y, int w, int b,
                      const DeviceBuffer& mean, const DeviceBuffer& rstd,
                      const Bf16* dresidual, Bf16* dx);
  // GatherSequence into scratch.gathered; ReduceOverTp.
  StatusOr<const Bf16*> Gather(const Bf16* in);
  StatusOr<Bf16*> Reduce(Bf16* partial, Bf16* out);
  // A dropped branch's gradient from the one after the dropout: `d` itself
  // without dropout, else a masked copy in scratch.drop.
  StatusOr<const Bf16*> DropGrad(const Bf16* d, cpu::DropoutSite site,
                                 int64_t first_sample);
  // The dense MLP's backward from D(dy) [nl, h]: dln2 [nl, h] (in scratch).
  StatusOr<Bf16*> DenseMlpBackward(const Bf16* dmlp, const LayerActivations& a);
  // The attention block's backward from dx2 [nl, h] (the gradient at the
  // attention residual's output): dx [nl, h].
  Status AttentionBackward(const Bf16* x, Bf16* dx2, Bf16* dx,
                           const LayerActivations& a, int64_t first_sample);
  // The MoE MLP's device weights and main grads (LayerParams' MoE fields).
  CudaMoeWeights MoeWeights() const;
  CudaMoeGrads MoeGrads() const;

  LayerShape sh_;
  LayerParams p_;
  int64_t layer_;
  const ParamStore* store_;
  DeviceParams* params_;
  GemmContext* gemm_;
  AttentionKernels kernels_;
  DeviceCommunicator* tp_;
  int tp_rank_;
  LayerScratch* scratch_;
  CudaMoeBlock* moe_ = nullptr;
};

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_ENGINE_CUDA_TRANSFORMER_LAYER_H_
