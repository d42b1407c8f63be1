#include "tuner/validate/runner.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tuner/train/launcher.h"

namespace meshtune::tuner {
namespace {

using Clock = std::chrono::steady_clock;

// A temporary file that is removed on destruction.
class TempFile {
 public:
  TempFile() {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") +
            "/tune-validate-XXXXXX";
    fd_ = mkstemp(path_.data());
  }
  ~TempFile() {
    if (fd_ >= 0) {
      close(fd_);
      unlink(path_.c_str());
    }
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  int fd() const { return fd_; }
  std::string Read() const {
    std::ifstream in(path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  std::string path_;
  int fd_ = -1;
};

// The child's explanation: its last "tune: error: " line, else its last
// non-empty line, else "".
std::string LastErrorLine(const std::string& text) {
  std::istringstream in(text);
  std::string line, last_error, last;
  const std::string prefix = "tune: error: ";
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    last = line;
    if (line.rfind(prefix, 0) == 0) last_error = line.substr(prefix.size());
  }
  return !last_error.empty() ? last_error : last;
}

std::string DescribeStatus(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    std::string s =
        "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
    if (sig == SIGKILL) s += ": out of memory? (the OOM killer sends SIGKILL)";
    return s;
  }
  return "exit status " + std::to_string(WEXITSTATUS(wait_status));
}

}  // namespace

CandidateRunResult RunCandidate(const CandidateRunRequest& r) {
  CandidateRunResult result;
  const std::string exe = SelfExecutable();
  if (exe.empty()) {
    result.error = "cannot find this executable (/proc/self/exe)";
    return result;
  }
  std::vector<std::string> args = {exe,
                                   "train",
                                   "--from-search",
                                   std::to_string(r.search_id),
                                   "--rank",
                                   std::to_string(r.rank),
                                   "--steps",
                                   std::to_string(r.steps),
                                   "--nproc",
                                   std::to_string(r.world),
                                   "--db",
                                   r.db,
                                   "--json"};
  if (r.backend == "cuda") {
    args.insert(args.end(), {"--backend", "cuda", "--gpu", r.gpu});
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  TempFile out, err;
  if (out.fd() < 0 || err.fd() < 0) {
    result.error = std::string("cannot create a temporary file (") +
                   std::strerror(errno) + ")";
    return result;
  }
  const char* kill_rank = std::getenv(kValidateKillRankEnv);
  const bool planted_kill =
      kill_rank != nullptr && std::to_string(r.rank) == kill_rank;

  const auto t0 = Clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    result.error = std::string("fork failed (") + std::strerror(errno) + ")";
    return result;
  }
  if (pid == 0) {
    // Own process group, so a timeout can end mpirun and every rank.
    setpgid(0, 0);
    dup2(out.fd(), STDOUT_FILENO);
    dup2(err.fd(), STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  setpgid(pid, pid);  // also from the parent: no race with the kill below
  if (planted_kill) kill(-pid, SIGKILL);

  int wait_status = 0;
  bool timed_out = false;
  for (;;) {
    const pid_t done = waitpid(pid, &wait_status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      result.error = std::string("waiting for the run failed (") +
                     std::strerror(errno) + ")";
      return result;
    }
    const double elapsed =
        std::chrono::duration<double>(Clock::now() - t0).count();
    if (!timed_out && elapsed > r.timeout_s) {
      timed_out = true;
      kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Whatever the child left running in its group (mpirun's daemons).
  kill(-pid, SIGKILL);
  result.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();

  if (timed_out) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "timed out after %.0f s", r.timeout_s);
    result.error = buf;
    return result;
  }
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    const std::string why = LastErrorLine(err.Read());
    result.error = DescribeStatus(wait_status);
    if (!why.empty() && WIFEXITED(wait_status)) result.error = why;
    return result;
  }
  const nlohmann::json j =
      nlohmann::json::parse(out.Read(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("step_time_median_s") ||
      !j["step_time_median_s"].is_number()) {
    result.error = "the run finished but printed no step time (--json)";
    return result;
  }
  result.ok = true;
  result.step_time_median_s = j["step_time_median_s"].get<double>();
  if (j.contains("final_loss") && j["final_loss"].is_number()) {
    result.final_loss = j["final_loss"].get<double>();
  }
  return result;
}

}  // namespace meshtune::tuner
