// Typed reads and writes of the results store, the predicted-vs-measured
// join, CSV export and the migration runner (on ":memory:" databases).
#include "results/store.h"

#include <gtest/gtest.h>

#include <sstream>

namespace meshtune::results {
namespace {

Provenance TestProvenance() { return {"0.1.0", "abc123", 1700000000}; }

HardwareFingerprint CpuBox() {
  HardwareFingerprint hw;
  hw.backend = "cpu";
  hw.cpu_model = "AMD EPYC 9654";
  hw.cpu_cores = 16;
  hw.memory_gib = 125.7;
  hw.library_versions = "eigen=3.4.0 openmpi=4.1.4";
  hw.id = ComputeHardwareId(hw);
  return hw;
}

Measurement Gemm(const std::string& hw, int64_t m, double median_s) {
  Measurement r;
  r.hardware_id = hw;
  r.op = "gemm";
  r.dtype = "fp32";
  r.m = m;
  r.n = 1024;
  r.k = 512;
  r.samples = 20;
  r.median_s = median_s;
  r.min_s = median_s * 0.9;
  r.p99_s = median_s * 1.2;
  r.cv = 0.03;
  r.timer = "steady_clock";
  return r;
}

std::unique_ptr<Store> OpenMemory() {
  StatusOr<std::unique_ptr<Store>> store = Store::Open(":memory:");
  EXPECT_TRUE(store.ok()) << store.status().message();
  return std::move(store).value();
}

TEST(HardwareIdTest, StableAndSensitiveToIdentifyingFields) {
  HardwareFingerprint a = CpuBox();
  HardwareFingerprint b = CpuBox();
  b.id = "ignored";
  b.memory_gib = 125.9;  // same whole GiB (126)
  EXPECT_EQ(ComputeHardwareId(a), ComputeHardwareId(b));
  EXPECT_EQ(ComputeHardwareId(a).rfind("cpu-", 0), 0u);
  EXPECT_EQ(ComputeHardwareId(a).size(), 4u + 16u);
  b.cpu_cores = 8;
  EXPECT_NE(ComputeHardwareId(a), ComputeHardwareId(b));
  HardwareFingerprint c = CpuBox();
  c.library_versions = "eigen=3.4.1 openmpi=4.1.4";
  EXPECT_NE(ComputeHardwareId(a), ComputeHardwareId(c));
}

TEST(StoreTest, NewDatabaseHasCurrentSchemaVersion) {
  auto store = OpenMemory();
  StatusOr<int> v = store->SchemaVersion();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, kSchemaVersion);
}

TEST(StoreTest, HardwareRoundTripsAndPutIsIdempotent) {
  auto store = OpenMemory();
  HardwareFingerprint hw = CpuBox();
  ASSERT_TRUE(store->PutHardware(hw, TestProvenance()).ok());
  ASSERT_TRUE(store->PutHardware(hw, TestProvenance()).ok());
  auto list = store->ListHardware();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, hw.id);
  EXPECT_EQ((*list)[0].cpu_model, "AMD EPYC 9654");
  EXPECT_EQ((*list)[0].cpu_cores, 16);
  EXPECT_DOUBLE_EQ((*list)[0].memory_gib, 125.7);
  EXPECT_EQ((*list)[0].library_versions, "eigen=3.4.0 openmpi=4.1.4");
}

TEST(StoreTest, RejectsUnknownBackend) {
  auto store = OpenMemory();
  HardwareFingerprint hw = CpuBox();
  hw.backend = "tpu";
  Status s = store->PutHardware(hw, TestProvenance());
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "hardware backend 'tpu' is not cpu or cuda");
}

