// Helpers for tests of what happens to files under faults: a full disk
// simulated without root's exemption, and a folder's listing (to show that
// no temporary file was left behind).
#ifndef MESHTUNE_TESTS_FILE_FAULTS_H_
#define MESHTUNE_TESTS_FILE_FAULTS_H_

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <string>
#include <vector>

namespace meshtune::test_files {

// The names in `dir` (without "." and ".."), sorted; empty if it cannot be
// read.
inline std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// A full disk, as root too: while this object lives, RLIMIT_FSIZE makes
// every write past `bytes` of a regular file fail with EFBIG (SIGXFSZ
// ignored, as a shell's `trap '' XFSZ` would), as ENOSPC would.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    saved_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, saved_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit saved_{};
  void (*saved_handler_)(int) = nullptr;
};

}  // namespace meshtune::test_files

#endif  // MESHTUNE_TESTS_FILE_FAULTS_H_
