// SearchLink: which search candidate a configuration came from, so that a
// measured training run is stored with the candidate's id next to the cost
// model's prediction (results/store.h, TrainingRun.candidate_id, view
// predicted_vs_measured) -- the way a Megatron/NeMo user keeps the launch
// config and its expected step time together.
//
//   tune search ... --out best.yaml   writes the link as the `search:` section
//                                     (tuner/render/report_yaml.h)
//   tune train --config best.yaml     reads it
//   (tuner/inputs/train_config_yaml.h) and
//                                     checks it against its database here
//   tune train --from-search ID       builds the run from the database
//                                     (FindCandidate) and is linked by
//                                     construction
//
// A link only counts when the run records into the database the search was
// recorded in, and trains exactly what was predicted: the same model, global
// batch size, sequence length and parallel config (CheckRunLink). Anything
// else is recorded unlinked, with one warning line saying why.
#ifndef MESHTUNE_TUNER_INPUTS_SEARCH_LINK_H_
#define MESHTUNE_TUNER_INPUTS_SEARCH_LINK_H_

#include <cstdint>
#include <string>

#include "engine/train_config.h"
#include "results/store.h"
#include "search_spaces/status.h"

namespace meshtune::tuner {

// The `search:` section of a --out file.
struct SearchLink {
  std::string db;                    // absolute path of the results database
  int64_t search_id = 0;             // searches.id
  int64_t rank = 0;                  // 1 = the search's best candidate
  int64_t candidate_id = 0;          // candidates.id
  double predicted_step_time_s = 0;  // the cost model's step time
};

// A search and one of its candidates as stored in the database at `db`.
struct StoredCandidate {
  std::string db;  // absolute path
  results::SearchRecord search;
  results::CandidateRecord candidate;
};

// The link to `c` (the values a --out file carries).
SearchLink MakeSearchLink(const StoredCandidate& c);

// `path` made absolute and normal ("./t.db" -> "/work/t.db"), so that links
// compare and print the same whichever directory a command ran in.
std::string AbsoluteDbPath(const std::string& path);

// Whether a run may be stored against its link, and why not.
struct LinkCheck {
  bool linked = false;
  std::string reason;      // when !linked: one clause, no trailing period
  StoredCandidate stored;  // when linked: the candidate as stored
};

// Checks `run` against `link` before training. `store` is the database the
// run records into (null when there is none); `no_db` says --no-db made it
// null. Linked only when that database is the link's, holds the candidate
// under the link's search and rank, and the search's model, gbs and seq
// length and the candidate's parallel config equal the run's.
LinkCheck CheckRunLink(const results::Store* store, bool no_db,
                       const SearchLink& link, const engine::TrainConfig& run);

// "tune: warning: this run is not linked to search 3 rank 1 (candidate 12):
// <reason>" (no newline).
std::string NotLinkedWarning(const SearchLink& link, const std::string& reason);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_INPUTS_SEARCH_LINK_H_