TEST(StoreTest, MeasurementsRoundTripWithProvenanceAndFilters) {
  auto store = OpenMemory();
  HardwareFingerprint hw = CpuBox();
  ASSERT_TRUE(store->PutHardware(hw, TestProvenance()).ok());
  Measurement ar;
  ar.hardware_id = hw.id;
  ar.op = "all_reduce";
  ar.dtype = "fp32";
  ar.bytes = 1048576;
  ar.group_size = 2;
  ar.ranks_per_node = 2;
  ar.samples = 50;
  ar.median_s = 1.5e-4;
  ar.timer = "mpi_wtime";
  ASSERT_TRUE(store
                  ->PutMeasurements(
                      {Gemm(hw.id, 256, 1e-3), ar, Gemm(hw.id, 512, 2e-3)},
                      TestProvenance())
                  .ok());
  auto all = store->GetMeasurements(hw.id);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[1].op, "all_reduce");
  EXPECT_DOUBLE_EQ((*all)[1].bytes, 1048576);
  EXPECT_EQ((*all)[1].group_size, 2);
  EXPECT_EQ((*all)[1].provenance.git_revision, "abc123");
  EXPECT_EQ((*all)[1].provenance.created_unix_s, 1700000000);
  auto gemms = store->GetMeasurements(hw.id, "gemm");
  ASSERT_TRUE(gemms.ok());
  ASSERT_EQ(gemms->size(), 2u);
  EXPECT_EQ((*gemms)[1].m, 512);
  EXPECT_DOUBLE_EQ((*gemms)[1].median_s, 2e-3);
  EXPECT_DOUBLE_EQ((*gemms)[1].p99_s, 2.4e-3);
  auto none = store->GetMeasurements("cpu-0000000000000000");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// The profiler's engine-kernel rows (profiler/engine_ops.h) use the
// existing columns: elements in m; attention batch_heads, seq, head_dim in
// m, n, k.
TEST(StoreTest, EngineKernelRowsRoundTrip) {
  auto store = OpenMemory();
  HardwareFingerprint hw = CpuBox();
  ASSERT_TRUE(store->PutHardware(hw, TestProvenance()).ok());
  Measurement gelu = Gemm(hw.id, 65536, 4e-4);
  gelu.op = "elem:gelu:fwd";
  gelu.n = gelu.k = 0;
  Measurement attn = Gemm(hw.id, 2, 1.5e-3);
  attn.op = "attn:bwd";
  attn.n = 128;
  attn.k = 64;
  ASSERT_TRUE(store->PutMeasurements({gelu, attn}, TestProvenance()).ok());
  auto rows = store->GetMeasurements(hw.id, "elem:gelu:fwd");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].m, 65536);
  EXPECT_EQ((*rows)[0].n, 0);
  EXPECT_DOUBLE_EQ((*rows)[0].median_s, 4e-4);
  rows = store->GetMeasurements(hw.id, "attn:bwd");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].m, 2);
  EXPECT_EQ((*rows)[0].n, 128);
  EXPECT_EQ((*rows)[0].k, 64);
  EXPECT_EQ((*rows)[0].timer, "steady_clock");
}

TEST(StoreTest, MeasurementBatchIsAllOrNothing) {
  auto store = OpenMemory();
  HardwareFingerprint hw = CpuBox();
  ASSERT_TRUE(store->PutHardware(hw, TestProvenance()).ok());
  Status s = store->PutMeasurements(
      {Gemm(hw.id, 256, 1e-3), Gemm("cpu-unknown", 512, 2e-3)},
      TestProvenance());
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(),
            ":memory:: measurement for unknown hardware id 'cpu-unknown'");
  auto rows = store->GetMeasurements("");
  ASSERT_TRUE(rows.ok());
  EXPECT_TRUE(rows->empty());  // the valid first row was rolled back too
}

search_spaces::ParallelConfig Config(int64_t tp, int64_t pp, int64_t dp) {
  search_spaces::ParallelConfig c;
  c.tp = tp;
  c.pp = pp;
  c.dp = dp;
  c.sp = tp > 1;
  c.recompute.granularity = search_spaces::RecomputeGranularity::kFull;
  c.recompute.method = search_spaces::RecomputeMethod::kBlock;
  c.recompute.num_layers = 3;
  c.dist_opt = true;
  return c;
}

