// Helpers for the data pipeline tests: a temporary directory removed when
// the test ends, and whole-file reads and writes.
#ifndef MESHTUNE_TESTS_ENGINE_DATA_TEST_UTIL_H_
#define MESHTUNE_TESTS_ENGINE_DATA_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace meshtune::engine::data::testing {

// A fresh directory under /tmp, removed with everything in it on
// destruction.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    char dir[] = "/tmp/meshtune_data_test_XXXXXX";
    const char* made = mkdtemp(dir);
    EXPECT_NE(made, nullptr);
    path_ = made ? made : "";
  }
  ~ScopedTempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

}  // namespace meshtune::engine::data::testing

#endif  // MESHTUNE_TESTS_ENGINE_DATA_TEST_UTIL_H_
