// The cost model's entry point: Estimate one configuration.
//
// Pure function of its inputs; thread-safe; no allocation-heavy work, since the
// search calls it for every candidate (the full 175B/1024-GPU space must be
// searched in under a second). The calibration seam (datasheet curves now,
// measured tables later) is the Calibration object.
#ifndef MESHTUNE_COSTMODEL_COST_MODEL_H_
#define MESHTUNE_COSTMODEL_COST_MODEL_H_

#include <cstdint>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/estimate.h"
#include "costmodel/memory_model.h"
#include "costmodel/model_layers.h"
#include "costmodel/model_options.h"
#include "costmodel/model_stats.h"
#include "search_spaces/cluster_spec.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/pipeline_layout.h"
#include "search_spaces/training_spec.h"

namespace meshtune::costmodel {

// REQUIRES: config passed search_spaces::CheckConfig (structurally valid).
Estimate EstimateConfig(const search_spaces::ModelSpec& model,
                        const search_spaces::ClusterSpec& cluster,
                        const search_spaces::TrainingSpec& training,
                        const search_spaces::ParallelConfig& config,
                        const Calibration& calibration);

// The same with refinements switched off by `options` (ablation; see
// model_options.h). The 5-argument form is this with ModelOptions().
Estimate EstimateConfig(const search_spaces::ModelSpec& model,
                        const search_spaces::ClusterSpec& cluster,
                        const search_spaces::TrainingSpec& training,
                        const search_spaces::ParallelConfig& config,
                        const Calibration& calibration,
                        const ModelOptions& options);

// Waiting for a core when ranks share CPU cores (`--gpu local`: the CPU
// engine runs one single-threaded process per rank, and `--gpus` may exceed
// the cores). The kernel time-slices the cores among the runnable ranks;
// a rank idling in the pipeline bubble sleeps (the engine's MPI wait,
// engine/comm/mpi_communicator.cc, spins 1 ms, then sleeps) and leaves its
// core to the others. So a step takes at least the CPU time all the node's
// ranks need spread over the cores, and at least its time with a core per
// rank:
//   core_sharing_s = max(0, ranks_per_node / host_cores · mean_busy_s −
//   step_s)
// step_s: the step with a core per rank; mean_busy_s: a rank's busy time
// averaged over the pipeline stages, m · Σ_stages (one micro-batch's
// work) / pp plus the per-rank p2p, data-parallel and optimizer time (with
// equal stages: step_s − bubble). 0 when ranks_per_node <= host_cores or
// host_cores is 0 (GPUs). On the 2-core VM of docs/validate.md gpt-tiny
// dp4 (4 ranks) measured 0.28 s against 0.12 s with a core per rank, pp4
// with one micro-batch (one rank busy at a time) 0.41 against 0.38 s.
double CoreSharing_s(double step_s, double mean_busy_s, int64_t ranks_per_node,
                     int64_t host_cores);

// EstimateConfig for many configurations of one problem: what does not
// depend on the configuration (the layer list and its per-kind prefix
// counts, the parameter counts per padded vocabulary, the pipeline layout
// and its distinct stages per (pp, vpp, first, last)) is prepared once.
// Same results as EstimateConfig (which builds one per call). The
// referenced model, cluster, training and calibration must outlive it; not
// thread-safe (it caches ModelStats per padded vocabulary): one per thread.
class Estimator {
 public:
  Estimator(const search_spaces::ModelSpec& model,
            const search_spaces::ClusterSpec& cluster,
            const search_spaces::TrainingSpec& training,
            const Calibration& calibration,
            const ModelOptions& options = ModelOptions());

  // REQUIRES: config passed search_spaces::CheckConfig. With
  // `time_out_of_memory` false, a configuration that does not fit returns
  // after the memory model: config, memory, capacity, fits and
  // infeasible_reason are set, every time and throughput field is 0 (most
  // of a large search does not fit; its time is not needed to reject it).
  Estimate operator()(const search_spaces::ParallelConfig& config,
                      bool time_out_of_memory = true) const;

 private:
  struct StagePlan {
    search_spaces::PipelineLayout layout;
    std::vector<StageClass> stages;  // DistinctStages(layout)
  };
  // ModelStats for `padded_vocab` (a function of tp) at the positions the
  // model and the training's sequence length need.
  const ModelStats& StatsFor(int64_t padded_vocab) const;
  const StagePlan& PlanFor(const search_spaces::ParallelConfig& config) const;
  // StageStaticsOf for every stage of `plan` (same order).
  const std::vector<StageStatics>& StaticsFor(
      const search_spaces::ParallelConfig& config, const StagePlan& plan,
      const ModelStats& stats) const;

  const search_spaces::ModelSpec& model_;
  const search_spaces::ClusterSpec& cluster_;
  const search_spaces::TrainingSpec& training_;
  const Calibration& calibration_;
  const ModelOptions options_;
  const ModelLayers layers_;
  // ModelStats per padded vocabulary; a search sees a few.
  mutable std::vector<std::pair<int64_t, ModelStats>> stats_;
  // Per (pp, vpp, layout_first_layers, layout_last_layers).
  mutable std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, StagePlan>
      plans_;
  // Per (pp, vpp, layout_first_layers, layout_last_layers, tp, ep, etp); the
  // padded vocabulary follows from tp and the positions from the training.
  mutable std::map<
      std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>,
      std::vector<StageStatics>>
      statics_;
};

}  // namespace meshtune::costmodel

#endif  // MESHTUNE_COSTMODEL_COST_MODEL_H_
