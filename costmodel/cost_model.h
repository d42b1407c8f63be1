// The cost model's entry point: Estimate one configuration.
//
// Pure function of its inputs; thread-safe; no allocation-heavy work, since the
// search calls it for every candidate (the full 175B/1024-GPU space must be
// searched in under a second). The calibration seam (datasheet curves now,
// measured tables later) is the Calibration object.
#ifndef MESHTUNE_COSTMODEL_COST_MODEL_H_
#define MESHTUNE_COSTMODEL_COST_MODEL_H_

#include "costmodel/calibration.h"
#include "costmodel/estimate.h"
#include "costmodel/model_options.h"
#include "search_spaces/cluster_spec.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/parallel_config.h"
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

}  // namespace meshtune::costmodel

#endif  // MESHTUNE_COSTMODEL_COST_MODEL_H_
