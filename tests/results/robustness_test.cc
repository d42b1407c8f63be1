// Robustness of the results store across processes (issue 4): concurrent
// writers, a writer killed mid-transaction, corrupt/foreign files, newer
// schemas, locked and read-only databases. Each test uses a fresh file under
// /tmp and fork()s real processes where the issue asks for processes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "results/store.h"

namespace meshtune::results {
namespace {

Provenance Prov() { return {"0.1.0", "test", 1700000000}; }

class RobustnessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/results_robust_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/tune.db";
  }
  void TearDown() override {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      std::remove((path_ + suffix).c_str());
    }
    rmdir(dir_.c_str());
  }

  static std::string Bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // A store with one CPU fingerprint; returns its id.
  std::string Seed() {
    auto store = Store::Open(path_);
    EXPECT_TRUE(store.ok()) << store.status().message();
    HardwareFingerprint hw;
    hw.backend = "cpu";
    hw.cpu_model = "test cpu";
    hw.cpu_cores = 2;
    hw.id = ComputeHardwareId(hw);
    EXPECT_TRUE((*store)->PutHardware(hw, Prov()).ok());
    return hw.id;
  }

  static std::vector<Measurement> Batch(const std::string& hw, int n,
                                        int64_t tag) {
    std::vector<Measurement> rows(n);
    for (int i = 0; i < n; ++i) {
      rows[i].hardware_id = hw;
      rows[i].op = "stream";
      rows[i].dtype = "fp32";
      rows[i].bytes = static_cast<double>(i + 1);
      rows[i].group_size = tag;  // which writer
      rows[i].median_s = 1e-6;
      rows[i].timer = "steady_clock";
    }
    return rows;
  }

  static int WaitExit(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  std::string dir_;
  std::string path_;
};

TEST_F(RobustnessTest, TwoProcessesWritingAtOnceBothSucceed) {
  const std::string hw = Seed();
  constexpr int kBatches = 40, kRows = 25;
  pid_t pids[2];
  for (int w = 0; w < 2; ++w) {
    pids[w] = fork();
    ASSERT_GE(pids[w], 0);
    if (pids[w] == 0) {
      // Each child opens its own connection, as two `tune profile` would.
      auto store = Store::Open(path_);
      if (!store.ok()) _exit(10);
      for (int b = 0; b < kBatches; ++b) {
        if (!(*store)->PutMeasurements(Batch(hw, kRows, w + 1), Prov()).ok()) {
          _exit(11);
        }
      }
      _exit(0);
    }
  }
  EXPECT_EQ(WaitExit(pids[0]), 0);
  EXPECT_EQ(WaitExit(pids[1]), 0);
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  auto rows = (*store)->GetMeasurements(hw);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u * kBatches * kRows);
  int from_first = 0;
  for (const Measurement& r : *rows) from_first += r.group_size == 1;
  EXPECT_EQ(from_first, kBatches * kRows);
}

TEST_F(RobustnessTest, TwoProcessesCreatingTheSameNewFileBothSucceed) {
  // The race (WAL switch and schema creation by two processes at once) is
  // timing-dependent, so it is run on several fresh files.
  for (int attempt = 0; attempt < 10; ++attempt) {
    const std::string path = path_ + "." + std::to_string(attempt);
    pid_t pids[2];
    for (int w = 0; w < 2; ++w) {
      pids[w] = fork();
      ASSERT_GE(pids[w], 0);
      if (pids[w] == 0) {
        auto store = Store::Open(path);
        _exit(store.ok() && *(*store)->SchemaVersion() == kSchemaVersion ? 0
                                                                         : 12);
      }
    }
    EXPECT_EQ(WaitExit(pids[0]), 0) << "attempt " << attempt;
    EXPECT_EQ(WaitExit(pids[1]), 0) << "attempt " << attempt;
    for (const char* suffix : {"", "-wal", "-shm"}) {
      std::remove((path + suffix).c_str());
    }
  }
}

TEST_F(RobustnessTest, WriterKilledMidTransactionLeavesEarlierData) {
  const std::string hw = Seed();
  {
    auto store = Store::Open(path_);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->PutMeasurements(Batch(hw, 100, 1), Prov()).ok());
  }
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Start a big transaction with a tiny page cache so uncommitted pages
    // spill into the WAL file, then report and wait to be killed.
    sqlite3* db = nullptr;
    if (sqlite3_open(path_.c_str(), &db) != SQLITE_OK) _exit(20);
    sqlite3_exec(db, "PRAGMA cache_size = 8; BEGIN IMMEDIATE", nullptr, nullptr,
                 nullptr);
    for (int i = 0; i < 20000; ++i) {
      sqlite3_exec(db,
                   "INSERT INTO measurements (hardware_id, op, dtype, m, n, "
                   "k, bytes, group_size, nodes, ranks_per_node, samples, "
                   "median_s, min_s, p99_s, cv, timer, tool_version, "
                   "git_revision, created_unix_s) SELECT hardware_id, op, "
                   "dtype, m, n, k, bytes, 9, nodes, ranks_per_node, "
                   "samples, median_s, min_s, p99_s, cv, timer, "
                   "tool_version, git_revision, created_unix_s FROM "
                   "measurements LIMIT 1",
                   nullptr, nullptr, nullptr);
    }
    if (write(ready[1], "x", 1) != 1) _exit(21);
    pause();
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  struct stat info;
  ASSERT_EQ(stat((path_ + "-wal").c_str(), &info), 0);
  EXPECT_GT(info.st_size, 0);  // the killed transaction reached the disk
  kill(pid, SIGKILL);
  EXPECT_EQ(WaitExit(pid), 128 + SIGKILL);
  close(ready[0]);
  close(ready[1]);

  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto rows = (*store)->GetMeasurements(hw);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  EXPECT_EQ(rows->size(), 100u);  // all earlier rows, none of the killed
  // And the database still takes writes.
  EXPECT_TRUE((*store)->PutMeasurements(Batch(hw, 5, 2), Prov()).ok());
}

