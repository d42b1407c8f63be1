// ModelOptions: switches for the cost model's refinements, for ablation.
//
// Every refinement the estimator applies on top of the plain roofline (FLOPs
// at the datasheet GEMM ceiling, bytes at link bandwidth, nothing
// overlapped) can be switched off one at a time, so `tune accuracy
// --ablation` can show what each one buys on the published calibration set
// (docs/costmodel.md §Ablation). The default (disabled_mask == 0) is the full
// model; the 5-argument EstimateConfig uses it.
//
// Cost: enabled() is one AND on a 64-bit mask, so threading the options
// through the hot path is free.
#ifndef MESHTUNE_COSTMODEL_MODEL_OPTIONS_H_
#define MESHTUNE_COSTMODEL_MODEL_OPTIONS_H_

#include <cstdint>
#include <string_view>
#include <vector>

namespace meshtune::costmodel {

// Values are bit positions in ModelOptions::disabled_mask; append only (tools
// may store masks), never renumber.
enum class Refinement : uint8_t {
  // GEMM efficiency falls off for small problems, F/(F + F0) (wave and
  // launch quantisation). Off: every GEMM at the ceiling × shape factor.
  kGemmSizeEfficiency = 0,
  // GEMM efficiency falls off for skinny dimensions, Π d/(d + 48) (tile
  // quantisation). Off: no shape factor.
  kGemmShapeEfficiency = 1,
  // Kernels inside a training step reach a per-generation fraction of the
  // microbenchmark ceilings (launch gaps, clocks under load). Off: 1.0.
  kTrainingKernelEfficiency = 2,
  // Collectives pay per-ring-step latency and the small-message busbw ramp.
  // Off: bytes / busbw only.
  kCollectiveRamp = 3,
  // Groups spanning NVLink domains run hierarchically (NVLink RS, network
  // collective on S/r with all NICs, NVLink AG). Off: flat ring at NIC speed.
  kHierarchicalCollectives = 4,
  // All-reduce inside an NVLink domain uses NVLink SHARP busbw (H100+).
  // Off: ring busbw.
  kNvls = 5,
  // Megatron overlaps the backward TP collectives (grad-input all-reduce /
  // reduce-scatter, SP input re-gather) with the column-parallel wgrad and
  // dgrad GEMMs. Off: exposed.
  kTpOverlap = 6,
  // DP gradient reduce / parameter gather overlapped with backward / forward
  // except the last bucket. Off: exposed.
  kDpOverlap = 7,
  // CP ring K/V exchange overlapped with the attention of the chunk in hand.
  // Off: exposed.
  kCpOverlap = 8,
  // fp8: Transformer Engine cast-transpose of GEMM inputs and output
  // gradients. Off: free casts.
  kFp8CastOverhead = 9,
  // Memory-bound elementwise work (norms, activations, residual adds, RoPE,
  // MoE permutes, embedding). Off: free.
  kElementwise = 10,
  // Output layer GEMM and the fp32 vocab-parallel cross-entropy on the last
  // stage. Off: free.
  kOutputLayer = 11,
  // Adam step streamed through HBM. Off: free.
  kOptimizerStep = 12,
  // Pipeline point-to-point sends (×vpp when interleaved). Off: free.
  kPipelineP2p = 13,
  // Transformer Engine runs the fp8 dgrad and wgrad GEMMs with the split
  // (periodically fp32-promoted) accumulator, slower than the fast-accum
  // forward, on Hopper. Off: backward at the forward rate.
  kFp8SplitAccumulator = 14,
  // Flash-attention backward reaches a lower fraction of peak than the
  // forward (FlashAttention-2). Off: backward at the forward efficiency.
  kAttentionBackwardEfficiency = 15,
  // Megatron's interleaved schedule overlaps pipeline p2p with the next
  // chunk's compute (overlap_p2p_comm). Off: exposed.
  kPipelineP2pOverlap = 16,
  // With TrainingSpec::tp_comm_overlap (Megatron --tp-comm-overlap, TE
  // userbuffers) the SP all-gathers / reduce-scatters pipeline with their
  // GEMMs, leaving 1/t exposed. Off: the flag is ignored.
  kTpCommOverlapUserbuffers = 17,
  // MoE: the busiest expert (and EP rank) gets more than the mean k·T/E
  // tokens; the step waits for it. Off: perfectly balanced routing.
  kMoeImbalance = 18,
  // Interleaved 1F1B: Megatron overlaps p2p only in the steady state
  // (overlap_p2p_comm_warmup_flush defaults to False,
  // megatron/core/model_parallel_config.py), so the warm-up forwards and
  // flush backwards each wait for their transfer; the pipeline fill and
  // drain pass pp−1 transfers each way on the critical path. Off: every
  // chunk's transfer hides behind the next chunk and the bubble pays none.
  kPipelineWarmupFlushP2p = 19,
  // flex dispatcher (DeepEP / HybridEP): one copy of a token per
  // destination node over the network, forwarded to the expert GPUs on
  // NVLink. Off: priced as the alltoall dispatcher (k copies).
  kFlexDispatcherDedup = 20,
  // With TrainingSpec::moe_ep_overlap (Megatron
  // --overlap-moe-expert-parallel-comm): combined 1F1B pairs the forward of
  // one micro-batch with the backward of another and hides each layer's
  // all-to-alls behind the partner's compute; unpaired warm-up and flush
  // steps stay exposed. Off: the flag is ignored.
  kMoeEpOverlap = 21,
  // Mamba-2's chunked SSD scan runs on the CUDA cores (Calibration::
  // ScanTime_s: a fraction of the FP32 peak), not on the tensor cores. Off:
  // timed as a 16-bit GEMM of the same FLOPs.
  kMambaScanCudaCores = 22,
  // Each layer's forward and backward take at least the host time to
  // launch its eager (not CUDA-graphed) modules (host_launch.h). Off: the
  // host is always ahead of the GPU.
  kHostLaunch = 23,
  // The bubble of a pipeline whose stages differ (logits on the last, an
  // uneven layout) is the fill and drain through the ranks other than the
  // slowest, Σ_{i≠slowest} t_i / vpp: the slowest rank runs its m
  // micro-batches back to back, the others only carry the first forward in
  // and the last backward out. Off: (pp−1)/vpp times the slowest stage.
  kPipelineBubbleOtherStages = 24,
  // With TrainingSpec::fp8_dot_product_attention (Megatron
  // --fp8-dot-product-attention) the core attention runs in FP8,
  // kFp8AttentionSpeedup times faster (compute_model.h). Off: the flag is
  // ignored.
  kFp8Attention = 25,
  // Transformer Engine's GroupedLinear (one cuBLASLt GEMM per local expert
  // on several streams) keeps Blackwell's kernel efficiency on Blackwell
  // Ultra; the fused grouped MLP (use_transformer_engine_op_fuser) reaches
  // Ultra's (DatasheetCalibration::TrainingGroupedGemmEfficiency). Off:
  // expert GEMMs at the dense GEMMs' efficiency.
  kGroupedGemmEfficiency = 26,
  kCount  // not a refinement
};

struct RefinementInfo {
  Refinement id;
  const char* name;         // snake_case, stable (CLI and JSON key)
  const char* description;  // one line
};

// Every refinement, in enum order (kCount entries).
const std::vector<RefinementInfo>& AllRefinements();

// The refinement called `name` (AllRefinements()[i].name); false if none.
bool FindRefinement(std::string_view name, Refinement* out);

struct ModelOptions {
  // Bit (1 << Refinement) set = that refinement switched off.
  uint64_t disabled_mask = 0;

  bool enabled(Refinement r) const {
    return (disabled_mask & (uint64_t{1} << static_cast<unsigned>(r))) == 0;
  }
  void Disable(Refinement r) {
    disabled_mask |= uint64_t{1} << static_cast<unsigned>(r);
  }
  void Enable(Refinement r) {
    disabled_mask &= ~(uint64_t{1} << static_cast<unsigned>(r));
  }
};

}  // namespace meshtune::costmodel

#endif  // MESHTUNE_COSTMODEL_MODEL_OPTIONS_H_
