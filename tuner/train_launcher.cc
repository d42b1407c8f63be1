#include "tuner/train_launcher.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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

Status RunRanksUnderMpirun(int64_t world,
                           const std::vector<std::string>& train_args) {
  const std::string mpirun = FindOnPath("mpirun");
  if (mpirun.empty()) {
    return Status::Unimplemented(
        "running " + std::to_string(world) +
            " ranks needs mpirun, which is not on PATH",
        "install Open MPI (apt-get install openmpi-bin), or run one rank "
        "(tp·pp·dp = 1)");
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

  const pid_t pid = fork();
  if (pid < 0) {
    return Status::IoError(std::string("cannot start mpirun: fork failed (") +
                               std::strerror(errno) + ")",
                           "free some memory or processes and retry");
  }
  if (pid == 0) {
    execve(c_argv[0], c_argv.data(), c_env.data());
    // Only async-signal-safe calls between fork and _exit.
    static const char kMsg[] = "tune: error: cannot execute mpirun\n";
    ssize_t ignored = write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
    (void)ignored;
    _exit(127);
  }
  // Ctrl-C reaches mpirun too (same process group), which stops the ranks;
  // the parent waits for that and reports mpirun's status instead of dying
  // first.
  struct sigaction ignore = {}, old_int = {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ignore, &old_int);
  int wait_status = 0;
  pid_t done;
  do {
    done = waitpid(pid, &wait_status, 0);
  } while (done < 0 && errno == EINTR);
  sigaction(SIGINT, &old_int, nullptr);
  if (done < 0) {
    return Status::IoError(std::string("waiting for mpirun failed (") +
                           std::strerror(errno) + ")");
  }
  return MpirunExitStatus(wait_status);
}

}  // namespace meshtune::tuner
