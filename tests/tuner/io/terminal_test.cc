// tuner/io/terminal.h: the colour decision (TTY, NO_COLOR, TERM=dumb, --color),
// the ANSI styles, the progress bar's delay, rate limit and erase, and the
// commands end to end: colour on a pseudo-terminal unless NO_COLOR, never in
// a pipe unless --color always, and what --quiet leaves of each command.
#include "tuner/io/terminal.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "profiler/report.h"
#include "tests/tuner/run_tune.h"

namespace meshtune::tuner {
namespace {

using testing::RunTune;

constexpr const char* kEsc = "\033[";
constexpr const char* kSearch =
    "search --model gpt3-1.3b --gpus 8 --gpu a100-80g --no-db";

bool HasEscape(const std::string& text) {
  return text.find(kEsc) != std::string::npos;
}

TEST(TerminalColor, ParsesTheThreeModes) {
  EXPECT_EQ(ParseColorMode("auto").value(), ColorMode::kAuto);
  EXPECT_EQ(ParseColorMode("always").value(), ColorMode::kAlways);
  EXPECT_EQ(ParseColorMode("never").value(), ColorMode::kNever);
  const auto bad = ParseColorMode("yes");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--color: unknown mode 'yes'");
  EXPECT_EQ(bad.status().hint(), "use --color auto, always or never");
  EXPECT_EQ(bad.status().ExitCode(), 2);
}

TEST(TerminalColor, AutoColoursATerminalUnlessNoColorOrDumb) {
  const char* xterm = "xterm-256color";
  EXPECT_TRUE(DecideColor(ColorMode::kAuto, true, nullptr, xterm));
  EXPECT_TRUE(DecideColor(ColorMode::kAuto, true, nullptr, nullptr));
  EXPECT_FALSE(DecideColor(ColorMode::kAuto, false, nullptr, xterm));
  // no-color.org: set and non-empty disables; empty does not.
  EXPECT_FALSE(DecideColor(ColorMode::kAuto, true, "1", xterm));
  EXPECT_TRUE(DecideColor(ColorMode::kAuto, true, "", xterm));
  EXPECT_FALSE(DecideColor(ColorMode::kAuto, true, nullptr, "dumb"));
}

TEST(TerminalColor, FlagOverridesTheEnvironment) {
  EXPECT_TRUE(DecideColor(ColorMode::kAlways, false, "1", "dumb"));
  EXPECT_FALSE(DecideColor(ColorMode::kNever, true, nullptr, "xterm"));
}

TEST(TerminalStyle, WrapsOnlyWhenEnabled) {
  const Style on(true);
  EXPECT_EQ(on.Bold("x"), "\033[1mx\033[0m");
  EXPECT_EQ(on.Green("best"), "\033[1;32mbest\033[0m");
  EXPECT_EQ(on.Dim("r"), "\033[2mr\033[0m");
  EXPECT_EQ(on.Red("e"), "\033[1;31me\033[0m");
  EXPECT_EQ(on.Bold(""), "");
  const Style off(false);
  EXPECT_EQ(off.Green("best"), "best");
  EXPECT_EQ(off.Red("e"), "e");
}

TEST(TerminalStyle, StringStreamsAreAlwaysPlain) {
  SetColorMode(ColorMode::kAlways);
  std::ostringstream s;
  EXPECT_FALSE(StyleFor(s).enabled());
  EXPECT_FALSE(ProgressAllowed(s, /*quiet=*/false));
  SetColorMode(ColorMode::kAuto);
}

// A bar on a string stream with a clock the test moves.
struct FakeBar {
  double now = 100.0;
  std::ostringstream out;
  ProgressBar bar;
  explicit FakeBar(int64_t total)
      : bar(out, "searching", total, [this] {
          ProgressBar::Options o;
          o.enabled = true;
          o.width = 4;
          o.now_s = [this] { return now; };
          return o;
        }()) {}
};

TEST(TerminalProgress, FrameShowsDoneOfTotal) {
  FakeBar f(8);
  EXPECT_EQ(f.bar.Frame(0), "searching [....] 0/8");
  EXPECT_EQ(f.bar.Frame(3), "searching [#...] 3/8");
  EXPECT_EQ(f.bar.Frame(8), "searching [####] 8/8");
  EXPECT_EQ(f.bar.Frame(99), "searching [####] 8/8");
}

TEST(TerminalProgress, QuietBeforeTheDelayThenRateLimited) {
  FakeBar f(8);
  f.bar.Update(1);
  f.now += 0.4;
  f.bar.Update(2);
  EXPECT_EQ(f.out.str(), "") << "drawn before 0.5 s had passed";
  f.now += 0.2;
  f.bar.Update(3);
  EXPECT_EQ(f.out.str(), "\rsearching [#...] 3/8\033[K");
  f.now += 0.05;
  f.bar.Update(4);
  EXPECT_EQ(f.out.str(), "\rsearching [#...] 3/8\033[K")
      << "redrawn within 0.1 s";
  f.now += 0.1;
  f.bar.Update(5);
  EXPECT_EQ(f.out.str(),
            "\rsearching [#...] 3/8\033[K\rsearching [##..] 5/8\033[K");
  // The last unit draws even inside the interval, then Finish erases.
  f.now += 0.01;
  f.bar.Update(8);
  f.bar.Finish();
  f.bar.Finish();
  EXPECT_EQ(f.out.str(),
            "\rsearching [#...] 3/8\033[K\rsearching [##..] 5/8\033[K"
            "\rsearching [####] 8/8\033[K\r\033[K");
  const std::string finished = f.out.str();
  f.now += 1;
  f.bar.Update(8);
  EXPECT_EQ(f.out.str(), finished) << "drawn after Finish";
}

TEST(TerminalProgress, FastWorkDrawsAndErasesNothing) {
  FakeBar f(2);
  f.bar.Update(1);
  f.bar.Update(2);
  f.bar.Finish();
  EXPECT_EQ(f.out.str(), "");
}

TEST(TerminalProgress, TotalKnownLaterAndDisabledBar) {
  FakeBar f(0);
  f.now += 1;
  f.bar.Update(5, 10);
  EXPECT_EQ(f.out.str(), "\rsearching [##..] 5/10\033[K");

  std::ostringstream out;
  ProgressBar::Options o;
  o.enabled = false;
  o.delay_s = 0;
  ProgressBar off(out, "x", 4, o);
  off.Update(4);
  off.Finish();
  EXPECT_EQ(out.str(), "");
}

// ---- End to end: the built tune binary. ----

TEST(TerminalColorEndToEnd, PipesArePlainUnlessAlways) {
  const auto plain = RunTune(kSearch);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_FALSE(HasEscape(plain.out));
  EXPECT_FALSE(HasEscape(plain.err));

  const auto forced = RunTune(std::string(kSearch) + " --color always");
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_NE(forced.out.find("\033[1;32mbest: "), std::string::npos)
      << forced.out;
  EXPECT_NE(forced.out.find("\033[1mtop 10 of "), std::string::npos);
  EXPECT_NE(forced.out.find("\033[2mrejected: "), std::string::npos);
  // Colour wraps whole cells: without the codes the report is the plain one
  // apart from the elapsed time.
  const auto never = RunTune(std::string(kSearch) + " --color never");
  ASSERT_EQ(never.exit_code, 0);
  EXPECT_FALSE(HasEscape(never.out));

  // An explicit --color always wins over NO_COLOR (no-color.org).
  const auto env = RunTune(std::string(kSearch) + " --color always", "",
                           "NO_COLOR=1 TUNE_DB=");
  EXPECT_TRUE(HasEscape(env.out));
}

TEST(TerminalColorEndToEnd, BadColorIsAUsageError) {
  const auto run = RunTune(std::string(kSearch) + " --color sometimes");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err,
            "tune: error: --color: unknown mode 'sometimes'\n"
            "tune: hint: use --color auto, always or never\n");
  EXPECT_EQ(run.out, "");
}

// Runs `tune ARGS` with stdout (and with `stderr_too` stderr as well, one
// screen for both, as in a shell) on a pseudo-terminal (so isatty holds)
// and returns what it wrote there.
std::string RunOnTerminal(const std::string& env, const std::string& args,
                          bool stderr_too = false) {
  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) {
    ADD_FAILURE() << "no pseudo-terminal";
    return "";
  }
  const std::string slave_path = ptsname(master);
  // Held open here, so that reads do not fail before the child opens it;
  // closed after the child exits, so that the reader sees the end.
  const int slave = open(slave_path.c_str(), O_RDWR | O_NOCTTY);
  std::string captured;
  std::thread reader([master, &captured] {
    char buf[4096];
    for (;;) {
      const ssize_t n = read(master, buf, sizeof(buf));
      if (n <= 0) break;
      captured.append(buf, static_cast<size_t>(n));
    }
  });
  const std::string cmd = env + " '" + MESHTUNE_TUNE_BINARY + "' " + args +
                          " >'" + slave_path + "' " +
                          (stderr_too ? "2>&1" : "2>/dev/null");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  close(slave);
  reader.join();
  close(master);
  return captured;
}