TEST(StoreTest, SearchCandidatesTrainingRunsAndPredictedVsMeasured) {
  auto store = OpenMemory();
  SearchRecord search;
  search.model = "gpt3-1.3b";
  search.gpu = "a100-80g";
  search.gpus = 8;
  search.gbs = 512;
  search.seq_length = 2048;
  search.precision = "bf16";
  search.arguments = "tune --model gpt3-1.3b --gpus 8";
  search.evaluated = 120;
  search.feasible = 80;
  search.elapsed_s = 0.05;
  CandidateRecord best;
  best.rank = 1;
  best.config = Config(2, 1, 4);
  best.step_time_s = 10.0;
  best.tokens_per_s = 104857.6;
  best.mfu = 0.5;
  best.memory_gib = 40;
  best.calibration = "datasheet";
  best.estimate_json = "{\"step_time_s\":10}";
  CandidateRecord second = best;
  second.rank = 2;
  second.config = Config(1, 2, 4);
  second.step_time_s = 11.0;
  StatusOr<int64_t> id =
      store->PutSearch(search, {best, second}, TestProvenance());
  ASSERT_TRUE(id.ok()) << id.status().message();

  auto searches = store->ListSearches();
  ASSERT_TRUE(searches.ok());
  ASSERT_EQ(searches->size(), 1u);
  EXPECT_EQ((*searches)[0].id, *id);
  EXPECT_EQ((*searches)[0].arguments, "tune --model gpt3-1.3b --gpus 8");
  EXPECT_EQ((*searches)[0].feasible, 80);

  auto cands = store->GetCandidates(*id);
  ASSERT_TRUE(cands.ok());
  ASSERT_EQ(cands->size(), 2u);
  EXPECT_TRUE((*cands)[0].config == best.config);
  EXPECT_EQ((*cands)[0].config_text, search_spaces::ToString(best.config));
  EXPECT_EQ((*cands)[0].estimate_json, "{\"step_time_s\":10}");
  EXPECT_EQ((*cands)[1].rank, 2);
  EXPECT_TRUE((*cands)[1].config == second.config);

  TrainingRun run;
  run.candidate_id = (*cands)[0].id;
  run.model = "gpt3-1.3b";
  run.config = best.config;
  run.gbs = 512;
  run.seq_length = 2048;
  run.steps = 10;
  run.step_time_median_s = 8.0;
  run.final_loss = 7.25;
  StatusOr<int64_t> run_id = store->PutTrainingRun(run, TestProvenance());
  ASSERT_TRUE(run_id.ok()) << run_id.status().message();
  auto runs = store->GetTrainingRuns((*cands)[0].id);
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_TRUE((*runs)[0].config == best.config);
  EXPECT_DOUBLE_EQ((*runs)[0].final_loss, 7.25);
  EXPECT_TRUE(store->GetTrainingRuns((*cands)[1].id)->empty());

  auto pvm = store->GetPredictedVsMeasured(*id);
  ASSERT_TRUE(pvm.ok());
  ASSERT_EQ(pvm->size(), 1u);  // only the measured candidate
  EXPECT_EQ((*pvm)[0].rank, 1);
  EXPECT_EQ((*pvm)[0].training_run_id, *run_id);
  EXPECT_DOUBLE_EQ((*pvm)[0].predicted_step_time_s, 10.0);
  EXPECT_DOUBLE_EQ((*pvm)[0].measured_step_time_s, 8.0);
  EXPECT_DOUBLE_EQ((*pvm)[0].relative_error, 0.25);  // (10 - 8) / 8
}

