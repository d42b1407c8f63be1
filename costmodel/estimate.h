// Estimate: the cost model's answer for one configuration (its JSON form:
// docs/design.md §5).
//
// Memory is per GPU on the most loaded rank (pipeline stage 0 unless the last
// stage's logits dominate); time is per optimizer step. Time parts are the
// exposed (not overlapped) time of each part, so they add up to step_time_s;
// memory parts add up to the total.
#ifndef MESHTUNE_COSTMODEL_ESTIMATE_H_
#define MESHTUNE_COSTMODEL_ESTIMATE_H_

#include <string>

#include "search_spaces/parallel_config.h"

namespace meshtune::costmodel {

// Memory of one GPU, in bytes, split the way it is measured
// (docs/sources.md §4; docs/costmodel.md "Memory"):
//  - what PyTorch's caching allocator hands out, whose peak is
//    torch.cuda.max_memory_allocated() (allocated_bytes());
//  - what the allocator holds from the driver on top of that
//    (fragmentation_bytes; reserved_bytes() = max_memory_reserved());
//  - what the process uses outside PyTorch (CUDA context, NCCL buffers).
// The cost model fills the allocated terms (costmodel/memory_model.h
// StageMemory) and, where it accounts for them instead of the cluster's
// memory_reserve_gib, the other three (AddMemoryBesidesModel).
struct MemoryBreakdown {
  // ---- Allocated by PyTorch (torch.cuda.max_memory_allocated).
  double weights_bytes = 0;      // model parameters (bf16/fp16) + TE's
                                 // quantised weight copies (FP8/FP4 recipes)
  double gradients_bytes = 0;    // main-grad buffer (fp32, or bf16 with
                                 // --grad-reduce-in-bf16)
  double optimizer_bytes = 0;    // fp32 master weights + Adam m and v
  double activations_bytes = 0;  // saved for backward, peak over the schedule
  // Transients at the peak (backward of the output layer: logits and the
  // output layer's weight-gradient buffer; of the embedding; of the largest
  // layer) and the first/last stage's small buffers (token ids, final norm).
  double other_bytes = 0;
  // Persistent library buffers allocated through PyTorch: Transformer
  // Engine's cached "dummy" weight gradients (one per distinct linear weight
  // shape, in the parameter dtype, with gradient-accumulation fusion; TE >=
  // 2.3, grouped GEMM >= 2.10: transformer_engine/pytorch/module/base.py
  // get_dummy_wgrad) and the cuBLAS workspaces of PyTorch and TE.
  double workspace_bytes = 0;

  // ---- Besides the allocated peak (AddMemoryBesidesModel; 0 until added).
  // Caching-allocator blocks reserved but not allocated at the peak
  // (max_memory_reserved − max_memory_allocated).
  double fragmentation_bytes = 0;
  // Outside PyTorch: the CUDA context with its loaded kernels, and NCCL's
  // per-communicator channel buffers.
  double cuda_context_bytes = 0;
  double nccl_bytes = 0;

  // torch.cuda.max_memory_allocated() predicted for this GPU.
  double allocated_bytes() const {
    return weights_bytes + gradients_bytes + optimizer_bytes +
           activations_bytes + other_bytes + workspace_bytes;
  }
  // torch.cuda.max_memory_reserved() predicted for this GPU.
  double reserved_bytes() const {
    return allocated_bytes() + fragmentation_bytes;
  }
  // What must fit in Estimate::memory_capacity_bytes: everything above.
  // (While the besides-terms are 0, the cluster's memory_reserve_gib stands
  // for them and is subtracted from the capacity instead.)
  double total_bytes() const {
    return reserved_bytes() + cuda_context_bytes + nccl_bytes;
  }
  // Everything besides weights, gradients, optimizer and activations (other
  // buffers, workspaces, fragmentation, context, NCCL): the "other" of the
  // reports, so their parts add up to total_bytes().
  double rest_bytes() const {
    return total_bytes() - weights_bytes - gradients_bytes - optimizer_bytes -
           activations_bytes;
  }
};

struct TimeBreakdown {
  double compute_s = 0;    // forward + backward GEMMs, attention, elementwise
  double recompute_s = 0;  // extra forward work of activation recompute
  double tp_comm_s = 0;    // exposed TP/SP collectives
  double cp_comm_s = 0;    // exposed context-parallel K/V exchange
  double ep_comm_s = 0;    // exposed expert all-to-all
  double pp_comm_s = 0;    // exposed pipeline point-to-point
  double pp_bubble_s = 0;  // pipeline fill and drain
  double dp_comm_s = 0;    // exposed gradient reduce / parameter gather
  double optimizer_s = 0;  // optimizer step (memory bound)
  double host_s = 0;       // GPU idle while the host launches eager kernels
  // More ranks than CPU cores (`--gpu local`): the time the ranks wait for
  // a core beyond the terms above (CoreSharing_s, cost_model.h).
  double core_sharing_s = 0;
  double total_s() const {
    return compute_s + recompute_s + tp_comm_s + cp_comm_s + ep_comm_s +
           pp_comm_s + pp_bubble_s + dp_comm_s + optimizer_s + host_s +
           core_sharing_s;
  }
};

// The exposed time terms of a TimeBreakdown, in report order, with the names
// every report uses for them (JSON "time_s" keys, the table's rows, compare's
// terms): the one list of them.
struct TimeTerm {
  const char* name;
  double TimeBreakdown::*seconds;
};
inline constexpr TimeTerm kTimeTerms[] = {
    {"compute", &TimeBreakdown::compute_s},
    {"recompute", &TimeBreakdown::recompute_s},
    {"tp_comm", &TimeBreakdown::tp_comm_s},
    {"cp_comm", &TimeBreakdown::cp_comm_s},
    {"ep_comm", &TimeBreakdown::ep_comm_s},
    {"pp_comm", &TimeBreakdown::pp_comm_s},
    {"pp_bubble", &TimeBreakdown::pp_bubble_s},
    {"dp_comm", &TimeBreakdown::dp_comm_s},
    {"optimizer", &TimeBreakdown::optimizer_s},
    {"host_launch", &TimeBreakdown::host_s},
    {"core_sharing", &TimeBreakdown::core_sharing_s},
};

struct Estimate {
  search_spaces::ParallelConfig config;
  bool fits = false;
  // "" when it fits; otherwise a reason code ("out_of_memory").
  std::string infeasible_reason;
  MemoryBreakdown memory;
  double memory_capacity_bytes = 0;  // usable HBM per GPU after the reserve
  TimeBreakdown time;

  double step_time_s = 0;
  double tokens_per_s = 0;
  double tokens_per_s_per_gpu = 0;
  double model_flops_per_step = 0;     // Megatron num_floating_point_operations
  double hardware_flops_per_step = 0;  // model FLOPs + recompute
  double model_tflops_per_gpu = 0;
  double mfu = 0;            // fraction of peak, model FLOPs
  double hfu = 0;            // fraction of peak, hardware FLOPs
  double days_to_train = 0;  // for TrainingSpec::train_tokens
  // "datasheet" or "measured:<hardware id>".
  std::string calibration = "datasheet";
};

}  // namespace meshtune::costmodel

#endif  // MESHTUNE_COSTMODEL_ESTIMATE_H_