// Containers without /dev/pts cannot run the terminal cases.
bool HavePseudoTerminal() {
  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0) return false;
  const bool usable = grantpt(master) == 0 && unlockpt(master) == 0;
  close(master);
  return usable;
}

TEST(TerminalColorEndToEnd, TerminalIsColouredUnlessNoColor) {
  if (!HavePseudoTerminal()) GTEST_SKIP() << "no pseudo-terminal here";
  const std::string tty = RunOnTerminal("TERM=xterm", kSearch);
  EXPECT_NE(tty.find("\033[1;32mbest: "), std::string::npos) << tty;
  EXPECT_NE(tty.find("top 10 of"), std::string::npos) << tty;

  const std::string no_color =
      RunOnTerminal("TERM=xterm NO_COLOR=1", std::string(kSearch));
  EXPECT_NE(no_color.find("top 10 of"), std::string::npos) << no_color;
  EXPECT_FALSE(HasEscape(no_color)) << no_color;

  const std::string never =
      RunOnTerminal("TERM=xterm", std::string(kSearch) + " --color never");
  EXPECT_FALSE(HasEscape(never)) << never;
}

// What a terminal shows for `text`: '\r' returns to the line's start,
// "\033[K" erases from the cursor to the line's end, '\n' ends the line,
// other characters overwrite at the cursor. The lines, the last one
// included when not empty.
std::vector<std::string> Render(const std::string& text) {
  std::vector<std::string> lines;
  std::string line;
  size_t col = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\r') {
      col = 0;
    } else if (c == '\n') {
      lines.push_back(line);
      line.clear();
      col = 0;
    } else if (text.compare(i, 3, "\033[K") == 0) {
      line.resize(std::min(line.size(), col));
      i += 2;
    } else {
      if (col < line.size()) {
        line[col] = c;
      } else {
        line.push_back(c);
      }
      ++col;
    }
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

