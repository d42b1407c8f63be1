// Reading user-named YAML files (yaml_util::ReadFile, LooksLikePath) and
// quoting their text in messages (Printable): only regular files are read,
// so a FIFO given as a model, cluster or search-space file is refused at once
// instead of blocking for ever (issue 16 D7), and a FIFO or directory whose
// name looks like a preset is still treated as a path.
#include "search_spaces/yaml_util.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "search_spaces/presets/presets.h"
#include "tests/file_faults.h"

namespace meshtune::search_spaces {
namespace {

using test_files::FifoWatchdog;

std::string TempDir() {
  char dir[] = "/tmp/meshtune_yaml_util_test_XXXXXX";
  const char* made = ::mkdtemp(dir);
  return made ? made : "/tmp";
}

std::string MakeFifo(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0) << path;
  return path;
}

const char* kNotRegularHint =
    "give the path of a regular file; copy a stream to a file first";

TEST(RegularFilesOnly, FifoModelFileIsRefusedAtOnce) {
  const std::string dir = TempDir();
  const std::string fifo = MakeFifo(dir, "m.yaml");
  FifoWatchdog watchdog(fifo);
  const auto start = std::chrono::steady_clock::now();
  auto m = ResolveModel(fifo);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(m.status().message(),
            "model file '" + fifo +
                "' is not a regular file (a FIFO, socket or device)");
  EXPECT_EQ(m.status().hint(), kNotRegularHint);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  std::filesystem::remove_all(dir);
}

TEST(RegularFilesOnly, FifoClusterAndSearchSpaceFiles) {
  const std::string dir = TempDir();
  const std::string fifo = MakeFifo(dir, "c.yml");
  FifoWatchdog watchdog(fifo);
  auto c = ResolveCluster(fifo);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "cluster file '" + fifo +
                "' is not a regular file (a FIFO, socket or device)");
  auto s = ResolveSearchSpace(fifo);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.status().message(),
            "search space file '" + fifo +
                "' is not a regular file (a FIFO, socket or device)");
  std::filesystem::remove_all(dir);
}

TEST(RegularFilesOnly, FifoWithoutYamlSuffixIsStillAPath) {
  // Named like a preset: before, LooksLikePath said "preset name" for
  // anything but a regular file, and the lookup said "unknown preset".
  const std::string dir = TempDir();
  const std::string fifo = MakeFifo(dir, "gpt-tiny");
  FifoWatchdog watchdog(fifo);
  EXPECT_TRUE(yaml_util::LooksLikePath(fifo));
  auto m = ResolveModel(fifo);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "model file '" + fifo +
                "' is not a regular file (a FIFO, socket or device)");
  std::filesystem::remove_all(dir);
}

TEST(RegularFilesOnly, DeviceAndDirectoryAreInputErrors) {
  auto m = ResolveModel("/dev/null");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "model file '/dev/null' is not a regular file (a FIFO, socket or "
            "device)");
  const std::string dir = TempDir();
  auto d = ResolveCluster(dir);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(d.status().ExitCode(), 2);
  EXPECT_EQ(d.status().message(), "cluster file '" + dir + "' is a directory");
  EXPECT_EQ(d.status().hint(), "give the path of a regular file inside it");
  std::filesystem::remove_all(dir);
}

TEST(RegularFilesOnly, MissingFileKeepsThePresetHint) {
  auto r = yaml_util::ReadFile("/nonexistent/m.yaml", "model file");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(r.status().message(), "model file '/nonexistent/m.yaml' not found");
  EXPECT_EQ(r.status().hint(), "check the path, or give a preset name instead");
}

TEST(RegularFilesOnly, PresetNamesAreNotPaths) {
  EXPECT_FALSE(yaml_util::LooksLikePath("gpt3-175b"));
  EXPECT_TRUE(yaml_util::LooksLikePath("mine.YAML"));
}

TEST(Printable, EscapesControlBytesAndCutsLongText) {
  EXPECT_EQ(yaml_util::Printable("a\nb\tc\r\x01\x7f"),
            "a\\nb\\tc\\r\\x01\\x7f");
  EXPECT_EQ(yaml_util::Printable("abcdef", 3), "abc...");
  EXPECT_EQ(yaml_util::Printable("abc", 3), "abc");
  EXPECT_EQ(yaml_util::Printable(std::string(200, 'x'), 0).size(), 200u);
}

}  // namespace
}  // namespace meshtune::search_spaces
