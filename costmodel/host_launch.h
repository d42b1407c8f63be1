// Host launches: the time the host needs to launch one layer's kernels
// eagerly, which bounds the layer from below when its GPU work is shorter.
//
// PyTorch launches Megatron's kernels one by one from Python; a layer whose
// GPU work is shorter than its launches leaves the GPU idle (small MoE
// experts at mbs 1, Qwen3-30B-A3B). Modules captured in a CUDA graph
// (TrainingSpec::cuda_graphs) launch as one graph replay, free at this
// scale. Per layer, one micro-batch:
//   host_fwd = kHostBlockLaunch_s per eager attention (or MLA) mixer,
//              Mamba mixer and dense MLP
//            + kHostBlockLaunch_s per eager router and per eager
//              dispatcher preprocess (MoE layers)
//            + kHostExpertLaunch_s · E/ep (each local expert's GEMM
//              inputs, fp8 quantisation and split bookkeeping; graphed
//              only with the whole MoE block, which needs padded expert
//              capacity: the dropless token counts are dynamic)
//   host_bwd = kHostBackwardFactor · host_fwd, and kHostDelayedWgrad ·
//              host_fwd more under the EP overlap (below)
// Each phase lasts max(GPU work, host launches). The alltoall and
// allgather dispatchers of a dropless MoE layer also wait on the host for
// the per-expert token counts (the all-to-all split sizes, copied to the
// host before the dispatch): the GPU drains, and the launches after the
// sync, kHostSync_s, add to the forward whatever its length. The flex
// dispatcher (DeepEP, HybridEP) computes its layout on the device and the
// rows that ran it need no such term; padded capacity has static shapes.
// A full-iteration graph (--cuda-graph-scope full_iteration, padded expert
// capacity) makes all of it zero. The EP overlap
// (--overlap-moe-expert-parallel-comm with --delay-wgrad-compute, what the
// recipes set together) runs each layer as separate schedule nodes
// (attention, dispatch, experts, combine; megatron/core/pipeline_parallel/
// combined_1f1b.py), each with its own autograd call, stream switch and
// events, and launches the weight gradients in a pass of their own
// (TE's backward_dw): one more launch pass of the layer's eager modules in
// backward. NVIDIA turned it off in its Qwen3-235B B200 recipe "due to CPU
// overhead" (Megatron-Bridge PR #1760); on H100 the Qwen3-30B-A3B recipes
// of 25.11 and 26.02 that ran it take 1.75x the time per sequence of the
// 26.02.01 one without it (docs/costmodel.md §4). The constants are fitted on
// the published Qwen3-30B-A3B, DeepSeek-V3 and Nemotron 3 Nano rows with their
// recipes' CUDA-graph scopes and checked on the untuned B200 runs
// (docs/costmodel.md §4, "Host launches").
#ifndef MESHTUNE_COSTMODEL_HOST_LAUNCH_H_
#define MESHTUNE_COSTMODEL_HOST_LAUNCH_H_

#include "search_spaces/cuda_graphs.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/parallel_config.h"

namespace meshtune::costmodel {

struct HostLaunch {
  double fwd_s = 0;
  double bwd_s = 0;
  // Forward launches the GPU always waits for, whatever the layer's GPU
  // time: those after the host synchronisation on the token counts.
  double sync_fwd_s = 0;
};

// One micro-batch of one layer of `kind` under `c`; `ep_overlap`: the
// layer runs in the EP overlap's combined 1F1B (TrainingSpec::moe_ep_overlap
// with ep > 1); `host_factor`: the host CPU's launch time relative to the
// x86 hosts the constants below were fitted on
// (ClusterSpec::host_launch_factor; 1.5 on Grace), which scales every term.
HostLaunch LayerHostLaunch(const search_spaces::ModelSpec& model,
                           const search_spaces::ParallelConfig& c,
                           search_spaces::LayerKind kind,
                           const search_spaces::CudaGraphs& graphs,
                           bool ep_overlap, double host_factor = 1.0);

// Seconds the GPU waits for the host in one phase: the launches beyond the
// phase's GPU work (`gpu_s`, compute and exposed communication).
inline double HostWait_s(double host_s, double gpu_s) {
  return host_s > gpu_s ? host_s - gpu_s : 0.0;
}

// Fitted constants (seconds on an x86 DGX host, per eagerly launched module).
inline constexpr double kHostBlockLaunch_s = 0.7e-3;
inline constexpr double kHostExpertLaunch_s = 0.12e-3;
inline constexpr double kHostBackwardFactor = 2.0;
inline constexpr double kHostSync_s = 1.0e-3;
inline constexpr double kHostDelayedWgrad = 1.0;

}  // namespace meshtune::costmodel

#endif  // MESHTUNE_COSTMODEL_HOST_LAUNCH_H_
