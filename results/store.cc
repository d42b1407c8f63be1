// Store: opening, validation of foreign/newer files, migrations, hardware and
// measurements. Searches, candidates and training runs are in
// store_searches.cc; CSV export in store_export.cc.
#include "results/store.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>

#include "results/sqlite_statement.h"

namespace meshtune::results {
namespace {

// Provenance columns shared by every table.
constexpr const char* kProvenanceColumns =
    "tool_version TEXT NOT NULL, git_revision TEXT NOT NULL, "
    "created_unix_s INTEGER NOT NULL";

std::string V1Sql() {
  const std::string prov = kProvenanceColumns;
  // Parallel configuration columns follow Megatron's argument names
  // (docs/design.md §2); recompute is split so it can be queried.
  const std::string config =
      "tp INTEGER NOT NULL, pp INTEGER NOT NULL, vpp INTEGER NOT NULL, "
      "cp INTEGER NOT NULL, dp INTEGER NOT NULL, ep INTEGER NOT NULL, "
      "sp INTEGER NOT NULL, mbs INTEGER NOT NULL, "
      "recompute TEXT NOT NULL, recompute_method TEXT NOT NULL, "
      "recompute_num_layers INTEGER NOT NULL, dist_opt INTEGER NOT NULL, "
      "config_text TEXT NOT NULL";
  return "CREATE TABLE hardware ("
         "id TEXT PRIMARY KEY, backend TEXT NOT NULL, cpu_model TEXT NOT NULL, "
         "cpu_cores INTEGER NOT NULL, memory_gib REAL NOT NULL, "
         "gpu_model TEXT NOT NULL, gpu_count INTEGER NOT NULL, "
         "driver_version TEXT NOT NULL, library_versions TEXT NOT NULL, " +
         prov +
         ");\n"
         "CREATE TABLE measurements ("
         "id INTEGER PRIMARY KEY, "
         "hardware_id TEXT NOT NULL REFERENCES hardware(id), "
         "op TEXT NOT NULL, dtype TEXT NOT NULL, m INTEGER NOT NULL, "
         "n INTEGER NOT NULL, k INTEGER NOT NULL, bytes REAL NOT NULL, "
         "group_size INTEGER NOT NULL, nodes INTEGER NOT NULL, "
         "ranks_per_node INTEGER NOT NULL, samples INTEGER NOT NULL, "
         "median_s REAL NOT NULL, min_s REAL NOT NULL, p99_s REAL NOT NULL, "
         "cv REAL NOT NULL, timer TEXT NOT NULL, " +
         prov +
         ");\n"
         "CREATE INDEX measurements_by_hardware_op "
         "ON measurements(hardware_id, op);\n"
         "CREATE TABLE searches ("
         "id INTEGER PRIMARY KEY, model TEXT NOT NULL, gpu TEXT NOT NULL, "
         "gpus INTEGER NOT NULL, gpus_per_node INTEGER NOT NULL, "
         "gbs INTEGER NOT NULL, seq_length INTEGER NOT NULL, "
         "precision TEXT NOT NULL, "
         "hardware_id TEXT REFERENCES hardware(id), "
         "arguments TEXT NOT NULL, evaluated INTEGER NOT NULL, "
         "feasible INTEGER NOT NULL, elapsed_s REAL NOT NULL, " +
         prov +
         ");\n"
         "CREATE TABLE candidates ("
         "id INTEGER PRIMARY KEY, "
         "search_id INTEGER NOT NULL REFERENCES searches(id), "
         "rank INTEGER NOT NULL, " +
         config +
         ", fits INTEGER NOT NULL, infeasible_reason TEXT NOT NULL, "
         "step_time_s REAL NOT NULL, tokens_per_s REAL NOT NULL, "
         "mfu REAL NOT NULL, memory_gib REAL NOT NULL, "
         "calibration TEXT NOT NULL, estimate_json TEXT NOT NULL, " +
         prov +
         ", UNIQUE (search_id, rank));\n"
         "CREATE TABLE training_runs ("
         "id INTEGER PRIMARY KEY, "
         "candidate_id INTEGER REFERENCES candidates(id), "
         "hardware_id TEXT REFERENCES hardware(id), model TEXT NOT NULL, " +
         config +
         ", gbs INTEGER NOT NULL, seq_length INTEGER NOT NULL, "
         "steps INTEGER NOT NULL, step_time_median_s REAL NOT NULL, "
         "step_time_min_s REAL NOT NULL, step_time_p99_s REAL NOT NULL, "
         "step_time_cv REAL NOT NULL, tokens_per_s REAL NOT NULL, "
         "final_loss REAL NOT NULL, " +
         prov +
         ");\n"
         "CREATE INDEX training_runs_by_candidate "
         "ON training_runs(candidate_id);\n"
         // Predictions (candidates) and measurements (training_runs) stay in
         // separate tables; this view is the one "predicted vs measured"
         // query of docs/design.md §7.
         "CREATE VIEW predicted_vs_measured AS "
         "SELECT c.search_id AS search_id, c.id AS candidate_id, "
         "c.rank AS rank, c.config_text AS config_text, "
         "r.id AS training_run_id, c.step_time_s AS predicted_step_time_s, "
         "r.step_time_median_s AS measured_step_time_s, "
         "(c.step_time_s - r.step_time_median_s) / r.step_time_median_s "
         "AS relative_error "
         "FROM candidates c JOIN training_runs r ON r.candidate_id = c.id;\n";
}

// `tune regress` (results/store_regress.cc): benchmark results and named
// baselines. Per-repeat throughputs and per-step losses are JSON arrays of
// numbers (they are read and written whole); medians and spreads are columns
// so they can be queried. A baseline copies its result's numbers, so an
// imported one needs no result row; (name, benchmark) is unique.
std::string V2Sql() {
  const std::string prov = kProvenanceColumns;
  const std::string result =
      "benchmark TEXT NOT NULL, spec TEXT NOT NULL, "
      "hardware_id TEXT NOT NULL REFERENCES hardware(id), "
      "threads INTEGER NOT NULL, warmup_steps INTEGER NOT NULL, "
      "steps_per_repeat INTEGER NOT NULL, tokens_per_step INTEGER NOT NULL, "
      "tokens_per_s_json TEXT NOT NULL, cpu_tokens_per_s_json TEXT NOT NULL, "
      "tokens_per_s_median REAL NOT NULL, tokens_per_s_spread REAL NOT NULL, "
      "cpu_tokens_per_s_median REAL NOT NULL, "
      "cpu_tokens_per_s_spread REAL NOT NULL, losses_json TEXT NOT NULL";
  return "CREATE TABLE regress_results (id INTEGER PRIMARY KEY, " + result +
         ", " + prov +
         ");\n"
         "CREATE INDEX regress_results_by_benchmark "
         "ON regress_results(benchmark, hardware_id);\n"
         "CREATE TABLE regress_baselines (id INTEGER PRIMARY KEY, "
         "name TEXT NOT NULL, "
         "source_result_id INTEGER REFERENCES regress_results(id), " +
         result +
         ", result_tool_version TEXT NOT NULL, "
         "result_git_revision TEXT NOT NULL, "
         "result_created_unix_s INTEGER NOT NULL, " +
         prov + ", UNIQUE (name, benchmark));\n";
}

// `tune validate` (results/store_validate.cc): each validation of a search,
// the outcome of every candidate it ran (failed ones with their error), and
// the efficiency factors fitted to a machine's measured runs.
std::string V3Sql() {
  const std::string prov = kProvenanceColumns;
  return "CREATE TABLE validations (id INTEGER PRIMARY KEY, "
         "search_id INTEGER NOT NULL REFERENCES searches(id), "
         "hardware_id TEXT NOT NULL, steps INTEGER NOT NULL, "
         "measured INTEGER NOT NULL, spearman REAL, mape_pct REAL, "
         "top1_is_measured_best INTEGER NOT NULL, top1_loss_pct REAL, "
         "measured_best_candidate_id INTEGER, " +
         prov +
         ");\n"
         "CREATE TABLE validation_runs (id INTEGER PRIMARY KEY, "
         "validation_id INTEGER NOT NULL REFERENCES validations(id), "
         "candidate_id INTEGER NOT NULL REFERENCES candidates(id), "
         "reason TEXT NOT NULL, status TEXT NOT NULL "
         "CHECK (status IN ('ok', 'failed')), error TEXT NOT NULL, "
         "predicted_step_s REAL NOT NULL, measured_step_s REAL, "
         "training_run_id INTEGER REFERENCES training_runs(id), "
         "wall_s REAL NOT NULL);\n"
         "CREATE TABLE fitted_factors (id INTEGER PRIMARY KEY, "
         "hardware_id TEXT NOT NULL, base_calibration TEXT NOT NULL, "
         "compute REAL NOT NULL, memory REAL NOT NULL, "
         "collective REAL NOT NULL, runs INTEGER NOT NULL, "
         "mape_before_pct REAL NOT NULL, mape_after_pct REAL NOT NULL, " +
         prov +
         ");\n"
         "CREATE INDEX fitted_factors_by_machine "
         "ON fitted_factors(hardware_id, base_calibration);\n";
}

// The configuration fields the V1 columns lacked: expert tensor
// parallelism (0 = tp, Megatron's default), the uneven pipeline layout (-1 =
// the even split) and the selective-recompute modules (bits of
// search_spaces::RecomputeModule; 1 = core_attn, the default). Without them
// a stored candidate read back (tune train --from-search, tune validate)
// trained etp = tp whatever the search had chosen. Old rows get the
// defaults, which is what their config_text says unless it names etp or a
// layout.
std::string V4Sql() {
  std::string sql;
  for (const char* table : {"candidates", "training_runs"}) {
    const std::string t = table;
    sql += "ALTER TABLE " + t +
           " ADD COLUMN etp INTEGER NOT NULL DEFAULT 0;\n" + "ALTER TABLE " +
           t +
           " ADD COLUMN layout_first_layers INTEGER NOT NULL DEFAULT -1;\n" +
           "ALTER TABLE " + t +
           " ADD COLUMN layout_last_layers INTEGER NOT NULL DEFAULT -1;\n" +
           "ALTER TABLE " + t +
           " ADD COLUMN recompute_modules INTEGER NOT NULL DEFAULT 1;\n";
  }
  return sql;
}

// Runs fixed SQL (one or more statements, no user values) statement by
// statement through the prepared-statement interface.
Status ExecScript(sqlite3* db, const std::string& path, const std::string& sql,
                  const std::string& what) {
  const char* tail = sql.c_str();
  while (tail != nullptr && *tail != '\0') {
    sqlite3_stmt* stmt = nullptr;
    const char* next = nullptr;
    int rc = sqlite3_prepare_v2(db, tail, -1, &stmt, &next);
    if (rc != SQLITE_OK) return SqliteError(path, db, rc, what);
    if (stmt != nullptr) {
      do {
        rc = sqlite3_step(stmt);
      } while (rc == SQLITE_ROW);
      sqlite3_finalize(stmt);
      if (rc != SQLITE_DONE) return SqliteError(path, db, rc, what);
    }
    tail = next;
  }
  return Status::Ok();
}

StatusOr<int64_t> QueryInt(sqlite3* db, const std::string& path,
                           const std::string& sql, const std::string& what) {
  Statement st(db, path);
  Status s = st.Prepare(sql);
  if (!s.ok()) {
    return SqliteError(path, db, sqlite3_errcode(db), what);
  }
  StatusOr<bool> row = st.Step();
  if (!row.ok()) return SqliteError(path, db, sqlite3_errcode(db), what);
  return *row ? st.Int(0) : 0;
}

// The file's first 16 bytes must be SQLite's magic; an empty file is treated
// like a new one (SQLite does the same). Checked before SQLite opens it, so a
// foreign file is never touched.
Status CheckFileHeader(const std::string& path, bool read_only) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    if (read_only) {
      return Status::NotFound(
          path + ": no such results database",
          "run 'tune search' or 'tune profile' first, or pass --db PATH");
    }
    return Status::Ok();
  }
  if (S_ISDIR(info.st_mode)) {
    return Status::InvalidArgument(path + ": is a directory, not a database",
                                   "pass --db with a file path");
  }
  if (info.st_size == 0) return Status::Ok();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::IoError(path + ": cannot read the results database",
                           "check the file's permissions");
  }
  char magic[16] = {};
  in.read(magic, sizeof(magic));
  static constexpr char kMagic[16] = "SQLite format 3";  // includes the NUL
  if (in.gcount() != 16 || std::memcmp(magic, kMagic, 16) != 0) {
    return Status::InvalidArgument(
        path + ": not an SQLite database (it was not modified)",
        "pass --db with a meshtune results database or a new file name");
  }
  return Status::Ok();
}

