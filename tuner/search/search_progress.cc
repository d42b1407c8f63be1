#include "tuner/search/search_progress.h"

#include "tuner/io/terminal.h"

namespace meshtune::tuner {

SearchResult RunSearchWithProgress(const Inputs& in,
                                   const costmodel::Calibration& calibration,
                                   std::ostream& err, bool quiet) {
  ProgressBar bar(err, "searching", 0, DefaultProgressOptions(err, quiet));
  SearchOptions options;
  options.on_progress = [&bar](int64_t done, int64_t total) {
    bar.Update(done, total);
  };
  SearchResult result = RunSearch(in.model, in.cluster, in.training, in.space,
                                  calibration, options);
  bar.Finish();
  return result;
}

}  // namespace meshtune::tuner