// The fields the V1 columns lacked (schema 4): etp, the uneven pipeline
// layout and the recompute modules come back as stored, for candidates and
// training runs. (Before, an etp1 candidate came back with etp = tp.)
TEST(StoreTest, ExpertTpLayoutAndRecomputeModulesRoundTrip) {
  auto store = OpenMemory();
  SearchRecord search;
  search.model = "moe-tiny";
  search.gpu = "local";
  search.gpus = 4;
  search.gbs = 8;
  search.seq_length = 128;
  search.precision = "fp32";
  CandidateRecord c;
  c.rank = 1;
  c.config = Config(2, 2, 1);
  c.config.ep = 2;
  c.config.etp = 1;
  c.config.layout_first_layers = 1;
  c.config.layout_last_layers = 0;
  c.config.recompute.granularity =
      search_spaces::RecomputeGranularity::kSelective;
  c.config.recompute.modules = search_spaces::kRecomputeCoreAttn | (1u << 1);
  c.calibration = "datasheet";
  c.estimate_json = "{}";
  StatusOr<int64_t> id = store->PutSearch(search, {c}, TestProvenance());
  ASSERT_TRUE(id.ok()) << id.status().message();
  auto cands = store->GetCandidates(*id);
  ASSERT_TRUE(cands.ok());
  ASSERT_EQ(cands->size(), 1u);
  const search_spaces::ParallelConfig& got = (*cands)[0].config;
  EXPECT_EQ(got.etp, 1);
  EXPECT_EQ(got.expert_tp(), 1);
  EXPECT_EQ(got.layout_first_layers, 1);
  EXPECT_EQ(got.layout_last_layers, 0);
  EXPECT_EQ(got.recompute.modules, c.config.recompute.modules);
  EXPECT_TRUE(got == c.config);
  TrainingRun run;
  run.candidate_id = (*cands)[0].id;
  run.model = "moe-tiny";
  run.config = c.config;
  run.gbs = 8;
  run.seq_length = 128;
  run.steps = 8;
  ASSERT_TRUE(store->PutTrainingRun(run, TestProvenance()).ok());
  auto runs = store->GetTrainingRuns((*cands)[0].id);
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].config.etp, 1);
  EXPECT_TRUE((*runs)[0].config == c.config);
}

// A schema-3 database (the built-in steps up to 3) upgrades to 4, and a
// candidate without etp reads back with the defaults (etp = tp).
TEST(MigrationTest, SchemaThreeCandidatesGetTheDefaultsAtFour) {
  char path[] = "/tmp/results_migration_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  unlink(path);
  const std::vector<Migration> up_to_3(BuiltinMigrations().begin(),
                                       BuiltinMigrations().begin() + 3);
  OpenOptions options;
  options.migrations = &up_to_3;
  SearchRecord search;
  search.model = "gpt-tiny";
  search.gpu = "local";
  search.gpus = 2;
  search.gbs = 8;
  search.seq_length = 128;
  search.precision = "fp32";
  {
    auto old = Store::Open(path, options);
    ASSERT_TRUE(old.ok()) << old.status().message();
    EXPECT_EQ(*(*old)->SchemaVersion(), 3);
  }
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(*(*store)->SchemaVersion(), kSchemaVersion);
  CandidateRecord c;
  c.rank = 1;
  c.config = Config(2, 1, 1);
  c.calibration = "datasheet";
  c.estimate_json = "{}";
  StatusOr<int64_t> put = (*store)->PutSearch(search, {c}, TestProvenance());
  ASSERT_TRUE(put.ok()) << put.status().message();
  auto cands = (*store)->GetCandidates(*put);
  ASSERT_TRUE(cands.ok());
  EXPECT_EQ((*cands)[0].config.etp, 0);
  EXPECT_EQ((*cands)[0].config.expert_tp(), 2);
  EXPECT_EQ((*cands)[0].config.layout_first_layers, -1);
  unlink(path);
}

TEST(StoreTest, TrainingRunForUnknownCandidateIsRefused) {
  auto store = OpenMemory();
  TrainingRun run;
  run.candidate_id = 42;
  StatusOr<int64_t> id = store->PutTrainingRun(run, TestProvenance());
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().message(),
            ":memory:: training run refers to unknown candidate 42 or "
            "hardware ''");
}

