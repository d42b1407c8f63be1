#include "tuner/train/launcher.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "engine/stop_signal.h"

extern char** environ;

namespace meshtune::tuner {

std::string SelfExecutable() {
  std::vector<char> buf(4096);
  const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return "";
  return std::string(buf.data(), static_cast<size_t>(n));
}

namespace {

// The parent's environment plus the rank marker and a per-rank OpenMP
// thread count (unless the user chose one).
std::vector<std::string> RankEnvironment(int64_t world) {
  std::vector<std::string> env;
  bool has_omp = false;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    if (entry.rfind(std::string(kTrainLaunchedEnv) + "=", 0) == 0) continue;
    if (entry.rfind("OMP_NUM_THREADS=", 0) == 0) has_omp = true;
    env.push_back(entry);
  }
  env.push_back(std::string(kTrainLaunchedEnv) + "=1");
  if (!has_omp) {
    const long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
    const int64_t threads = std::max<int64_t>(1, cores / world);
    env.push_back("OMP_NUM_THREADS=" + std::to_string(threads));
  }
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Processes whose parent is `parent` (from /proc/*/stat).
std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> children;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return children;
  while (const dirent* entry = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    std::ifstream stat(std::string("/proc/") + entry->d_name + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses,
    // so read after the last ')'.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %ld", &state, &ppid) == 2 &&
        ppid == parent) {
      children.push_back(static_cast<pid_t>(pid));
    }
  }
  closedir(proc);
  return children;
}

// A second stop signal, or ranks that do not stop within kStopGraceS: the
// ranks are found before mpirun dies (they are its children) and are
// killed with it, stopped ones included.
void KillJob(pid_t mpirun) {
  const std::vector<pid_t> ranks = ChildrenOf(mpirun);
  kill(mpirun, SIGKILL);
  for (pid_t rank : ranks) kill(rank, SIGKILL);
}

// A stop signal goes to the ranks themselves, not to mpirun: mpirun would
// SIGTERM them and SIGKILL them a second later (its abort), maybe in the
// middle of a checkpoint. The ranks stop together at the next step
// boundary and exit; mpirun then ends. Before the ranks exist, mpirun
// gets the signal and ends the start-up.
void ForwardStopSignal(pid_t mpirun, int signal) {
  const std::vector<pid_t> ranks = ChildrenOf(mpirun);
  if (ranks.empty()) kill(mpirun, signal);
  for (pid_t rank : ranks) kill(rank, signal);
}

struct JobEnd {
  int wait_status = 0;
  int wait_errno = 0;   // waitpid's error; 0 = wait_status is valid
  int signal = 0;       // the first stop signal received (0 = none)
  bool killed = false;  // the job was killed (second signal or grace over)
};

// Waits for mpirun, taking the (blocked) stop signals as they come: the
// first is forwarded to the ranks; a second one, or kStopGraceS seconds
// without an end, kills the job.
JobEnd WaitForJob(pid_t mpirun, const sigset_t& stop_signals) {
  JobEnd end;
  int signals = 0;
  std::chrono::steady_clock::time_point give_up;
  for (;;) {
    const pid_t done = waitpid(mpirun, &end.wait_status, WNOHANG);
    if (done == mpirun) return end;
    if (done < 0 && errno != EINTR) {
      end.wait_errno = errno;
      return end;
    }
    const timespec poll = {0, 100 * 1000 * 1000};  // 100 ms
    const int signal = sigtimedwait(&stop_signals, nullptr, &poll);
    if (signal > 0 && ++signals == 1) {
      end.signal = signal;
      ForwardStopSignal(mpirun, signal);
      give_up =
          std::chrono::steady_clock::now() + std::chrono::seconds(kStopGraceS);
    }
    const bool overdue =
        signals > 0 && std::chrono::steady_clock::now() >= give_up;
    if (!end.killed && (signals >= 2 || overdue)) {
      KillJob(mpirun);
      end.killed = true;
    }
  }
}

}  // namespace

bool LaunchedByTuneTrain() {
  const char* v = std::getenv(kTrainLaunchedEnv);
  return v != nullptr && *v != '\0';
}

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  const std::string dirs(path);
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t colon = dirs.find(':', start);
    if (colon == std::string::npos) colon = dirs.size();
    const std::string dir = dirs.substr(start, colon - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = colon + 1;
  }
  return "";
}

std::vector<std::string> MpirunArgv(const std::string& mpirun, int64_t world,
                                    const std::string& exe,
                                    const std::vector<std::string>& train_args,
                                    bool as_root) {
  // --oversubscribe: more ranks than cores is normal for the CPU engine on a
  // laptop; --bind-to none: the ranks' OpenMP threads should not share one
  // core each.
  std::vector<std::string> argv = {
      mpirun,      "-np", std::to_string(world), "--oversubscribe",
      "--bind-to", "none"};
  if (as_root) argv.push_back("--allow-run-as-root");
  argv.push_back(exe);
  argv.push_back("train");
  argv.insert(argv.end(), train_args.begin(), train_args.end());
  return argv;
}

Status MpirunExitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) {
    const int code = WEXITSTATUS(wait_status);
    if (code == 0) return Status::Ok();
    const std::string msg = "training rank failed (mpirun exit status " +
                            std::to_string(code) +
                            "); see the rank's message above";
    // Status carries exit codes 2 (input) and 1 (runtime) only; IoError is
    // the runtime kind without a "not built" or "bug" meaning.
    return code == 2 ? Status::InvalidArgument(msg) : Status::IoError(msg);
  }
  if (WIFSIGNALED(wait_status)) {
    return Status::IoError("mpirun was killed by signal " +
                           std::to_string(WTERMSIG(wait_status)) + " (" +
                           strsignal(WTERMSIG(wait_status)) + ")");
  }
  return Status::IoError("mpirun ended abnormally (wait status " +
                         std::to_string(wait_status) + ")");
}

Status StoppedBySignalStatus(int signal, bool killed) {
  const std::string name = engine::SignalName(signal);
  if (killed) {
    return Status::IoError("training killed after a second stop signal (" +
                           name +
                           " first); every rank was killed without waiting "
                           "for the step boundary");
  }
  return Status::IoError(
      "training stopped by " + name +
      "; every rank has ended (rank 0's line above names the last iteration "
      "and checkpoint)");
}

Status RunRanksUnderMpirun(int64_t world,
                           const std::vector<std::string>& train_args) {
  const std::string mpirun = FindOnPath("mpirun");
  if (mpirun.empty()) {
    return Status::Unimplemented(
        "running " + std::to_string(world) +
            " ranks needs mpirun, which is not on PATH",
        "install Open MPI (apt-get install openmpi-bin), or run one rank "
        "(tp·pp·cp·dp = 1)");
  }
  const std::string exe = SelfExecutable();
  if (exe.empty()) {
    return Status::IoError("cannot find this executable (/proc/self/exe)",
                           "run the ranks yourself: mpirun -np " +
                               std::to_string(world) + " tune train ...");
  }
  std::vector<std::string> argv =
      MpirunArgv(mpirun, world, exe, train_args, geteuid() == 0);
  std::vector<std::string> env = RankEnvironment(world);
  std::vector<char*> c_argv = CStrings(argv);
  std::vector<char*> c_env = CStrings(env);

  // The stop signals stay blocked while mpirun runs: the wait loop takes
  // them with sigtimedwait, so none is lost and none kills the launcher
  // before the ranks have stopped. The child unblocks them before exec.
  // A signal this process ignores (nohup's SIGHUP, SIGINT of a background
  // job) stays ignored: blocking it would make it count.
  sigset_t stop_signals, old_mask;
  sigemptyset(&stop_signals);
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction current = {};
    sigaction(signal, nullptr, &current);
    if (current.sa_handler != SIG_IGN) sigaddset(&stop_signals, signal);
  }
  sigprocmask(SIG_BLOCK, &stop_signals, &old_mask);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int fork_errno = errno;
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    return Status::IoError(std::string("cannot start mpirun: fork failed (") +
                               std::strerror(fork_errno) + ")",
                           "free some memory or processes and retry");
  }
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec. Own process
    // group: a terminal's Ctrl-C reaches this launcher only, which turns
    // it into one orderly stop. If the launcher dies, even by SIGKILL,
    // mpirun gets SIGTERM and stops the ranks (PR_SET_PDEATHSIG survives
    // exec); the getppid check covers a launcher that died before prctl.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    // A background process group reading the terminal would be stopped
    // (SIGTTIN), and mpirun forwards stdin to rank 0: give it none.
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) {
      dup2(null_fd, STDIN_FILENO);
      if (null_fd != STDIN_FILENO) close(null_fd);
    }
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    execve(c_argv[0], c_argv.data(), c_env.data());
    // Only async-signal-safe calls between fork and _exit.
    static const char kMsg[] = "tune: error: cannot execute mpirun\n";
    ssize_t ignored = write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
    (void)ignored;
    _exit(127);
  }
  setpgid(pid, pid);  // also here, so no signal finds it in ours
  const JobEnd end = WaitForJob(pid, stop_signals);
  // Signals that were pending stay consumed; the old mask comes back.
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  if (end.wait_errno != 0) {
    return Status::IoError(std::string("waiting for mpirun failed (") +
                           std::strerror(end.wait_errno) + ")");
  }
  if (end.signal != 0) return StoppedBySignalStatus(end.signal, end.killed);
  return MpirunExitStatus(end.wait_status);
}

}  // namespace meshtune::tuner