bool PathExists(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0;
}

// `path` as an SQLite URI that opens it immutable (docs: sqlite.org/uri.html):
// '%', '?' and '#' are percent-encoded, and an absolute path gets an empty
// authority ("file:///abs") so that "//x" is never read as a host name.
std::string ImmutableUri(const std::string& path) {
  std::string uri = path.empty() || path[0] != '/' ? "file:" : "file://";
  for (char ch : path) {
    if (ch == '%' || ch == '?' || ch == '#') {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", static_cast<unsigned char>(ch));
      uri += buf;
    } else {
      uri += ch;
    }
  }
  return uri + "?immutable=1";
}

// Refuses SQLite files of other programs and newer schemas; returns the
// current schema version.
StatusOr<int64_t> CheckOwnership(sqlite3* db, const std::string& path,
                                 int target_version) {
  StatusOr<int64_t> app_id =
      QueryInt(db, path, "PRAGMA application_id", "cannot read the header");
  if (!app_id.ok()) return app_id.status();
  StatusOr<int64_t> version =
      QueryInt(db, path, "PRAGMA user_version", "cannot read the header");
  if (!version.ok()) return version.status();
  StatusOr<int64_t> objects = QueryInt(
      db, path,
      "SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'",
      "cannot read the schema");
  if (!objects.ok()) return objects.status();
  const bool ours = *app_id == kApplicationId;
  if ((*app_id != 0 && !ours) || (*app_id == 0 && *objects > 0)) {
    return Status::InvalidArgument(
        path +
            ": an SQLite database of another program, not a meshtune results "
            "database (it was not modified)",
        "pass --db with a meshtune results database or a new file name");
  }
  if (*version > target_version) {
    return Status::InvalidArgument(
        path + ": results database schema version " + std::to_string(*version) +
            " is newer than this tune's version " +
            std::to_string(target_version),
        "use a newer tune, or pass --db with another file");
  }
  return *version;
}

