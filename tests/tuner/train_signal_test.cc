// Issue 16 D3 and D8 through the binary: a multi-rank `tune train` under
// stop signals (SIGTERM, SIGINT, SIGHUP and SIGKILL to the launcher) and
// with a frozen rank (SIGSTOP). Each case starts the launcher in its own
// process group with a token in its environment that mpirun and the ranks
// inherit, so the test can see whether anything of the job is still
// running afterwards, and kills whatever is (no test leaves processes).
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/tuner/run_tune.h"
#include "tuner/train/flags.h"
#include "tuner/train/launcher.h"

namespace meshtune::tuner {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using testing::ReadFile;

constexpr char kTokenVar[] = "MESHTUNE_SIGNAL_TEST_TOKEN";

// The processes (any state but zombie) whose environment holds `token`.
std::vector<pid_t> JobProcesses(const std::string& token,
                                const std::string& also = "") {
  std::vector<pid_t> pids;
  const std::string wanted = std::string(kTokenVar) + "=" + token;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return pids;
  while (const dirent* entry = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || pid == getpid()) continue;
    const std::string dir = std::string("/proc/") + entry->d_name;
    const std::string stat = ReadFile(dir + "/stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size() ||
        stat[close + 2] == 'Z') {
      continue;
    }
    std::ifstream env_file(dir + "/environ", std::ios::binary);
    std::string var;
    bool has_token = false, has_also = also.empty();
    while (std::getline(env_file, var, '\0')) {
      if (var == wanted) has_token = true;
      if (!also.empty() && var == also) has_also = true;
    }
    if (has_token && has_also) pids.push_back(static_cast<pid_t>(pid));
  }
  closedir(proc);
  return pids;
}

class TrainSignalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (FindOnPath("mpirun").empty()) GTEST_SKIP() << "mpirun is not on PATH";
    dir_ = testing::MakeTempDir();
    token_ = std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  void TearDown() override {
    // Whatever is left of the job is a failure already reported; make sure
    // it does not outlive the test.
    for (pid_t pid : JobProcesses(token_)) kill(pid, SIGKILL);
    if (launcher_ > 0) {
      kill(-launcher_, SIGKILL);
      int status = 0;
      waitpid(launcher_, &status, 0);
    }
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Starts `tune train --dp 2 ...` (a long run of gpt-tiny) in its own
  // process group, stdout and stderr to files.
  void Start(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {MESHTUNE_TUNE_BINARY,
                                     "train",
                                     "--model",
                                     "gpt-tiny",
                                     "--seq-len",
                                     "32",
                                     "--gbs",
                                     "2",
                                     "--dp",
                                     "2",
                                     "--steps",
                                     "1000000",
                                     "--no-db"};
    args.insert(args.end(), extra.begin(), extra.end());
    const std::string out = dir_ + "/out.txt", err = dir_ + "/err.txt";
    const std::string token = std::string(kTokenVar) + "=" + token_;
    launcher_ = fork();
    ASSERT_GE(launcher_, 0);
    if (launcher_ == 0) {
      setpgid(0, 0);
      if (!freopen(out.c_str(), "w", stdout) ||
          !freopen(err.c_str(), "w", stderr)) {
        _exit(126);
      }
      putenv(const_cast<char*>(token.c_str()));
      setenv("OMP_NUM_THREADS", "1", 1);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    setpgid(launcher_, launcher_);
  }

  // Waits until the ranks logged iteration `n` (a running job).
  bool WaitForIteration(int n, double limit_s) {
    const std::regex line(" iteration +" + std::to_string(n) + "/");
    const auto deadline = Clock::now() + std::chrono::duration<double>(limit_s);
    while (Clock::now() < deadline) {
      if (std::regex_search(ReadFile(dir_ + "/out.txt"), line)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // The launcher's wait status, or -1 when it is still running after
  // `limit_s`.
  int WaitForLauncher(double limit_s) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(limit_s);
    while (Clock::now() < deadline) {
      int status = 0;
      if (waitpid(launcher_, &status, WNOHANG) == launcher_) {
        launcher_ = 0;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }

  // True once no process of the job is left (within `limit_s`).
  bool JobGone(double limit_s) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(limit_s);
    while (Clock::now() < deadline) {
      if (JobProcesses(token_).empty()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  std::string Err() const { return ReadFile(dir_ + "/err.txt"); }

  // The checkpoint the stop left resumes: one more iteration on one rank.
  void ExpectCheckpointResumes() {
    std::ifstream tracker(dir_ + "/ckpt/latest_checkpointed_iteration.txt");
    int64_t latest = 0;
    tracker >> latest;
    ASSERT_GE(latest, 2) << Err();
    const testing::TuneRun resume = testing::RunTune(
        "train --model gpt-tiny --seq-len 32 --gbs 2 --no-db --load '" + dir_ +
            "/ckpt' --steps " + std::to_string(latest + 1),
        "", "OMP_NUM_THREADS=1");
    EXPECT_EQ(resume.exit_code, 0) << resume.err;
    EXPECT_TRUE(std::regex_search(
        resume.out,
        std::regex(" iteration +" + std::to_string(latest + 1) + "/")))
        << resume.out;
  }

  std::string dir_;
  std::string token_;
  pid_t launcher_ = 0;
};

class TrainStopSignalTest : public TrainSignalTest,
                            public ::testing::WithParamInterface<int> {};

TEST_P(TrainStopSignalTest, StopsEveryRankSavesAndExitsOne) {
  const int signal = GetParam();
  Start({"--save", dir_ + "/ckpt"});
  ASSERT_TRUE(WaitForIteration(2, 60)) << Err();
  ASSERT_EQ(kill(launcher_, signal), 0);
  const int status = WaitForLauncher(kStopGraceS + 15);
  ASSERT_NE(status, -1) << "the launcher still runs after the signal\n"
                        << Err();
  EXPECT_TRUE(JobGone(10)) << "ranks or mpirun still run";
  ASSERT_TRUE(WIFEXITED(status))
      << "launcher died of signal " << WTERMSIG(status) << "\n"
      << Err();
  EXPECT_EQ(WEXITSTATUS(status), 1) << Err();
  const std::string err = Err();
  const std::string name = signal == SIGTERM  ? "SIGTERM"
                           : signal == SIGINT ? "SIGINT"
                                              : "SIGHUP";
  // Rank 0 names the iteration and the checkpoint ...
  EXPECT_TRUE(std::regex_search(
      err, std::regex("tune: error: stopped by " + name +
                      " after iteration [0-9]+ of 1000000; checkpoint of "
                      "iteration [0-9]+ saved in " +
                      dir_ + "/ckpt\n")))
      << err;
  // ... and the launcher's last line names the signal it got.
  const std::string last = "tune: error: training stopped by " + name +
                           "; every rank has ended (rank 0's line above "
                           "names the last iteration and checkpoint)\n";
  ASSERT_GE(err.size(), last.size()) << err;
  EXPECT_EQ(err.substr(err.size() - last.size()), last) << err;
  ExpectCheckpointResumes();
}

INSTANTIATE_TEST_SUITE_P(Signals, TrainStopSignalTest,
                         ::testing::Values(SIGTERM, SIGINT, SIGHUP),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == SIGTERM  ? "Sigterm"
                                  : info.param == SIGINT ? "Sigint"
                                                         : "Sighup";
                         });

TEST_F(TrainSignalTest, SigkillOfTheLauncherEndsTheWholeJob) {
  Start({"--save", dir_ + "/ckpt", "--save-interval", "1"});
  ASSERT_TRUE(WaitForIteration(2, 60)) << Err();
  ASSERT_EQ(kill(launcher_, SIGKILL), 0);
  const int status = WaitForLauncher(10);
  ASSERT_NE(status, -1);
  // mpirun got SIGTERM (PR_SET_PDEATHSIG) and ended the ranks; the last
  // complete checkpoint loads.
  EXPECT_TRUE(JobGone(30)) << "the job outlived its launcher";
  ExpectCheckpointResumes();
}

TEST_F(TrainSignalTest, FrozenRankTimesOutNamingItAndNothingKeepsRunning) {
  // 0.05 minutes = 3 s.
  Start({"--distributed-timeout-minutes", "0.05"});
  ASSERT_TRUE(WaitForIteration(2, 60)) << Err();
  const std::vector<pid_t> rank1 =
      JobProcesses(token_, "OMPI_COMM_WORLD_RANK=1");
  ASSERT_EQ(rank1.size(), 1u);
  ASSERT_EQ(kill(rank1[0], SIGSTOP), 0);
  const auto stopped_at = Clock::now();
  const int status = WaitForLauncher(60);
  ASSERT_NE(status, -1) << "the job hangs on the stopped rank\n" << Err();
  const double took_s =
      std::chrono::duration<double>(Clock::now() - stopped_at).count();
  EXPECT_GE(took_s, 3.0);
  EXPECT_TRUE(JobGone(10)) << "ranks or mpirun still run";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1) << Err();
  const std::string err = Err();
  EXPECT_TRUE(std::regex_search(
      err, std::regex("tune: error: rank 0: [a-z_]+ on group '[a-z]+' timed "
                      "out after 3 s: rank 1 did not answer \\(stopped, hung "
                      "or dead\\); the job is aborted \\(raise "
                      "--distributed-timeout-minutes if it is only slow\\)\n")))
      << err;
}

TEST(TrainTimeoutFlag, SetsTheConfigInSecondsAndTravelsToTheRanks) {
  TrainFlags flags;
  flags.model = "gpt-tiny";
  flags.distributed_timeout_minutes = "0.5";
  StatusOr<TrainPlan> plan = ResolveTrainFlags(flags);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_DOUBLE_EQ(plan->config.distributed_timeout_s, 30.0);
  const std::vector<std::string> args = TrainFlagsToArgs(flags);
  const std::vector<std::string> expected = {"--distributed-timeout-minutes",
                                             "0.5"};
  EXPECT_NE(
      std::search(args.begin(), args.end(), expected.begin(), expected.end()),
      args.end());
  flags.distributed_timeout_minutes.clear();
  plan = ResolveTrainFlags(flags);
  ASSERT_TRUE(plan.ok());
  EXPECT_DOUBLE_EQ(plan->config.distributed_timeout_s, 600.0);  // Megatron
}

TEST(TrainTimeoutFlag, RejectsZeroNegativeAndText) {
  for (const char* bad : {"0", "-1", "ten", "nan", "inf"}) {
    const testing::TuneRun run =
        testing::RunTune(std::string("train --model gpt-tiny --no-db "
                                     "--distributed-timeout-minutes ") +
                         bad);
    EXPECT_EQ(run.exit_code, 2) << bad;
    EXPECT_EQ(run.err,
              std::string("tune: error: --distributed-timeout-minutes must "
                          "be a number of minutes > 0, got '") +
                  bad +
                  "'\ntune: hint: write e.g. --distributed-timeout-minutes "
                  "10 (Megatron's default)\n")
        << bad;
  }
}

}  // namespace
}  // namespace meshtune::tuner
