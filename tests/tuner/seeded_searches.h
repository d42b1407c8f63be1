// Test helper: a results database holding known searches, candidates and
// training runs, written through the Store API with a fixed timestamp so
// that `tune db searches|runs` output and link checks can be compared
// exactly.
#ifndef MESHTUNE_TESTS_TUNER_SEEDED_SEARCHES_H_
#define MESHTUNE_TESTS_TUNER_SEEDED_SEARCHES_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "results/store.h"
#include "search_spaces/parallel_config.h"

namespace meshtune::tuner::testing {

// 2023-11-14 22:13:20 UTC.
inline constexpr int64_t kSeedTime = 1700000000;

// Search 1: gpt-tiny on 2 x local, gbs 4, seq 64, three candidates:
//   rank 1  dp2                 fits, 12.5 ms
//   rank 2  tp2 sp              fits, 20 ms
//   rank 3  tp4                 infeasible ("out of memory")
// Search 2: a model that is not a preset ("my-model"), one candidate.
struct SeededSearches {
  std::string path;
  int64_t search1 = 0, search2 = 0;
  std::vector<int64_t> candidates1;  // ids of ranks 1, 2, 3 of search 1
  search_spaces::ParallelConfig rank1, rank2, rank3;
};

inline results::CandidateRecord SeedCandidate(
    int64_t rank, const search_spaces::ParallelConfig& c, double step_s,
    bool fits) {
  results::CandidateRecord r;
  r.rank = rank;
  r.config = c;
  r.fits = fits;
  r.infeasible_reason = fits ? "" : "out of memory";
  r.step_time_s = step_s;
  r.tokens_per_s = fits ? 4 * 64 / step_s : 0;
  r.calibration = "datasheet";
  return r;
}

inline SeededSearches SeedSearches(const std::string& path) {
  SeededSearches s;
  s.path = path;
  auto store = results::Store::Open(path);
  EXPECT_TRUE(store.ok()) << store.status().message();
  if (!store.ok()) return s;
  const results::Provenance prov{"0.1.0", "abc", kSeedTime};
  s.rank1.dp = 2;
  s.rank2.tp = 2;
  s.rank2.sp = true;
  s.rank3.tp = 4;
  results::SearchRecord search;
  search.model = "gpt-tiny";
  search.gpu = "local";
  search.gpus = 2;
  search.gpus_per_node = 2;
  search.gbs = 4;
  search.seq_length = 64;
  search.precision = "bf16";
  search.arguments = "tune search --model gpt-tiny --gpus 2 --gpu local";
  search.evaluated = 12;
  search.feasible = 2;
  search.elapsed_s = 0.01;
  auto id1 = (*store)->PutSearch(search,
                                 {SeedCandidate(1, s.rank1, 0.0125, true),
                                  SeedCandidate(2, s.rank2, 0.020, true),
                                  SeedCandidate(3, s.rank3, 0.030, false)},
                                 prov);
  EXPECT_TRUE(id1.ok()) << id1.status().message();
  s.search1 = id1.ok() ? id1.value() : 0;
  search.model = "my-model";
  search.gpu = "a100-80g";
  search.gpus = 8;
  search.gpus_per_node = 8;
  search.gbs = 8;
  search.seq_length = 128;
  search.evaluated = 3;
  search.feasible = 1;
  auto id2 = (*store)->PutSearch(
      search, {SeedCandidate(1, search_spaces::ParallelConfig(), 1.5, true)},
      prov);
  EXPECT_TRUE(id2.ok()) << id2.status().message();
  s.search2 = id2.ok() ? id2.value() : 0;
  auto candidates = (*store)->GetCandidates(s.search1);
  EXPECT_TRUE(candidates.ok());
  if (candidates.ok()) {
    for (const auto& c : *candidates) s.candidates1.push_back(c.id);
  }
  return s;
}

// A measured run of `config` (gpt-tiny, gbs 4, seq 64) stored against
// `candidate_id` (0 = unlinked).
inline void SeedRun(const std::string& path, int64_t candidate_id,
                    const search_spaces::ParallelConfig& config,
                    double median_s) {
  auto store = results::Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().message();
  results::TrainingRun run;
  run.candidate_id = candidate_id;
  run.model = "gpt-tiny";
  run.config = config;
  run.gbs = 4;
  run.seq_length = 64;
  run.steps = 3;
  run.step_time_median_s = median_s;
  run.step_time_min_s = median_s;
  run.step_time_p99_s = median_s;
  run.tokens_per_s = 4 * 64 / median_s;
  run.final_loss = 5.25;
  auto id = (*store)->PutTrainingRun(run, {"0.1.0", "abc", kSeedTime});
  ASSERT_TRUE(id.ok()) << id.status().message();
}

}  // namespace meshtune::tuner::testing

#endif  // MESHTUNE_TESTS_TUNER_SEEDED_SEARCHES_H_
