// Store: the SQLite results database (docs/design.md §7, issue 4).
//
// One SQLite file (or ":memory:" in tests) in WAL mode with a busy timeout,
// foreign keys on, a schema version kept in `PRAGMA user_version` and
// upgraded by in-code migrations, and only prepared statements. The file is
// marked as ours with `PRAGMA application_id`; a file that is not SQLite, or
// an SQLite file that belongs to something else, is refused without writing a
// byte. A file written by a newer schema is refused with both versions named.
// Tables (schema in docs/results.md):
//   hardware      one row per machine fingerprint
//   measurements  microbenchmark results (profiler), per hardware id
//   searches      one row per `tune search` run
//   candidates    ranked candidates of a search with their predictions
//   training_runs measured step statistics (engine), joined to candidates
//   regress_results, regress_baselines  `tune regress` benchmark results and
//                 the named baselines they are checked against (schema v2)
//   validations, validation_runs, fitted_factors  `tune validate`: each
//                 validation, every candidate it ran or failed, and the
//                 efficiency factors fitted per machine (schema v3)
// Every row carries provenance: tool version, git revision and a timestamp.
//
// Ownership: a Store owns its sqlite3 connection; it is not thread-safe (use
// one Store per thread or process; SQLite serialises writers across
// processes). Units are in the field names: seconds (_s), bytes, GiB.
#ifndef MESHTUNE_RESULTS_STORE_H_
#define MESHTUNE_RESULTS_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "search_spaces/parallel_config.h"
#include "search_spaces/status.h"

struct sqlite3;

