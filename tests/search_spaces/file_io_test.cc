// search_spaces/file_io.h: reading only regular files (a FIFO must not hang
// the reader) and writing through a temporary file renamed over the target,
// so that a failing write leaves the previous file intact.
#include "search_spaces/file_io.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/file_faults.h"

namespace meshtune::search_spaces {
namespace {

using test_files::FileSizeLimit;
using test_files::ListDir;

std::string MakeTempDir() {
  char dir[] = "/tmp/file_io_test_XXXXXX";
  const char* made = mkdtemp(dir);
  return made != nullptr ? made : "/tmp";
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(WriteFileAtomically, CreatesAndReplaces) {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/out.txt";
  ASSERT_TRUE(WriteFileAtomically(path, "first\n", "test file").ok());
  EXPECT_EQ(ReadFile(path), "first\n");
  ASSERT_TRUE(WriteFileAtomically(path, "second\n", "test file").ok());
  EXPECT_EQ(ReadFile(path), "second\n");
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"out.txt"});
}

TEST(WriteFileAtomically, FullDiskKeepsThePreviousFile) {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/out.txt";
  WriteFile(path, "old content\n");
  Status status;
  {
    FileSizeLimit limit(16);
    status = WriteFileAtomically(path, std::string(4096, 'x'), "test file");
  }
  EXPECT_EQ(status.code(), Status::Code::kIoError);
  EXPECT_EQ(status.message(),
            "cannot write test file '" + path + "': File too large");
  EXPECT_EQ(status.hint(),
            "free disk space or choose another path; the previous file, if "
            "any, is unchanged");
  EXPECT_EQ(ReadFile(path), "old content\n");
  // No "out.txt.tmp-<pid>" left behind.
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"out.txt"});
}

TEST(WriteFileAtomically, MissingDirectoryIsAnIoError) {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/no/such/out.txt";
  const Status status = WriteFileAtomically(path, "x", "test file");
  EXPECT_EQ(status.code(), Status::Code::kIoError);
  EXPECT_EQ(status.message(),
            "cannot write test file '" + path + "': No such file or directory");
  EXPECT_TRUE(ListDir(dir).empty());
}

TEST(WriteFileAtomically, DirectoryTargetIsRefusedAndKept) {
  const std::string dir = MakeTempDir();
  const std::string target = dir + "/sub";
  ASSERT_EQ(mkdir(target.c_str(), 0755), 0);
  WriteFile(target + "/keep", "kept");
  const Status status = WriteFileAtomically(target, "x", "test file");
  EXPECT_EQ(status.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(status.ExitCode(), 2);
  EXPECT_EQ(status.message(),
            "cannot write test file '" + target + "': it is a directory");
  EXPECT_EQ(ReadFile(target + "/keep"), "kept");
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"sub"});
}

TEST(WriteFileAtomically, EmptyPathIsAnInputError) {
  const Status status = WriteFileAtomically("", "x", "test file");
  EXPECT_EQ(status.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(status.message(), "test file path is empty");
}

TEST(CheckRegularFile, RegularMissingDirectoryAndFifo) {
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/a.yaml", "x: 1\n");
  EXPECT_TRUE(CheckRegularFile(dir + "/a.yaml", "model file").ok());

  const Status missing = CheckRegularFile(dir + "/b.yaml", "model file");
  EXPECT_EQ(missing.code(), Status::Code::kNotFound);
  EXPECT_EQ(missing.message(), "model file '" + dir + "/b.yaml' not found");

  const Status directory = CheckRegularFile(dir, "model file");
  EXPECT_EQ(directory.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(directory.message(), "model file '" + dir + "' is a directory");

  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  const Status not_regular = CheckRegularFile(fifo, "model file");
  EXPECT_EQ(not_regular.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(not_regular.message(),
            "model file '" + fifo +
                "' is not a regular file (a FIFO, socket or device)");
}

TEST(ReadRegularFile, ReadsAndRefusesAFifoPromptly) {
  const std::string dir = MakeTempDir();
  const std::string big(200000, 'y');  // more than one read() of 64 KiB
  WriteFile(dir + "/big.txt", big);
  auto text = ReadRegularFile(dir + "/big.txt", "checkpoint shard");
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(text.value(), big);

  EXPECT_EQ(ReadRegularFile(dir + "/none", "checkpoint shard").status().code(),
            Status::Code::kNotFound);
  EXPECT_EQ(ReadRegularFile(dir, "checkpoint shard").status().code(),
            Status::Code::kInvalidArgument);

  // No writer ever opens the FIFO: a plain open() for reading would block
  // for ever, so returning at all is most of the test.
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  const auto start = std::chrono::steady_clock::now();
  auto from_fifo = ReadRegularFile(fifo, "checkpoint shard");
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_EQ(from_fifo.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(from_fifo.status().message(),
            "checkpoint shard '" + fifo +
                "' is not a regular file (a FIFO, socket or device)");
  EXPECT_LT(elapsed_s, 1.0);
}

}  // namespace
}  // namespace meshtune::search_spaces