TEST(StoreTest, ExportsCsvWithQuotingAndRejectsUnknownTables) {
  auto store = OpenMemory();
  HardwareFingerprint hw = CpuBox();
  hw.cpu_model = "Xeon \"Sapphire\", 8480";
  hw.id = ComputeHardwareId(hw);
  ASSERT_TRUE(store->PutHardware(hw, TestProvenance()).ok());
  std::ostringstream csv;
  ASSERT_TRUE(store->ExportCsv("hardware", csv).ok());
  EXPECT_EQ(csv.str(),
            "id,backend,cpu_model,cpu_cores,memory_gib,gpu_model,gpu_count,"
            "driver_version,library_versions,tool_version,git_revision,"
            "created_unix_s\n" +
                hw.id +
                ",cpu,\"Xeon \"\"Sapphire\"\", 8480\",16,125.7,,0,,"
                "eigen=3.4.0 openmpi=4.1.4,0.1.0,abc123,1700000000\n");
  std::ostringstream ignored;
  Status s = store->ExportCsv("sqlite_master", ignored);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "unknown table 'sqlite_master'");
  EXPECT_EQ(s.hint(),
            "use one of: hardware, measurements, searches, candidates, "
            "training_runs, predicted_vs_measured, regress_results, "
            "regress_baselines, validations, validation_runs, "
            "fitted_factors");
}

TEST(MigrationTest, RunsFakeStepsInOrderAndKeepsData) {
  char path[] = "/tmp/results_migration_XXXXXX";
  ASSERT_GE(mkstemp(path), 0);
  const std::vector<Migration> v1 = {
      {1, "fake v0 to v1", "CREATE TABLE notes (text TEXT);"}};
  OpenOptions options;
  options.migrations = &v1;
  {
    auto store = Store::Open(path, options);
    ASSERT_TRUE(store.ok()) << store.status().message();
    EXPECT_EQ(*(*store)->SchemaVersion(), 1);
  }
  const std::vector<Migration> v2 = {
      v1[0],
      {2, "fake v1 to v2",
       "ALTER TABLE notes ADD COLUMN n INTEGER DEFAULT 7; "
       "INSERT INTO notes (text) VALUES ('migrated');"}};
  options.migrations = &v2;
  {
    auto store = Store::Open(path, options);
    ASSERT_TRUE(store.ok()) << store.status().message();
    EXPECT_EQ(*(*store)->SchemaVersion(), 2);
  }
  {  // reopening at v2 runs nothing again (one 'migrated' row)
    auto store = Store::Open(path, options);
    ASSERT_TRUE(store.ok());
  }
  // The v1 build now refuses the v2 file.
  options.migrations = &v1;
  auto old = Store::Open(path, options);
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.status().message(),
            std::string(path) +
                ": results database schema version 2 is newer than this "
                "tune's version 1");
  std::remove(path);
  std::remove((std::string(path) + "-wal").c_str());
  std::remove((std::string(path) + "-shm").c_str());
}

TEST(MigrationTest, FailingStepRollsBackToPreviousVersion) {
  char path[] = "/tmp/results_migration_XXXXXX";
  ASSERT_GE(mkstemp(path), 0);
  const std::vector<Migration> v1 = {
      {1, "fake v0 to v1", "CREATE TABLE notes (text TEXT);"}};
  const std::vector<Migration> bad = {
      v1[0],
      {2, "broken", "CREATE TABLE more (x); SELECT * FROM missing_table;"}};
  OpenOptions options;
  options.migrations = &v1;
  ASSERT_TRUE(Store::Open(path, options).ok());
  options.migrations = &bad;
  auto store = Store::Open(path, options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().message(),
            std::string(path) +
                ": schema upgrade to version 2 (broken) failed: no such "
                "table: missing_table");
  // Still version 1: the failed step was rolled back as a whole.
  options.migrations = &v1;
  auto again = Store::Open(path, options);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(*(*again)->SchemaVersion(), 1);
  std::remove(path);
  std::remove((std::string(path) + "-wal").c_str());
  std::remove((std::string(path) + "-shm").c_str());
}

TEST(MigrationTest, GapInStepsIsAnInternalError) {
  const std::vector<Migration> gap = {{1, "a", "CREATE TABLE a (x);"},
                                      {3, "c", "CREATE TABLE c (x);"}};
  OpenOptions options;
  options.migrations = &gap;
  auto store = Store::Open(":memory:", options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kInternal);
  EXPECT_EQ(store.status().message(),
            "results schema migrations skip from version 1 to 3");
}

}  // namespace
}  // namespace meshtune::results