namespace meshtune::results {

// The schema version this build writes (PRAGMA user_version).
inline constexpr int kSchemaVersion = 4;
// PRAGMA application_id marking a meshtune database ("MSHT").
inline constexpr int32_t kApplicationId = 0x4D534854;

// Who wrote a row and when. Filled by the caller (results/ does not depend on
// tuner/, which owns the generated version header).
struct Provenance {
  std::string tool_version;    // e.g. "0.1.0"
  std::string git_revision;    // e.g. "fabd115a1b2c" or "unknown"
  int64_t created_unix_s = 0;  // seconds since the Unix epoch (UTC)
};

// Provenance with created_unix_s set to the current time.
Provenance MakeProvenance(std::string tool_version, std::string git_revision);

// The identity of the machine measurements were taken on.
struct HardwareFingerprint {
  std::string id;       // stable hash of the fields below (ComputeHardwareId)
  std::string backend;  // "cpu" | "cuda"
  std::string cpu_model;
  int64_t cpu_cores = 0;
  double memory_gib = 0;  // host memory
  std::string gpu_model;  // "" on CPU-only machines
  int64_t gpu_count = 0;
  std::string driver_version;    // "" when there is no driver
  std::string library_versions;  // e.g. "cuda=12.4 nccl=2.21 cublas=12.4"
};

// A stable identifier for `hw`: "<backend>-" followed by 16 hex digits of the
// 64-bit FNV-1a hash of the identifying fields (backend, cpu_model, cpu_cores,
// memory rounded to whole GiB, gpu_model, gpu_count, driver_version,
// library_versions). The same machine and software always map to the same
// id; `hw.id` itself is ignored.
std::string ComputeHardwareId(const HardwareFingerprint& hw);

// One microbenchmark result (many samples summarised).
struct Measurement {
  std::string hardware_id;  // must exist in `hardware` (PutHardware first)
  // "gemm", "stream", "all_reduce", "all_gather", "reduce_scatter",
  // "all_to_all", "send_recv", and the engine's own kernels (tune profile
  // --model): "attn:fwd|bwd" (m = batch·heads, n = seq, k = head_dim) and
  // "elem:<op>:fwd|bwd" (m = elements; <op> as costmodel::ElementwiseOp).
  std::string op;
  std::string dtype;            // "bf16", "fp16", "fp8", "fp32", ...
  int64_t m = 0, n = 0, k = 0;  // GEMM shape [m,k]x[k,n]; see op otherwise
  double bytes = 0;             // message / stream size in bytes; 0 for GEMM
  int64_t group_size = 1;       // ranks in the collective group
  int64_t nodes = 1;            // nodes the group spans
  int64_t ranks_per_node = 1;
  int64_t samples = 0;  // timed repetitions (after warm-up)
  double median_s = 0, min_s = 0, p99_s = 0;
  double cv = 0;          // coefficient of variation (stddev / mean)
  std::string timer;      // "cupti", "cuda_event", "steady_clock", "mpi_wtime"
  Provenance provenance;  // filled on read; ignored on write
};

// One `tune search` run: what was asked and how the search went.
struct SearchRecord {
  int64_t id = 0;     // assigned by PutSearch; ignored on write
  std::string model;  // preset name or YAML path
  std::string gpu;    // cluster preset / GPU kind
  int64_t gpus = 0;
  int64_t gpus_per_node = 0;
  int64_t gbs = 0;
  int64_t seq_length = 0;
  std::string precision;
  std::string hardware_id;  // "" unless calibrated by measurements
  std::string arguments;    // the command line, for humans
  int64_t evaluated = 0;
  int64_t feasible = 0;
  double elapsed_s = 0;
  Provenance provenance;  // filled on read; ignored on write
};

// A ranked candidate of a search and the cost model's prediction for it.
struct CandidateRecord {
  int64_t id = 0;         // assigned by PutSearch; ignored on write
  int64_t search_id = 0;  // filled on read; ignored on write
  int64_t rank = 0;       // 1 = best
  search_spaces::ParallelConfig config;
  std::string config_text;  // search_spaces::ToString(config); set on write
  bool fits = true;
  std::string infeasible_reason;  // "" when feasible
  double step_time_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  double memory_gib = 0;      // total per GPU on the most loaded rank
  std::string calibration;    // "datasheet" | "measured:<hardware id>"
  std::string estimate_json;  // the full estimate (docs/design.md §5) or ""
};

// A measured training run (written by `tune train` / `tune validate`).
struct TrainingRun {
  int64_t id = 0;            // assigned by PutTrainingRun; ignored on write
  int64_t candidate_id = 0;  // 0 = not from a search
  std::string hardware_id;   // "" when unknown; else must exist
  std::string model;
  search_spaces::ParallelConfig config;
  std::string config_text;  // set on write from config
  int64_t gbs = 0;
  int64_t seq_length = 0;
  int64_t steps = 0;  // measured steps (after warm-up)
  double step_time_median_s = 0, step_time_min_s = 0, step_time_p99_s = 0;
  double step_time_cv = 0;
  double tokens_per_s = 0;
  double final_loss = 0;
  Provenance provenance;  // filled on read; ignored on write
};

// "Predicted vs measured": a candidate joined with a training run of it.
struct PredictedVsMeasured {
  int64_t search_id = 0;
  int64_t candidate_id = 0;
  int64_t rank = 0;
  std::string config_text;
  int64_t training_run_id = 0;
  double predicted_step_time_s = 0;
  double measured_step_time_s = 0;  // median
  double relative_error = 0;        // (predicted - measured) / measured
};

// ---- `tune regress` (results/store_regress.cc, schema version 2) ----------
// A regression benchmark run: the fixed, short training benchmark `benchmark`
// (tuner/regress/benchmarks.h) measured `tokens_per_s.size()` times on one
// machine. Per-repeat throughputs and the loss of every step are kept, so a
// check can judge noise (median and spread) and numerics (losses).
struct RegressResult {
  int64_t id = 0;            // assigned by PutRegressResult; ignored on write
  std::string benchmark;     // e.g. "cpu-gpt-tiny-v1"
  std::string spec;          // the benchmark's definition as canonical text
  std::string hardware_id;   // must exist in `hardware`
  int64_t threads = 1;       // OpenMP threads the run used
  int64_t warmup_steps = 0;  // untimed steps before the repeats
  int64_t steps_per_repeat = 0;
  int64_t tokens_per_step = 0;  // gbs * seq
  // Per repeat: tokens / wall seconds and tokens / process CPU seconds.
  std::vector<double> tokens_per_s;
  std::vector<double> cpu_tokens_per_s;
  // Median and spread (median absolute deviation) of the vectors above.
  double tokens_per_s_median = 0, tokens_per_s_spread = 0;
  double cpu_tokens_per_s_median = 0, cpu_tokens_per_s_spread = 0;
  std::vector<double> losses;  // lm loss of every step, warm-up included
  Provenance provenance;       // of the run; filled on read
};

// A named reference result for one benchmark: a copy of a result's numbers
// (so an imported baseline needs no result row). Setting a name again for
// the same benchmark replaces it (promotion).
struct RegressBaseline {
  std::string name;              // e.g. "main"
  int64_t source_result_id = 0;  // regress_results id; 0 = imported
  RegressResult result;          // result.id is not stored
  Provenance provenance;         // when it was set; filled on read
};

// One schema upgrade: from version `to_version - 1` to `to_version`, as SQL
// run inside the upgrade transaction.
struct Migration {
  int to_version = 0;
  std::string description;
  std::string sql;
};

// ---- `tune validate` (results/store_validate.cc) ----

// One `tune validate` run: the search it ran and its statistics
// (tuner/validate/analysis.h).
struct ValidationRecord {
  int64_t id = 0;           // assigned by PutValidation; ignored on write
  int64_t search_id = 0;    // must exist
  std::string hardware_id;  // the machine the candidates ran on
  int64_t steps = 0;        // training steps per candidate
  int64_t measured = 0;     // candidates that ran successfully
  std::optional<double> spearman, mape_pct, top1_loss_pct;
  bool top1_is_measured_best = false;
  int64_t measured_best_candidate_id = 0;  // 0 when nothing ran
  Provenance provenance;                   // filled on read; ignored on write
};

// One candidate of a validation: ran ("ok", with its training run) or
// failed (with the one-line error).
struct ValidationRunRecord {
  int64_t validation_id = 0;  // filled on write/read
  int64_t candidate_id = 0;   // must exist
  std::string reason;         // "top 1", "other recompute", ...
  std::string status;         // "ok" | "failed"
  std::string error;          // "" when ok
  double predicted_step_s = 0;
  std::optional<double> measured_step_s;
  int64_t training_run_id = 0;  // 0 when failed
  double wall_s = 0;
};

// Efficiency factors fitted to this machine's measured runs
// (costmodel/fitted_calibration.h), newest row per (hardware, base) wins.
struct FittedFactorsRecord {
  int64_t id = 0;  // assigned on write
  std::string hardware_id;
  std::string base_calibration;  // "datasheet" | "measured:<id>"
  double compute = 1, memory = 1, collective = 1;
  int64_t runs = 0;
  double mape_before_pct = 0, mape_after_pct = 0;
  Provenance provenance;  // filled on read; ignored on write
};

// The migrations of this build, ending at kSchemaVersion.
const std::vector<Migration>& BuiltinMigrations();

struct OpenOptions {
  // Never create or modify anything (`tune db` reads, `tune export`): not
  // the file, and not -wal/-shm files next to it, so a database on a
  // read-only mount or with mode 0444 reads too (store.cc says how).
  bool read_only = false;
  int busy_timeout_ms = 5000;  // wait this long for another writer
  // Migrations to run (tests inject fake steps); null = BuiltinMigrations().
  // The target version is the last entry's to_version.
  const std::vector<Migration>* migrations = nullptr;
};

class Store {
 public:
  // Opens or creates `path` (":memory:" for a private in-memory database) and
  // brings its schema up to date. Errors (one line, naming the file, with a
  // hint): not an SQLite file, an SQLite file that is not a meshtune
  // database, a schema newer than this build, missing file in read-only
  // mode, a locked or read-only database. A refused file is not modified.
  static StatusOr<std::unique_ptr<Store>> Open(const std::string& path,
                                               const OpenOptions& options = {});
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& path() const { return path_; }
  // PRAGMA user_version after migrations.
  StatusOr<int> SchemaVersion() const;

