// The search driver: enumerate valid configurations, estimate each one with
// the cost model, keep the feasible ones ranked and count the rest by reason.
#ifndef MESHTUNE_TUNER_SEARCH_SEARCH_DRIVER_H_
#define MESHTUNE_TUNER_SEARCH_SEARCH_DRIVER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/estimate.h"
#include "search_spaces/cluster_spec.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/space/search_space.h"
#include "search_spaces/status.h"
#include "search_spaces/training_spec.h"

namespace meshtune::tuner {

struct SearchResult {
  // Every feasible estimate, best first (tuner/search/ranking.h order).
  std::vector<costmodel::Estimate> ranked;
  // Configurations considered: feasible + every rejected one.
  int64_t evaluated = 0;
  // Cost-model calls made (configurations that passed the rules).
  int64_t estimated = 0;
  int64_t feasible = 0;
  // Rejections by reason code: the enumeration's rule codes merged with the
  // cost model's ("out_of_memory").
  std::map<std::string, int64_t> rejected;
  // Wall time of enumeration + estimation + ranking (steady clock), seconds.
  double elapsed_s = 0;
  // Among the candidates the cost model rejected, the one that needs the
  // least memory per GPU: the "how far off are we" answer when none fits.
  std::optional<costmodel::Estimate> smallest_rejected;
  // Every estimate the cost model rejected (out of memory), in enumeration
  // order; filled only with SearchOptions::keep_out_of_memory (the HTML
  // report plots them greyed), since a large search rejects ~10^5.
  std::vector<costmodel::Estimate> out_of_memory;

  // `rejected` sorted by count (descending), then by reason.
  std::vector<std::pair<std::string, int64_t>> RejectedByCount() const;
};

// Called after each configuration with (evaluated so far, evaluated in
// all); the enumeration's pruned configurations count as done up front.
using SearchProgress = std::function<void(int64_t done, int64_t total)>;

struct SearchOptions {
  bool keep_out_of_memory = false;  // fill SearchResult::out_of_memory
  SearchProgress on_progress;       // null: no progress reports
};

SearchResult RunSearch(const search_spaces::ModelSpec& model,
                       const search_spaces::ClusterSpec& cluster,
                       const search_spaces::TrainingSpec& training,
                       const search_spaces::SearchSpace& space,
                       const costmodel::Calibration& calibration,
                       const SearchOptions& options = {});

// The input error for a search that found nothing feasible (Infeasible, exit
// 2): either the smallest memory need among the out-of-memory candidates
// against the usable memory, or the rules that eliminated everything.
Status NoFeasibleConfigStatus(const search_spaces::ModelSpec& model,
                              const search_spaces::ClusterSpec& cluster,
                              const search_spaces::TrainingSpec& training,
                              const SearchResult& result);

// "out_of_memory 123, tp_not_dividing_heads 45" (count order).
std::string FormatRejections(const SearchResult& result);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_SEARCH_SEARCH_DRIVER_H_
