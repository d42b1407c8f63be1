// `tune report --html` rendered by a real browser: headless Chromium loads
// the file and dumps its DOM, and every chart must be there with one mark
// per plotted candidate (the numbers of the same search's JSON). Skips when
// Chromium is not installed, unless MESHTUNE_REQUIRE_CHROMIUM=1 (scripts/test
// sets it), where a missing browser fails.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/tuner/run_tune.h"

namespace meshtune::tuner {
namespace {

using testing::MakeTempDir;
using testing::ReadFile;
using testing::RunTune;
using testing::TuneRun;

// Debian's package installs /usr/bin/chromium; $CHROMIUM overrides.
std::string ChromiumPath() {
  const char* env = std::getenv("CHROMIUM");
  if (env != nullptr && *env != '\0') return env;
  return "/usr/bin/chromium";
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

// The element <svg id="ID" ...>...</svg> of the rendered DOM.
std::string Chart(const std::string& dom, const std::string& id) {
  const size_t begin = dom.find("<svg id=\"" + id + "\"");
  if (begin == std::string::npos) return "";
  return dom.substr(begin, dom.find("</svg>", begin) - begin);
}

TEST(ReportChromiumTest, RenderedDomHasEveryChartWithItsDataPoints) {
  const std::string chromium = ChromiumPath();
  if (access(chromium.c_str(), X_OK) != 0) {
    const char* require = std::getenv("MESHTUNE_REQUIRE_CHROMIUM");
    if (require != nullptr && std::string(require) == "1") {
      FAIL() << "MESHTUNE_REQUIRE_CHROMIUM=1 but " << chromium
             << " is missing: run scripts/setup (Debian package chromium)";
    }
    GTEST_SKIP() << "headless Chromium not found at " << chromium
                 << " (install the Debian package chromium, or set "
                    "$CHROMIUM); the DOM check is skipped";
  }
  // gpt3-175b on 64 GPUs needs a pipeline, so the timeline has a bubble.
  const std::string search =
      "--model gpt3-175b --gpus 64 --gpu a100-80g --gbs 64 --no-db";
  const std::string dir = MakeTempDir();
  const std::string file = dir + "/report.html";
  const TuneRun report = RunTune("report --html " + file + " " + search);
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const TuneRun json_run = RunTune("search " + search + " --json --top 1");
  ASSERT_EQ(json_run.exit_code, 0) << json_run.err;
  const auto json = nlohmann::json::parse(json_run.out);
  const int64_t feasible = json["feasible"].get<int64_t>();
  const int64_t pp = json["candidates"][0]["config"]["pp"].get<int64_t>();
  ASSERT_GT(pp, 1) << "pick a search whose best configuration pipelines";

  const std::string dom_file = dir + "/dom.html";
  const std::string cmd =
      "timeout 120 '" + chromium +
      "' --headless --no-sandbox --disable-gpu --user-data-dir='" + dir +
      "/profile' --dump-dom 'file://" + file + "' >'" + dom_file + "' 2>'" +
      dir + "/chromium.log'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << ReadFile(dir + "/chromium.log");
  const std::string dom = ReadFile(dom_file);
  ASSERT_FALSE(dom.empty()) << ReadFile(dir + "/chromium.log");

  // Pareto: every feasible candidate (the search is small enough to plot
  // all of them), the out-of-memory ones greyed, the HBM limit.
  const std::string pareto = Chart(dom, "pareto");
  ASSERT_FALSE(pareto.empty());
  EXPECT_EQ(static_cast<int64_t>(Count(pareto, "data-kind=\"frontier\"") +
                                 Count(pareto, "data-kind=\"feasible\"")),
            feasible);
  EXPECT_GT(Count(pareto, "data-kind=\"out_of_memory\""), 0u);
  EXPECT_NE(pareto.find("id=\"hbm-limit\""), std::string::npos);
  // Breakdowns: the top 5 with their terms.
  const std::string time = Chart(dom, "time-breakdown");
  EXPECT_GT(Count(time, "data-term=\"compute\""), 4u);
  EXPECT_EQ(Count(time, "data-term=\"pp_bubble\""), 5u);
  const std::string memory = Chart(dom, "memory-breakdown");
  EXPECT_EQ(Count(memory, "data-term=\"weights\""), 5u);
  // Timeline: 2 steps per micro-batch and chunk on each of pp stages, and a
  // bubble.
  const std::string timeline = Chart(dom, "pipeline-timeline");
  const size_t steps = Count(timeline, "data-kind=\"forward\"") +
                       Count(timeline, "data-kind=\"backward\"");
  EXPECT_GT(steps, 0u);
  EXPECT_NE(timeline.find("data-ops=\"" + std::to_string(steps) + "\""),
            std::string::npos);
  EXPECT_EQ(Count(timeline, "data-kind=\"forward\""),
            Count(timeline, "data-kind=\"backward\""));
  EXPECT_GT(Count(timeline, "data-kind=\"idle\""), 0u);
  EXPECT_NE(dom.find("id=\"command\""), std::string::npos);
  EXPECT_NE(dom.find("id=\"version\""), std::string::npos);
}

}  // namespace
}  // namespace meshtune::tuner