// Switches to WAL unless the file is already in it. The switch needs an
// exclusive lock and SQLite does not always call the busy handler for it
// (another process creating the same file at the same moment), so BUSY is
// retried here until the busy timeout.
Status SetWalMode(sqlite3* db, const std::string& path, int busy_timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(busy_timeout_ms);
  for (;;) {
    Statement st(db, path);
    MESHTUNE_RETURN_IF_ERROR(st.Prepare("PRAGMA journal_mode = WAL"));
    StatusOr<bool> row = st.Step();
    if (row.ok() && *row && st.Text(0) == "wal") return Status::Ok();
    if (row.ok()) {
      return Status::IoError(path + ": cannot switch to WAL journal mode",
                             "put the database on a local file system");
    }
    const int rc = sqlite3_errcode(db) & 0xff;
    if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) ||
        std::chrono::steady_clock::now() >= deadline) {
      return SqliteError(path, db, sqlite3_errcode(db),
                         "cannot switch to WAL journal mode");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Brings the schema from its current version to the last migration's, in one
// IMMEDIATE transaction (so two processes opening a new file at once do not
// both create tables: the second sees the first's version after waiting).
Status Migrate(sqlite3* db, const std::string& path,
               const std::vector<Migration>& migrations) {
  MESHTUNE_RETURN_IF_ERROR(ExecScript(db, path, "BEGIN IMMEDIATE",
                                      "cannot lock the database to upgrade"));
  auto rollback = [&](Status s) {
    ExecScript(db, path, "ROLLBACK", "rollback");
    return s;
  };
  const int target = migrations.empty() ? 0 : migrations.back().to_version;
  StatusOr<int64_t> current = CheckOwnership(db, path, target);
  if (!current.ok()) return rollback(current.status());
  int64_t version = *current;
  for (const Migration& m : migrations) {
    if (m.to_version <= version) continue;
    if (m.to_version != version + 1) {
      return rollback(Status::Internal(
          "results schema migrations skip from version " +
          std::to_string(version) + " to " + std::to_string(m.to_version)));
    }
    Status s =
        ExecScript(db, path, m.sql,
                   "schema upgrade to version " + std::to_string(m.to_version) +
                       " (" + m.description + ") failed");
    if (!s.ok()) return rollback(s);
    // PRAGMA values cannot be bound; these are integers we format.
    s = ExecScript(db, path,
                   "PRAGMA user_version = " + std::to_string(m.to_version),
                   "cannot record the schema version");
    if (!s.ok()) return rollback(s);
    version = m.to_version;
  }
  Status s = ExecScript(
      db, path, "PRAGMA application_id = " + std::to_string(kApplicationId),
      "cannot mark the database");
  if (!s.ok()) return rollback(s);
  return ExecScript(db, path, "COMMIT", "cannot commit the schema upgrade");
}

}  // namespace

