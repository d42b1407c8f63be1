// A search with the terminal's progress bar: what `tune search` and `tune
// launch` (when it searches) run. The bar counts configurations evaluated
// on stderr, appears only on a terminal after half a second and never with
// --quiet (tuner/io/terminal.h).
#ifndef MESHTUNE_TUNER_SEARCH_SEARCH_PROGRESS_H_
#define MESHTUNE_TUNER_SEARCH_SEARCH_PROGRESS_H_

#include <ostream>

#include "costmodel/calibration.h"
#include "tuner/inputs/inputs.h"
#include "tuner/search/search_driver.h"

namespace meshtune::tuner {

SearchResult RunSearchWithProgress(const Inputs& in,
                                   const costmodel::Calibration& calibration,
                                   std::ostream& err, bool quiet);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_SEARCH_SEARCH_PROGRESS_H_
