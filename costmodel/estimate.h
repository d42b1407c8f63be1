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

struct MemoryBreakdown {
  double weights_bytes = 0;      // bf16/fp16 model parameters
  double gradients_bytes = 0;    // fp32 main gradients (DDP buffer)
  double optimizer_bytes = 0;    // fp32 master weights + Adam m and v
  double activations_bytes = 0;  // saved for backward, peak over the schedule
  double other_bytes = 0;        // logits, embedding buffers, workspace
  // (the cluster's memory_reserve_gib is subtracted from
  // Estimate::memory_capacity_bytes instead of being counted here)
  double total_bytes() const {
    return weights_bytes + gradients_bytes + optimizer_bytes +
           activations_bytes + other_bytes;
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
  double total_s() const {
    return compute_s + recompute_s + tp_comm_s + cp_comm_s + ep_comm_s +
           pp_comm_s + pp_bubble_s + dp_comm_s + optimizer_s;
  }
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