const std::vector<Migration>& BuiltinMigrations() {
  static const std::vector<Migration> migrations = {
      {1, "hardware, measurements, searches, candidates, training runs",
       V1Sql()},
      {2, "regress results and baselines", V2Sql()},
      {3, "validations, their runs, fitted efficiency factors", V3Sql()},
      {4, "etp, pipeline layout and recompute modules of a configuration",
       V4Sql()},
  };
  return migrations;
}

Provenance MakeProvenance(std::string tool_version, std::string git_revision) {
  Provenance p;
  p.tool_version = std::move(tool_version);
  p.git_revision = std::move(git_revision);
  p.created_unix_s = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  return p;
}

std::string ComputeHardwareId(const HardwareFingerprint& hw) {
  // FNV-1a, 64 bit (Fowler/Noll/Vo): stable across builds and platforms,
  // unlike std::hash. Fields are separated by a byte that cannot occur in
  // them so "a","bc" and "ab","c" differ.
  uint64_t hash = 14695981039346656037ull;
  auto mix = [&hash](const std::string& field) {
    for (unsigned char c : field) {
      hash ^= c;
      hash *= 1099511628211ull;
    }
    hash ^= 0x1f;
    hash *= 1099511628211ull;
  };
  mix(hw.backend);
  mix(hw.cpu_model);
  mix(std::to_string(hw.cpu_cores));
  // Whole GiB: the OS reports slightly different totals across boots.
  mix(std::to_string(static_cast<int64_t>(hw.memory_gib + 0.5)));
  mix(hw.gpu_model);
  mix(std::to_string(hw.gpu_count));
  mix(hw.driver_version);
  mix(hw.library_versions);
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(hash));
  return (hw.backend.empty() ? std::string("hw") : hw.backend) + "-" + hex;
}

StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path,
                                             const OpenOptions& options) {
  const bool in_memory = path == ":memory:";
  const std::vector<Migration>& migrations =
      options.migrations != nullptr ? *options.migrations : BuiltinMigrations();
  const int target = migrations.empty() ? 0 : migrations.back().to_version;
  if (!in_memory) {
    MESHTUNE_RETURN_IF_ERROR(CheckFileHeader(path, options.read_only));
  }
  sqlite3* db = nullptr;
  int flags = options.read_only ? SQLITE_OPEN_READONLY
                                : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  std::string name = path;
  // A read-only open of a WAL database makes SQLite create -wal and -shm
  // next to it (and leave them, since a reader cannot checkpoint), which
  // fails on a read-only mount and writes where `tune db` promised not to.
  // Without a -wal or -journal file no writer has the database open and
  // nothing is pending, so the file alone is the database: open it
  // immutable, which creates nothing and takes no locks. A writer starting
  // during the read only appends to its own WAL; its checkpoint could at
  // worst make this one short read fail with a one-line error, never change
  // stored data. With a -wal present, the normal read-only open shares it.
  if (options.read_only && !in_memory && !PathExists(path + "-wal") &&
      !PathExists(path + "-journal")) {
    name = ImmutableUri(path);
    flags |= SQLITE_OPEN_URI;
  }
  int rc = sqlite3_open_v2(name.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    Status s = SqliteError(path, db, rc, "cannot open the results database");
    sqlite3_close(db);
    return s;
  }
  std::unique_ptr<Store> store(new Store(db, path));
  sqlite3_busy_timeout(db, options.busy_timeout_ms);
  // Validate before anything writes (journal mode, schema). One read
  // transaction, so the three header reads see one snapshot even while
  // another process is creating the schema.
  MESHTUNE_RETURN_IF_ERROR(
      ExecScript(db, path, "BEGIN", "cannot start a read transaction"));
  StatusOr<int64_t> version = CheckOwnership(db, path, target);
  ExecScript(db, path, "ROLLBACK", "cannot end a read transaction");
  if (!version.ok()) return version.status();
  if (options.read_only) {
    if (*version < target) {
      return Status::InvalidArgument(
          path + ": results database schema version " +
              std::to_string(*version) + " is older than this tune's version " +
              std::to_string(target),
          "run a command that writes it (tune search, tune profile) once to "
          "upgrade it");
    }
    return store;
  }
  if (sqlite3_db_readonly(db, "main") == 1) {
    return Status::IoError(path + ": the results database is read-only",
                           "check that the file and its directory are "
                           "writable, or pass --db with a writable path");
  }
  if (!in_memory) {
    // WAL: readers never block the writer, and a crash mid-transaction
    // leaves the last committed state (https://sqlite.org/wal.html).
    MESHTUNE_RETURN_IF_ERROR(SetWalMode(db, path, options.busy_timeout_ms));
  }
  MESHTUNE_RETURN_IF_ERROR(ExecScript(db, path, "PRAGMA foreign_keys = ON",
                                      "cannot enable foreign keys"));
  MESHTUNE_RETURN_IF_ERROR(Migrate(db, path, migrations));
  return store;
}

