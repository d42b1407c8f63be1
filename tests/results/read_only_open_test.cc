// Store::Open with read_only (tune db, tune export): works on a file of mode
// 0444 in a directory nobody may write to, and never creates -wal/-shm
// files or changes the database's bytes or mtime; with a writer holding the
// database open it still sees the writer's committed rows.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "results/store.h"
#include "tests/file_faults.h"

namespace meshtune::results {
namespace {

using test_files::ListDir;

Provenance Prov() { return {"0.1.0", "test", 1700000000}; }

HardwareFingerprint Cpu(const std::string& model) {
  HardwareFingerprint hw;
  hw.backend = "cpu";
  hw.cpu_model = model;
  hw.cpu_cores = 4;
  hw.memory_gib = 16;
  return hw;
}

std::string Bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class ReadOnlyOpenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/read_only_open_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    // A path with URI-special characters: the read-only open builds a URI.
    path_ = dir_ + "/t?x#y%z.db";
    auto store = Store::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status().message();
    ASSERT_TRUE((*store)->PutHardware(Cpu("seeded"), Prov()).ok());
  }
  void TearDown() override {
    chmod(dir_.c_str(), 0755);
    for (const std::string& name : ListDir(dir_)) {
      std::remove((dir_ + "/" + name).c_str());
    }
    rmdir(dir_.c_str());
  }

  std::string dir_;
  std::string path_;
};

TEST_F(ReadOnlyOpenTest, ReadsAMode0444FileWithoutCreatingOrWriting) {
  ASSERT_EQ(ListDir(dir_), std::vector<std::string>{"t?x#y%z.db"});
  ASSERT_EQ(chmod(path_.c_str(), 0444), 0);
  ASSERT_EQ(chmod(dir_.c_str(), 0555), 0);
  struct stat before;
  ASSERT_EQ(stat(path_.c_str(), &before), 0);
  const std::string bytes = Bytes(path_);

  OpenOptions options;
  options.read_only = true;
  {
    auto store = Store::Open(path_, options);
    ASSERT_TRUE(store.ok()) << store.status().message();
    auto machines = (*store)->ListHardware();
    ASSERT_TRUE(machines.ok()) << machines.status().message();
    ASSERT_EQ(machines->size(), 1u);
    EXPECT_EQ(machines->front().cpu_model, "seeded");
    // Neither during the read (root ignores the modes, so this is what
    // shows that nothing is created) ...
    EXPECT_EQ(ListDir(dir_), std::vector<std::string>{"t?x#y%z.db"});
    std::ostringstream csv;
    EXPECT_TRUE((*store)->ExportCsv("hardware", csv).ok());
    EXPECT_NE(csv.str().find("seeded"), std::string::npos);
    EXPECT_EQ((*store)->PutHardware(Cpu("other"), Prov()).code(),
              Status::Code::kIoError);
  }
  // ... nor after.
  EXPECT_EQ(ListDir(dir_), std::vector<std::string>{"t?x#y%z.db"});
  struct stat after;
  ASSERT_EQ(stat(path_.c_str(), &after), 0);
  EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  EXPECT_EQ(Bytes(path_), bytes);
}

TEST_F(ReadOnlyOpenTest, SeesTheCommittedRowsOfAnOpenWriter) {
  auto writer = Store::Open(path_);
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  // Committed into the writer's WAL, not yet checkpointed into the file.
  ASSERT_TRUE((*writer)->PutHardware(Cpu("in the wal"), Prov()).ok());
  OpenOptions options;
  options.read_only = true;
  auto reader = Store::Open(path_, options);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  auto machines = (*reader)->ListHardware();
  ASSERT_TRUE(machines.ok()) << machines.status().message();
  EXPECT_EQ(machines->size(), 2u);
}

}  // namespace
}  // namespace meshtune::results