  // Stores a fingerprint under `hw.id` (ComputeHardwareId(hw) when empty).
  // Storing an id again keeps the first row and refreshes its memory_gib.
  Status PutHardware(const HardwareFingerprint& hw, const Provenance& prov);
  StatusOr<std::vector<HardwareFingerprint>> ListHardware() const;

  // All rows in one transaction: either all are stored or none.
  Status PutMeasurements(const std::vector<Measurement>& rows,
                         const Provenance& prov);
  // Rows for `hardware_id` ("" = all), optionally only one `op`, in insertion
  // order.
  StatusOr<std::vector<Measurement>> GetMeasurements(
      const std::string& hardware_id, const std::string& op = "") const;

  // Stores a search and its candidates in one transaction; returns its id.
  StatusOr<int64_t> PutSearch(const SearchRecord& search,
                              const std::vector<CandidateRecord>& candidates,
                              const Provenance& prov);
  StatusOr<std::vector<SearchRecord>> ListSearches() const;
  // Candidates of a search by rank.
  StatusOr<std::vector<CandidateRecord>> GetCandidates(int64_t search_id) const;

  StatusOr<int64_t> PutTrainingRun(const TrainingRun& run,
                                   const Provenance& prov);
  // Runs of a candidate (0 = all runs), in insertion order.
  StatusOr<std::vector<TrainingRun>> GetTrainingRuns(
      int64_t candidate_id = 0) const;