Store::~Store() { sqlite3_close(db_); }

Status Store::Exec(const char* sql) { return ExecScript(db_, path_, sql, sql); }

StatusOr<int> Store::SchemaVersion() const {
  StatusOr<int64_t> v =
      QueryInt(db_, path_, "PRAGMA user_version", "cannot read the version");
  if (!v.ok()) return v.status();
  return static_cast<int>(*v);
}

Status Store::PutHardware(const HardwareFingerprint& hw,
                          const Provenance& prov) {
  if (hw.backend != "cpu" && hw.backend != "cuda") {
    return Status::InvalidArgument(
        "hardware backend '" + hw.backend + "' is not cpu or cuda",
        "set HardwareFingerprint::backend to \"cpu\" or \"cuda\"");
  }
  Statement st(db_, path_);
  MESHTUNE_RETURN_IF_ERROR(st.Prepare(
      "INSERT INTO hardware (id, backend, cpu_model, cpu_cores, memory_gib, "
      "gpu_model, gpu_count, driver_version, library_versions, tool_version, "
      "git_revision, created_unix_s) VALUES (?,?,?,?,?,?,?,?,?,?,?,?) "
      "ON CONFLICT(id) DO UPDATE SET memory_gib = excluded.memory_gib"));
  st.Bind(1, hw.id.empty() ? ComputeHardwareId(hw) : hw.id);
  st.Bind(2, hw.backend);
  st.Bind(3, hw.cpu_model);
  st.Bind(4, hw.cpu_cores);
  st.Bind(5, hw.memory_gib);
  st.Bind(6, hw.gpu_model);
  st.Bind(7, hw.gpu_count);
  st.Bind(8, hw.driver_version);
  st.Bind(9, hw.library_versions);
  st.Bind(10, prov.tool_version);
  st.Bind(11, prov.git_revision);
  st.Bind(12, prov.created_unix_s);
  return st.Run();
}