TEST_F(RobustnessTest, StoreKilledDuringPutMeasurementsIsAllOrNothing) {
  const std::string hw = Seed();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto store = Store::Open(path_);
    if (!store.ok()) _exit(30);
    for (;;) (*store)->PutMeasurements(Batch(hw, 5000, 1), Prov()).ok();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(pid, SIGKILL);
  WaitExit(pid);
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto rows = (*store)->GetMeasurements(hw);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size() % 5000, 0u);  // whole batches only
}

TEST_F(RobustnessTest, TextFileIsRefusedAndNotModified) {
  const std::string text = "model: gpt3-175b\nnot a database\n";
  std::ofstream(path_) << text;
  auto store = Store::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(store.status().message(),
            path_ + ": not an SQLite database (it was not modified)");
  EXPECT_EQ(Bytes(path_), text);
  EXPECT_NE(access((path_ + "-wal").c_str(), F_OK), 0);
}

TEST_F(RobustnessTest, ForeignSqliteFileIsRefusedAndNotModified) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE contacts (name TEXT); INSERT INTO "
                         "contacts VALUES ('ada')",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  const std::string before = Bytes(path_);
  auto store = Store::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().message(),
            path_ +
                ": an SQLite database of another program, not a meshtune "
                "results database (it was not modified)");
  EXPECT_EQ(Bytes(path_), before);
}

TEST_F(RobustnessTest, CorruptSqliteFileIsRefusedAndNotModified) {
  std::string bytes("SQLite format 3", 16);  // the magic and its NUL
  bytes += std::string(4080, '\x5a');
  std::ofstream(path_, std::ios::binary) << bytes;
  auto store = Store::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(
      store.status().message().rfind(path_ + ": cannot read the header: ", 0),
      0u)
      << store.status().message();
  EXPECT_EQ(store.status().message().find('\n'), std::string::npos);
  EXPECT_EQ(Bytes(path_), bytes);
}

TEST_F(RobustnessTest, NewerSchemaIsRefusedNamingBothVersions) {
  Seed();
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(
        sqlite3_exec(db, "PRAGMA user_version = 7", nullptr, nullptr, nullptr),
        SQLITE_OK);
    sqlite3_close(db);
  }
  const std::string before = Bytes(path_);
  auto store = Store::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(store.status().message(),
            path_ +
                ": results database schema version 7 is newer than this "
                "tune's version " +
                std::to_string(kSchemaVersion));
  EXPECT_EQ(store.status().hint(),
            "use a newer tune, or pass --db with another file");
  EXPECT_EQ(Bytes(path_), before);
}

TEST_F(RobustnessTest, LockedDatabaseGivesAClearErrorAfterTheTimeout) {
  const std::string hw = Seed();
  sqlite3* holder = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &holder), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(holder, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr),
            SQLITE_OK);
  OpenOptions options;
  options.busy_timeout_ms = 100;
  auto store = Store::Open(path_, options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kIoError);
  EXPECT_EQ(
      store.status().message(),
      path_ + ": cannot lock the database to upgrade: database is locked");
  EXPECT_EQ(store.status().hint(),
            "another process holds the database; retry when it finishes, or "
            "pass --db with another file");
  sqlite3_exec(holder, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_close(holder);
  EXPECT_TRUE(Store::Open(path_, options).ok());
}

TEST_F(RobustnessTest, ReadOnlyOpenNeverCreatesOrWrites) {
  OpenOptions read_only;
  read_only.read_only = true;
  auto missing = Store::Open(path_, read_only);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(missing.status().message(), path_ + ": no such results database");
  EXPECT_NE(access(path_.c_str(), F_OK), 0);

  const std::string hw = Seed();
  auto store = Store::Open(path_, read_only);
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ((*store)->ListHardware()->size(), 1u);
  HardwareFingerprint other;
  other.backend = "cpu";
  other.cpu_model = "other";
  Status s = (*store)->PutHardware(other, Prov());
  EXPECT_EQ(s.code(), Status::Code::kIoError);
  EXPECT_EQ(s.message(), path_ +
                             ": query failed: attempt to write a readonly "
                             "database");
}

}  // namespace
}  // namespace meshtune::results
