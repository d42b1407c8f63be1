// Helpers for tests of what happens to files under faults: a full disk
// simulated without root's exemption, a folder's listing (to show that no
// temporary file was left behind), and a watchdog that unblocks a reader
// stuck on a FIFO.
#ifndef MESHTUNE_TESTS_FILE_FAULTS_H_
#define MESHTUNE_TESTS_FILE_FAULTS_H_

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <string>
#include <thread>
#include <utility>
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

// Reading a FIFO used to block in open() for ever. So that such a
// regression fails instead of hanging CI, this opens the FIFO's write end
// after 5 s if the test is still running: a blocked reader then sees end of
// file and the test fails on its message.
class FifoWatchdog {
 public:
  explicit FifoWatchdog(std::string path) : path_(std::move(path)) {
    thread_ = std::thread([this] {
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!done_ && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (done_) return;
      const int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    });
  }
  ~FifoWatchdog() {
    done_ = true;
    thread_.join();
  }
  FifoWatchdog(const FifoWatchdog&) = delete;
  FifoWatchdog& operator=(const FifoWatchdog&) = delete;

 private:
  std::string path_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace meshtune::test_files

#endif  // MESHTUNE_TESTS_FILE_FAULTS_H_