StatusOr<std::vector<HardwareFingerprint>> Store::ListHardware() const {
  Statement st(db_, path_);
  MESHTUNE_RETURN_IF_ERROR(st.Prepare(
      "SELECT id, backend, cpu_model, cpu_cores, memory_gib, gpu_model, "
      "gpu_count, driver_version, library_versions FROM hardware "
      "ORDER BY created_unix_s, id"));
  std::vector<HardwareFingerprint> out;
  for (;;) {
    StatusOr<bool> row = st.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    HardwareFingerprint hw;
    hw.id = st.Text(0);
    hw.backend = st.Text(1);
    hw.cpu_model = st.Text(2);
    hw.cpu_cores = st.Int(3);
    hw.memory_gib = st.Double(4);
    hw.gpu_model = st.Text(5);
    hw.gpu_count = st.Int(6);
    hw.driver_version = st.Text(7);
    hw.library_versions = st.Text(8);
    out.push_back(std::move(hw));
  }
  return out;
}

Status Store::PutMeasurements(const std::vector<Measurement>& rows,
                              const Provenance& prov) {
  MESHTUNE_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  Statement st(db_, path_);
  Status s = st.Prepare(
      "INSERT INTO measurements (hardware_id, op, dtype, m, n, k, bytes, "
      "group_size, nodes, ranks_per_node, samples, median_s, min_s, p99_s, "
      "cv, timer, tool_version, git_revision, created_unix_s) "
      "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  for (size_t i = 0; s.ok() && i < rows.size(); ++i) {
    const Measurement& r = rows[i];
    st.Reset();
    st.Bind(1, r.hardware_id);
    st.Bind(2, r.op);
    st.Bind(3, r.dtype);
    st.Bind(4, r.m);
    st.Bind(5, r.n);
    st.Bind(6, r.k);
    st.Bind(7, r.bytes);
    st.Bind(8, r.group_size);
    st.Bind(9, r.nodes);
    st.Bind(10, r.ranks_per_node);
    st.Bind(11, r.samples);
    st.Bind(12, r.median_s);
    st.Bind(13, r.min_s);
    st.Bind(14, r.p99_s);
    st.Bind(15, r.cv);
    st.Bind(16, r.timer);
    st.Bind(17, prov.tool_version);
    st.Bind(18, prov.git_revision);
    st.Bind(19, prov.created_unix_s);
    s = st.Run();
    if (!s.ok() && s.message().find("FOREIGN KEY") != std::string::npos) {
      s = Status::InvalidArgument(
          path_ + ": measurement for unknown hardware id '" + r.hardware_id +
              "'",
          "store the fingerprint with PutHardware first");
    }
  }
  if (s.ok()) s = Exec("COMMIT");
  if (!s.ok()) Exec("ROLLBACK");
  return s;
}

StatusOr<std::vector<Measurement>> Store::GetMeasurements(
    const std::string& hardware_id, const std::string& op) const {
  Statement st(db_, path_);
  MESHTUNE_RETURN_IF_ERROR(st.Prepare(
      "SELECT hardware_id, op, dtype, m, n, k, bytes, group_size, nodes, "
      "ranks_per_node, samples, median_s, min_s, p99_s, cv, timer, "
      "tool_version, git_revision, created_unix_s FROM measurements "
      "WHERE (?1 = '' OR hardware_id = ?1) AND (?2 = '' OR op = ?2) "
      "ORDER BY id"));
  st.Bind(1, hardware_id);
  st.Bind(2, op);
  std::vector<Measurement> out;
  for (;;) {
    StatusOr<bool> row = st.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    Measurement r;
    r.hardware_id = st.Text(0);
    r.op = st.Text(1);
    r.dtype = st.Text(2);
    r.m = st.Int(3);
    r.n = st.Int(4);
    r.k = st.Int(5);
    r.bytes = st.Double(6);
    r.group_size = st.Int(7);
    r.nodes = st.Int(8);
    r.ranks_per_node = st.Int(9);
    r.samples = st.Int(10);
    r.median_s = st.Double(11);
    r.min_s = st.Double(12);
    r.p99_s = st.Double(13);
    r.cv = st.Double(14);
    r.timer = st.Text(15);
    r.provenance.tool_version = st.Text(16);
    r.provenance.git_revision = st.Text(17);
    r.provenance.created_unix_s = st.Int(18);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace meshtune::results
