// What `tune validate` learns: efficiency factors for this machine
// (costmodel/fitted_calibration.h) refitted from every measured training
// run in the results database that is linked to a search candidate made for
// this machine (`tune validate` runs, and `tune train --config` /
// `--from-search` runs of searches with --gpu local), stored per (machine,
// base calibration), and applied by every later search on the machine
// (ChooseCalibration, tuner/machine/calibration_source.h).
#ifndef MESHTUNE_TUNER_MACHINE_LEARNED_FACTORS_H_
#define MESHTUNE_TUNER_MACHINE_LEARNED_FACTORS_H_

#include <memory>
#include <optional>
#include <string>

#include "costmodel/calibration.h"
#include "costmodel/fitted_calibration.h"
#include "results/store.h"
#include "search_spaces/cluster_spec.h"
#include "search_spaces/status.h"

namespace meshtune::tuner {

// The fit over the runs of `hardware_id` for searches on `cluster` (by
// preset name), against the base calibration `base` (not already fitted).
// Runs whose model no longer resolves are skipped. nullopt when there is no
// usable run.
StatusOr<std::optional<costmodel::FitResult>> FitMachineFactors(
    const results::Store& store, const search_spaces::ClusterSpec& cluster,
    const costmodel::Calibration& base, const std::string& hardware_id);

// `base` wrapped with the newest stored factors of (hardware_id,
// base->Name()), or `base` itself when none are stored.
StatusOr<std::unique_ptr<costmodel::Calibration>> ApplyStoredFactors(
    const results::Store& store, std::unique_ptr<costmodel::Calibration> base,
    const std::string& hardware_id);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_MACHINE_LEARNED_FACTORS_H_