TEST(TerminalProgressAndRows, EachRowErasesTheProgressLineInFrontOfIt) {
  // One screen for both streams, as stdout and stderr share a terminal.
  std::ostringstream screen;
  {
    ProgressAndRows both(screen, screen);
    both.out() << "# header\n";
    for (int i = 1; i <= 3; ++i) {
      profiler::PrintProgress(both.progress(), i, 3,
                              "gemm " + std::to_string(i));
      both.out() << "row " << i << "\n";
    }
    // A line that is not a redrawn frame is a note, and stays.
    both.progress() << "tune: a note\n";
    both.out() << "# end\n";
    profiler::PrintProgress(both.progress(), 1, 2, "left showing");
  }
  EXPECT_EQ(Render(screen.str()),
            (std::vector<std::string>{"# header", "row 1", "row 2", "row 3",
                                      "tune: a note", "# end"}))
      << screen.str();
  // The same writes straight to the screen glue every row to its progress
  // text: what tune profile showed before.
  std::ostringstream raw;
  profiler::PrintProgress(raw, 1, 3, "gemm 1");
  raw << "row 1\n";
  EXPECT_EQ(Render(raw.str()).front().find("  [1/3] gemm 1"), 0u);
}

TEST(TerminalProgressAndRows, ProfileRowsOnATerminalStandAlone) {
  if (!HavePseudoTerminal()) GTEST_SKIP() << "no pseudo-terminal here";
  const std::string tty =
      RunOnTerminal("TERM=xterm OMP_NUM_THREADS=1",
                    "profile --quick --no-db --mpi-ranks 0 --reps 1 --warmup 0",
                    /*stderr_too=*/true);
  const std::vector<std::string> lines = Render(tty);
  int rows = 0;
  for (const std::string& line : lines) {
    EXPECT_EQ(line.find("  ["), std::string::npos) << tty;
    // A row: " sq128  128 ...", " triad  1048576 ...".
    rows += line.size() > 1 && line[0] == ' ' && line[1] != ' ';
  }
  EXPECT_GT(rows, 0) << tty;
}

