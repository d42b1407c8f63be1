// `tune regress` rows of the results store: results, baselines (set,
// replace, list), validation, and the v1 -> v2 upgrade keeping old rows.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

#include "results/store.h"

namespace meshtune::results {
namespace {

Provenance Prov(int64_t t) { return {"0.1.0", "abc123", t}; }

HardwareFingerprint Box() {
  HardwareFingerprint hw;
  hw.backend = "cpu";
  hw.cpu_model = "AMD EPYC 9654";
  hw.cpu_cores = 16;
  hw.memory_gib = 125.7;
  hw.library_versions = "eigen=3.4.0 eigen_threads=1";
  hw.id = ComputeHardwareId(hw);
  return hw;
}

RegressResult Result(const std::string& hw, double scale) {
  RegressResult r;
  r.benchmark = "cpu-gpt-tiny-v1";
  r.spec = "model=gpt-tiny steps=3";
  r.hardware_id = hw;
  r.threads = 1;
  r.warmup_steps = 2;
  r.steps_per_repeat = 3;
  r.tokens_per_step = 128;
  r.tokens_per_s = {1000 * scale, 1010 * scale, 990 * scale};
  r.cpu_tokens_per_s = {1100 * scale, 1105 * scale, 1090 * scale};
  r.tokens_per_s_median = 1000 * scale;
  r.tokens_per_s_spread = 10 * scale;
  r.cpu_tokens_per_s_median = 1100 * scale;
  r.cpu_tokens_per_s_spread = 5 * scale;
  // Values that need all 17 digits to round-trip.
  r.losses = {8.3475218772888184, 7.5595016479492188, 0.1 + 0.2};
  return r;
}

std::unique_ptr<Store> OpenMemory() {
  StatusOr<std::unique_ptr<Store>> store = Store::Open(":memory:");
  EXPECT_TRUE(store.ok()) << store.status().message();
  return std::move(store).value();
}

TEST(StoreRegressTest, ResultRoundTripsExactly) {
  auto store = OpenMemory();
  ASSERT_TRUE(store->PutHardware(Box(), Prov(1)).ok());
  const RegressResult in = Result(Box().id, 1.0);
  StatusOr<int64_t> id = store->PutRegressResult(in, Prov(1700000000));
  ASSERT_TRUE(id.ok()) << id.status().message();
  StatusOr<RegressResult> out = store->GetRegressResult(*id);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->id, *id);
  EXPECT_EQ(out->benchmark, in.benchmark);
  EXPECT_EQ(out->spec, in.spec);
  EXPECT_EQ(out->hardware_id, in.hardware_id);
  EXPECT_EQ(out->warmup_steps, 2);
  EXPECT_EQ(out->steps_per_repeat, 3);
  EXPECT_EQ(out->tokens_per_step, 128);
  EXPECT_EQ(out->tokens_per_s, in.tokens_per_s);
  EXPECT_EQ(out->cpu_tokens_per_s, in.cpu_tokens_per_s);
  EXPECT_EQ(out->losses, in.losses);  // bit for bit
  EXPECT_EQ(out->cpu_tokens_per_s_median, 1100);
  EXPECT_EQ(out->provenance.git_revision, "abc123");
  EXPECT_EQ(out->provenance.created_unix_s, 1700000000);
}

TEST(StoreRegressTest, ResultsFilterByBenchmarkAndHardwareOldestFirst) {
  auto store = OpenMemory();
  HardwareFingerprint other = Box();
  other.cpu_cores = 2;
  other.id = ComputeHardwareId(other);
  ASSERT_TRUE(store->PutHardware(Box(), Prov(1)).ok());
  ASSERT_TRUE(store->PutHardware(other, Prov(1)).ok());
  ASSERT_TRUE(store->PutRegressResult(Result(Box().id, 1), Prov(1)).ok());
  ASSERT_TRUE(store->PutRegressResult(Result(other.id, 2), Prov(2)).ok());
  RegressResult llama = Result(Box().id, 3);
  llama.benchmark = "cpu-llama-tiny-v1";
  ASSERT_TRUE(store->PutRegressResult(llama, Prov(3)).ok());
  ASSERT_TRUE(store->PutRegressResult(Result(Box().id, 4), Prov(4)).ok());

  auto mine = store->GetRegressResults("cpu-gpt-tiny-v1", Box().id);
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->size(), 2u);
  EXPECT_EQ((*mine)[0].cpu_tokens_per_s_median, 1100);
  EXPECT_EQ((*mine)[1].cpu_tokens_per_s_median, 4400);
  EXPECT_EQ(store->GetRegressResults()->size(), 4u);
  EXPECT_EQ(store->GetRegressResults("cpu-gpt-tiny-v1")->size(), 3u);
}