  // Candidates with a measured run (search_id 0 = all searches), ordered by
  // search, rank, run (view `predicted_vs_measured`).
  StatusOr<std::vector<PredictedVsMeasured>> GetPredictedVsMeasured(
      int64_t search_id = 0) const;

  // Writes table or view `table` as CSV (RFC 4180 quoting, header row).
  // Unknown names are InvalidArgument listing the known ones.
  Status ExportCsv(const std::string& table, std::ostream& out) const;
  // Tables and views ExportCsv accepts.
  static const std::vector<std::string>& ExportableTables();

  // ---- `tune regress` (store_regress.cc) ----
  // Stores a benchmark result (provenance from `prov`); returns its id.
  // Empty repeat or loss vectors and non-finite numbers are InvalidArgument;
  // an unknown hardware id is InvalidArgument (PutHardware first).
  StatusOr<int64_t> PutRegressResult(const RegressResult& r,
                                     const Provenance& prov);
  // Results of `benchmark` on `hardware_id` ("" = any), oldest first.
  StatusOr<std::vector<RegressResult>> GetRegressResults(
      const std::string& benchmark = "",
      const std::string& hardware_id = "") const;
  // One result; NotFound naming the id and how to list them.
  StatusOr<RegressResult> GetRegressResult(int64_t id) const;
  // Sets (inserts or replaces) baseline (b.name, b.result.benchmark) in one
  // transaction. The hardware id must exist.
  Status PutRegressBaseline(const RegressBaseline& b, const Provenance& prov);
  // Baselines of `benchmark` ("" = all), by benchmark then name.
  StatusOr<std::vector<RegressBaseline>> ListRegressBaselines(
      const std::string& benchmark = "") const;
  // Baseline `name` of `benchmark`; NotFound (no hint: callers know which
  // command sets one) when there is none.
  StatusOr<RegressBaseline> GetRegressBaseline(
      const std::string& name, const std::string& benchmark) const;

  // `tune validate`: a validation and its runs in one transaction.
  StatusOr<int64_t> PutValidation(const ValidationRecord& v,
                                  const std::vector<ValidationRunRecord>& runs,
                                  const Provenance& prov);
  // All validations, oldest first.
  StatusOr<std::vector<ValidationRecord>> ListValidations() const;
  // Runs of one validation in selection order.
  StatusOr<std::vector<ValidationRunRecord>> GetValidationRuns(
      int64_t validation_id) const;
  StatusOr<int64_t> PutFittedFactors(const FittedFactorsRecord& f,
                                     const Provenance& prov);
  // The newest factors for (hardware, base calibration), if any.
  StatusOr<std::optional<FittedFactorsRecord>> GetFittedFactors(
      const std::string& hardware_id,
      const std::string& base_calibration) const;

 private:
  Store(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  Status Exec(const char* sql);
  sqlite3* db_;
  std::string path_;
};

}  // namespace meshtune::results

#endif  // MESHTUNE_RESULTS_STORE_H_
