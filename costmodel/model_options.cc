#include "costmodel/model_options.h"

namespace meshtune::costmodel {

const std::vector<RefinementInfo>& AllRefinements() {
  static const std::vector<RefinementInfo>* const kAll =
      new std::vector<RefinementInfo>{
          {Refinement::kGemmSizeEfficiency, "gemm_size",
           "GEMM efficiency falls off for small problems (F/(F+F0))"},
          {Refinement::kGemmShapeEfficiency, "gemm_shape",
           "GEMM efficiency falls off for skinny dimensions (tile "
           "quantisation)"},
          {Refinement::kTrainingKernelEfficiency, "kernel_efficiency",
           "kernels in a training step reach a per-generation fraction of "
           "the microbenchmark ceilings"},
          {Refinement::kCollectiveRamp, "collective_ramp",
           "per-step latency and small-message bus-bandwidth ramp"},
          {Refinement::kHierarchicalCollectives, "hierarchical",
           "multi-domain collectives run NVLink + network hierarchically"},
          {Refinement::kNvls, "nvls",
           "intra-domain all-reduce at NVLink SHARP bus bandwidth"},
          {Refinement::kTpOverlap, "tp_overlap",
           "backward TP collectives overlapped with column-parallel "
           "wgrad/dgrad"},
          {Refinement::kDpOverlap, "dp_overlap",
           "DP reduce/gather overlapped except the last bucket"},
          {Refinement::kCpOverlap, "cp_overlap",
           "CP ring K/V exchange overlapped with attention"},
          {Refinement::kFp8CastOverhead, "fp8_cast",
           "fp8 cast-transpose of GEMM inputs and output gradients"},
          {Refinement::kElementwise, "elementwise",
           "memory-bound norms, activations, residuals, RoPE, permutes"},
          {Refinement::kOutputLayer, "output_layer",
           "output-layer GEMM and fp32 cross-entropy on the last stage"},
          {Refinement::kOptimizerStep, "optimizer_step",
           "memory-bound Adam step"},
          {Refinement::kPipelineP2p, "pipeline_p2p",
           "pipeline point-to-point sends (x vpp interleaved)"},
          {Refinement::kFp8SplitAccumulator, "fp8_split_accumulator",
           "fp8 dgrad/wgrad GEMMs use the slower split accumulator (Hopper)"},
          {Refinement::kAttentionBackwardEfficiency, "attention_backward",
           "flash-attention backward at a lower efficiency than forward"},
          {Refinement::kPipelineP2pOverlap, "pipeline_p2p_overlap",
           "interleaved schedule overlaps p2p with the next chunk"},
          {Refinement::kTpCommOverlapUserbuffers, "tp_comm_overlap",
           "--tp-comm-overlap pipelines SP collectives with their GEMMs"},
          {Refinement::kMoeImbalance, "moe_imbalance",
           "the busiest expert gets more than the mean k*T/E tokens"},
          {Refinement::kPipelineWarmupFlushP2p, "pipeline_warmup_flush_p2p",
           "interleaved warm-up/flush p2p and pipeline fill/drain transfers "
           "exposed"},
          {Refinement::kFlexDispatcherDedup, "flex_dispatcher",
           "flex (DeepEP/HybridEP) sends one copy per destination node, "
           "forwards on NVLink"},
          {Refinement::kMoeEpOverlap, "moe_ep_overlap",
           "--overlap-moe-expert-parallel-comm hides each EP all-to-all of "
           "paired micro-batches behind the compute it is paired with"},
          {Refinement::kMambaScanCudaCores, "mamba_scan",
           "the Mamba-2 chunked scan runs at a fraction of the FP32 "
           "CUDA-core peak, not the tensor-core GEMM rate"},
          {Refinement::kHostLaunch, "host_launch",
           "layers wait for the host to launch their modules outside CUDA "
           "graphs"},
          {Refinement::kPipelineBubbleOtherStages, "bubble_other_stages",
           "the pipeline fill and drain run through the other ranks' "
           "stages, not pp-1 copies of the slowest"},
          {Refinement::kFp8Attention, "fp8_attention",
           "--fp8-dot-product-attention runs the core attention in FP8"},
          {Refinement::kGroupedGemmEfficiency, "grouped_gemm",
           "TE's multi-stream grouped expert GEMMs keep Blackwell's "
           "efficiency on Blackwell Ultra; the fused grouped MLP does not"},
      };
  return *kAll;
}

bool FindRefinement(std::string_view name, Refinement* out) {
  for (const RefinementInfo& r : AllRefinements()) {
    if (name == r.name) {
      if (out != nullptr) *out = r.id;
      return true;
    }
  }
  return false;
}

}  // namespace meshtune::costmodel