// ---- --quiet: the essential result only. ----

TEST(TerminalQuiet, SearchPrintsTheWinnerLine) {
  const auto run = RunTune(std::string(kSearch) + " --quiet");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out,
            "best: tp1 pp1 vpp1 cp1 ep1 dp8 mbs16 none dist_opt "
            "(recompute none): step 2.956 s, 22172.4 tokens/s/GPU, MFU "
            "60.3%, 70.41 GiB per GPU\n");
  EXPECT_EQ(run.err, "");
  // The full report's best line names the same configuration.
  const auto full = RunTune(kSearch);
  EXPECT_NE(full.out.find("best: tp1 pp1 vpp1 cp1 ep1 dp8 mbs16 none "
                          "dist_opt (recompute none"),
            std::string::npos)
      << full.out;
}

TEST(TerminalQuiet, SearchOutNoteIsDroppedButTheFileWritten) {
  const std::string dir = testing::MakeTempDir();
  const auto run =
      RunTune(std::string(kSearch) + " -q --json --out " + dir + "/best.yaml");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(run.out.front(), '{');
  EXPECT_FALSE(testing::ReadFile(dir + "/best.yaml").empty());
}

TEST(TerminalQuiet, EstimatePrintsOneLine) {
  const auto run = RunTune(
      "estimate --model 175b --gpus 1024 --gpu a100-80g --no-db --tp 8 --pp 8 "
      "--sp --recompute selective --quiet");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out,
            "tp8 pp8 vpp1 cp1 ep1 dp16 sp mbs1 selective: step "
            "19.758 s, 155.5 tokens/s/GPU, MFU 52.9%, 57.45 of 77.00 GiB per "
            "GPU\n");
}

TEST(TerminalQuiet, ScalePrintsOneLinePerSize) {
  const auto run = RunTune(
      "scale --model 175b --gpus 64,128 --gpu a100-80g --no-db --quiet");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out,
            "    64  tp4 pp16 vpp6 cp1 ep1 dp1 sp mbs1 none 267.915 s\n"
            "   128  tp4 pp8 vpp12 cp1 ep1 dp4 sp mbs1 none dist_opt 130.343 "
            "s\n");
  EXPECT_EQ(run.err, "");
}

TEST(TerminalQuiet, CompareKeepsTheClosingLines) {
  const std::string args =
      "compare --model 175b --gpus 1024 --gpu a100-80g --no-db --config 'tp8 "
      "pp8 mbs1 sp selective' --config 'tp4 pp16 mbs1 sp selective'";
  const auto run = RunTune(args + " --quiet");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out,
            "tp4 pp16 dp16 mbs1 sp selective is 0.115 s slower than tp8 pp8 "
            "dp16 mbs1 sp selective: pp_bubble +1.245 s, tp_comm -1.070 s, "
            "dp_comm -0.412 s\n");
}

TEST(TerminalQuiet, LaunchOutWritesSilently) {
  const std::string dir = testing::MakeTempDir();
  const auto run =
      RunTune("launch --model gpt-tiny --gpus 2 " MESHTUNE_PINNED_LOCAL_GPU
              " --gbs 4 --seq-len 64 "
              "--no-db --quiet --out " +
              dir + "/job.sh");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, "");
  EXPECT_FALSE(testing::ReadFile(dir + "/job.sh").empty());
  EXPECT_FALSE(testing::ReadFile(dir + "/job.yaml").empty());
}

}  // namespace
}  // namespace meshtune::tuner
