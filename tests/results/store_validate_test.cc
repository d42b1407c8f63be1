// `tune validate` rows of the results store: a validation with its
// candidates' outcomes round-trips (optional values as NULL), rows must name
// existing candidates, and the newest fitted factors of a (machine, base
// calibration) win.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "results/store.h"

namespace meshtune::results {
namespace {

Provenance Prov(int64_t t) { return {"0.1.0", "abc123", t}; }

std::unique_ptr<Store> OpenMemory() {
  StatusOr<std::unique_ptr<Store>> store = Store::Open(":memory:");
  EXPECT_TRUE(store.ok()) << store.status().message();
  return std::move(store).value();
}

// A search with two candidates; returns their ids through `ids`.
int64_t PutTwoCandidates(Store& store, std::vector<int64_t>* ids) {
  SearchRecord s;
  s.model = "gpt-tiny";
  s.gpu = "local";
  s.gpus = 2;
  s.gbs = 8;
  s.seq_length = 128;
  s.precision = "bf16";
  CandidateRecord a, b;
  a.rank = 1;
  a.config.tp = 2;
  a.step_time_s = 0.38;
  b.rank = 2;
  b.config.dp = 2;
  b.step_time_s = 0.39;
  StatusOr<int64_t> id = store.PutSearch(s, {a, b}, Prov(1));
  EXPECT_TRUE(id.ok()) << id.status().message();
  auto cands = store.GetCandidates(*id);
  EXPECT_TRUE(cands.ok());
  for (const CandidateRecord& c : *cands) ids->push_back(c.id);
  return *id;
}

TEST(StoreValidateTest, ValidationRoundTrips) {
  auto store = OpenMemory();
  std::vector<int64_t> ids;
  const int64_t search = PutTwoCandidates(*store, &ids);
  ASSERT_EQ(ids.size(), 2u);
  ValidationRecord v;
  v.search_id = search;
  v.hardware_id = "cpu-abc";
  v.steps = 8;
  v.measured = 1;
  v.mape_pct = 12.5;  // spearman, top1_loss_pct stay NULL
  v.measured_best_candidate_id = ids[1];
  ValidationRunRecord failed, ok;
  failed.candidate_id = ids[0];
  failed.reason = "top 1";
  failed.status = "failed";
  failed.error = "killed by signal 9 (Killed)";
  failed.predicted_step_s = 0.38;
  failed.wall_s = 0.1;
  ok.candidate_id = ids[1];
  ok.reason = "top 2";
  ok.status = "ok";
  ok.predicted_step_s = 0.39;
  ok.measured_step_s = 0.45;
  ok.wall_s = 4.5;
  StatusOr<int64_t> id = store->PutValidation(v, {failed, ok}, Prov(7));
  ASSERT_TRUE(id.ok()) << id.status().message();

  auto list = store->ListValidations();
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_EQ(list->size(), 1u);
  const ValidationRecord& got = (*list)[0];
  EXPECT_EQ(got.id, *id);
  EXPECT_EQ(got.search_id, search);
  EXPECT_EQ(got.hardware_id, "cpu-abc");
  EXPECT_EQ(got.steps, 8);
  EXPECT_FALSE(got.spearman.has_value());
  EXPECT_EQ(*got.mape_pct, 12.5);
  EXPECT_FALSE(got.top1_loss_pct.has_value());
  EXPECT_FALSE(got.top1_is_measured_best);
  EXPECT_EQ(got.measured_best_candidate_id, ids[1]);
  EXPECT_EQ(got.provenance.created_unix_s, 7);

  auto runs = store->GetValidationRuns(*id);
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].status, "failed");
  EXPECT_EQ((*runs)[0].error, "killed by signal 9 (Killed)");
  EXPECT_FALSE((*runs)[0].measured_step_s.has_value());
  EXPECT_EQ((*runs)[0].training_run_id, 0);
  EXPECT_EQ((*runs)[1].reason, "top 2");
  EXPECT_EQ(*(*runs)[1].measured_step_s, 0.45);
  EXPECT_EQ((*runs)[1].wall_s, 4.5);
}

TEST(StoreValidateTest, UnknownCandidateIsRefusedAndNothingIsStored) {
  auto store = OpenMemory();
  std::vector<int64_t> ids;
  const int64_t search = PutTwoCandidates(*store, &ids);
  ValidationRecord v;
  v.search_id = search;
  v.hardware_id = "cpu-abc";
  ValidationRunRecord r;
  r.candidate_id = 999;
  r.reason = "top 1";
  r.status = "ok";
  EXPECT_FALSE(store->PutValidation(v, {r}, Prov(1)).ok());
  r.candidate_id = ids[0];
  r.status = "maybe";  // CHECK constraint
  EXPECT_FALSE(store->PutValidation(v, {r}, Prov(1)).ok());
  auto list = store->ListValidations();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
}

TEST(StoreValidateTest, NewestFittedFactorsWin) {
  auto store = OpenMemory();
  auto none = store->GetFittedFactors("cpu-abc", "datasheet");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  FittedFactorsRecord f;
  f.hardware_id = "cpu-abc";
  f.base_calibration = "datasheet";
  f.compute = 1.7;
  f.memory = 0.9;
  f.collective = 1.2;
  f.runs = 9;
  f.mape_before_pct = 40;
  f.mape_after_pct = 8;
  ASSERT_TRUE(store->PutFittedFactors(f, Prov(1)).ok());
  f.compute = 1.8;
  f.runs = 18;
  ASSERT_TRUE(store->PutFittedFactors(f, Prov(2)).ok());
  FittedFactorsRecord other = f;
  other.base_calibration = "measured:cpu-abc";
  other.compute = 1.1;
  ASSERT_TRUE(store->PutFittedFactors(other, Prov(3)).ok());

  auto got = store->GetFittedFactors("cpu-abc", "datasheet");
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->compute, 1.8);
  EXPECT_EQ((*got)->runs, 18);
  EXPECT_EQ((*got)->memory, 0.9);
  EXPECT_EQ((*got)->provenance.created_unix_s, 2);
  auto measured = store->GetFittedFactors("cpu-abc", "measured:cpu-abc");
  ASSERT_TRUE(measured.ok());
  EXPECT_EQ((*measured)->compute, 1.1);
  EXPECT_FALSE(store->GetFittedFactors("cpu-other", "datasheet")->has_value());
}

}  // namespace
}  // namespace meshtune::results