TEST(StoreRegressTest, BaselineSetReplaceAndList) {
  auto store = OpenMemory();
  ASSERT_TRUE(store->PutHardware(Box(), Prov(1)).ok());
  const int64_t first =
      store->PutRegressResult(Result(Box().id, 1), Prov(10)).value();
  const int64_t second =
      store->PutRegressResult(Result(Box().id, 2), Prov(20)).value();
  RegressBaseline b;
  b.name = "main";
  b.source_result_id = first;
  b.result = store->GetRegressResult(first).value();
  ASSERT_TRUE(store->PutRegressBaseline(b, Prov(30)).ok());
  // Promote: the same name now points at the newer result.
  b.source_result_id = second;
  b.result = store->GetRegressResult(second).value();
  ASSERT_TRUE(store->PutRegressBaseline(b, Prov(40)).ok());
  RegressBaseline other = b;
  other.name = "release";
  ASSERT_TRUE(store->PutRegressBaseline(other, Prov(50)).ok());

  auto list = store->ListRegressBaselines();
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "main");
  EXPECT_EQ((*list)[0].source_result_id, second);
  EXPECT_EQ((*list)[0].result.cpu_tokens_per_s_median, 2200);
  EXPECT_EQ((*list)[0].result.provenance.created_unix_s, 20);
  EXPECT_EQ((*list)[0].provenance.created_unix_s, 40);
  EXPECT_EQ((*list)[0].result.losses, Result("", 1).losses);
  EXPECT_EQ((*list)[1].name, "release");

  auto main = store->GetRegressBaseline("main", "cpu-gpt-tiny-v1");
  ASSERT_TRUE(main.ok());
  EXPECT_EQ(main->source_result_id, second);
  auto missing = store->GetRegressBaseline("main", "cpu-llama-tiny-v1");
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(missing.status().message(),
            ":memory:: no baseline 'main' for cpu-llama-tiny-v1");
}

TEST(StoreRegressTest, ImportedBaselineNeedsNoResultRow) {
  auto store = OpenMemory();
  ASSERT_TRUE(store->PutHardware(Box(), Prov(1)).ok());
  RegressBaseline b;
  b.name = "ci";
  b.result = Result(Box().id, 1);
  ASSERT_TRUE(store->PutRegressBaseline(b, Prov(2)).ok());
  auto list = store->ListRegressBaselines("cpu-gpt-tiny-v1");
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].source_result_id, 0);
}

TEST(StoreRegressTest, RefusesBadRows) {
  auto store = OpenMemory();
  RegressResult r = Result("cpu-0000000000000000", 1);
  auto unknown = store->PutRegressResult(r, Prov(1));
  EXPECT_EQ(unknown.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(unknown.status().message(),
            ":memory:: regress result for unknown hardware id "
            "'cpu-0000000000000000'");

  ASSERT_TRUE(store->PutHardware(Box(), Prov(1)).ok());
  r.hardware_id = Box().id;
  r.losses.push_back(std::numeric_limits<double>::quiet_NaN());
  auto nan = store->PutRegressResult(r, Prov(1));
  EXPECT_EQ(nan.status().message(),
            ":memory:: regress result for 'cpu-gpt-tiny-v1' has a number that "
            "is not finite");
  r = Result(Box().id, 1);
  r.cpu_tokens_per_s.pop_back();
  EXPECT_EQ(store->PutRegressResult(r, Prov(1)).status().message(),
            ":memory:: regress result for 'cpu-gpt-tiny-v1' has no repeats, "
            "or wall and CPU repeats differ in number");
  RegressBaseline b;
  b.result = Result(Box().id, 1);
  EXPECT_EQ(store->PutRegressBaseline(b, Prov(1)).message(),
            "a regress baseline needs a name");
  auto none = store->GetRegressResult(42);
  EXPECT_EQ(none.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(none.status().message(), ":memory:: no regress result 42");
  EXPECT_EQ(store->GetRegressResults()->size(), 0u);
}

TEST(StoreRegressTest, UpgradeFromVersionOneKeepsRows) {
  char path[] = "/tmp/results_regress_XXXXXX";
  ASSERT_GE(mkstemp(path), 0);
  const std::vector<Migration> v1 = {BuiltinMigrations()[0]};
  OpenOptions options;
  options.migrations = &v1;
  {
    auto store = Store::Open(path, options);
    ASSERT_TRUE(store.ok()) << store.status().message();
    ASSERT_TRUE((*store)->PutHardware(Box(), Prov(1)).ok());
  }
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(*(*store)->SchemaVersion(), kSchemaVersion);
  EXPECT_EQ((*store)->ListHardware()->size(), 1u);
  EXPECT_TRUE((*store)->PutRegressResult(Result(Box().id, 1), Prov(2)).ok());
  std::remove(path);
  std::remove((std::string(path) + "-wal").c_str());
  std::remove((std::string(path) + "-shm").c_str());
}

}  // namespace
}  // namespace meshtune::results
