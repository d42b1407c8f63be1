// The inputs of a recorded search, read back from the results database, for
// the commands that take `--search ID` instead of model and cluster flags
// (`tune compare --search ID --ranks 1,2`, `tune launch --search ID`).
//
// The search row gives the model, cluster preset, GPUs, GPUs per node,
// batch, sequence length and precision; its command line (results_db.cc
// DescribeFlags) gives --tokens and the switches that have no column. The
// model is resolved again by name (or by the --model argument the search
// ran with, for a YAML file), so its architecture is that of this build.
#ifndef MESHTUNE_TUNER_STORE_STORED_SEARCH_H_
#define MESHTUNE_TUNER_STORE_STORED_SEARCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "results/store.h"
#include "search_spaces/status.h"
#include "tuner/inputs/inputs.h"

namespace meshtune::tuner {

// The flags the search ran with, as far as they define the problem (model,
// cluster, batch, precision, tokens, switches; no pins).
InputFlags FlagsOfStoredSearch(const results::SearchRecord& search);

// FlagsOfStoredSearch resolved; the --model the search was typed with is
// tried when the stored model name no longer resolves.
StatusOr<Inputs> InputsOfStoredSearch(const results::SearchRecord& search);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_STORE_STORED_SEARCH_H_
