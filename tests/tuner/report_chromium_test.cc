// `tune report --html` rendered by a real browser: headless Chromium loads
// the file and dumps its DOM, and every chart must be there with one mark
// per plotted candidate (the numbers of the same search's JSON), and every
// mark lies inside its chart (issue 19; tests/tuner/render/svg_geometry.h).
// Skips when Chromium is not installed, unless MESHTUNE_REQUIRE_CHROMIUM=1
// (scripts/test sets it), where a missing browser fails.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/tuner/render/svg_geometry.h"
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

// Skips the calling test when there is no Chromium at `chromium`, or fails
// it when MESHTUNE_REQUIRE_CHROMIUM=1 (a macro: GTEST_SKIP and FAIL return
// from the test itself).
#define REQUIRE_CHROMIUM_OR_SKIP(chromium)                                    \
  do {                                                                        \
    if (access((chromium).c_str(), X_OK) != 0) {                              \
      const char* require = std::getenv("MESHTUNE_REQUIRE_CHROMIUM");         \
      if (require != nullptr && std::string(require) == "1") {                \
        FAIL() << "MESHTUNE_REQUIRE_CHROMIUM=1 but " << (chromium)            \
               << " is missing: run scripts/setup (Debian package chromium)"; \
      }                                                                       \
      GTEST_SKIP() << "headless Chromium not found at " << (chromium)         \
                   << " (install the Debian package chromium, or set "        \
                      "$CHROMIUM); the DOM check is skipped";                 \
    }                                                                         \
  } while (false)

// The DOM headless Chromium renders from `file` (a report in `dir`); ""
// with the browser's log in `log` when it fails.
std::string DumpDom(const std::string& chromium, const std::string& dir,
                    const std::string& file, std::string* log) {
  const std::string dom_file = file + ".dom.html";
  const std::string cmd =
      "timeout 120 '" + chromium +
      "' --headless --no-sandbox --disable-gpu --user-data-dir='" + dir +
      "/profile' --dump-dom 'file://" + file + "' >'" + dom_file + "' 2>'" +
      dir + "/chromium.log'";
  if (std::system(cmd.c_str()) != 0) {
    *log = ReadFile(dir + "/chromium.log");
    return "";
  }
  return ReadFile(dom_file);
}

TEST(ReportChromiumTest, RenderedDomHasEveryChartWithItsDataPoints) {
  const std::string chromium = ChromiumPath();
  REQUIRE_CHROMIUM_OR_SKIP(chromium);
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

  std::string log;
  const std::string dom = DumpDom(chromium, dir, file, &log);
  ASSERT_FALSE(dom.empty()) << log;

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
  // bubble; with more steps than fit, the steady state is elided, so only
  // an unelided chart has as many forwards as backwards.
  const auto& config = json["candidates"][0]["config"];
  const int64_t microbatches =
      config["gbs"].get<int64_t>() /
      (config["mbs"].get<int64_t>() * config["dp"].get<int64_t>());
  const int64_t all_steps =
      2 * pp * config["vpp"].get<int64_t>() * microbatches;
  const std::string timeline = Chart(dom, "pipeline-timeline");
  const size_t steps = Count(timeline, "data-kind=\"forward\"") +
                       Count(timeline, "data-kind=\"backward\"");
  EXPECT_GT(steps, 0u);
  EXPECT_NE(timeline.find("data-ops=\"" + std::to_string(steps) + "\""),
            std::string::npos);
  EXPECT_NE(
      timeline.find("data-ops-total=\"" + std::to_string(all_steps) + "\""),
      std::string::npos);
  if (timeline.find("data-elided-from-s") == std::string::npos) {
    EXPECT_EQ(static_cast<int64_t>(steps), all_steps);
    EXPECT_EQ(Count(timeline, "data-kind=\"forward\""),
              Count(timeline, "data-kind=\"backward\""));
  }
  EXPECT_GT(Count(timeline, "data-kind=\"idle\""), 0u);
  EXPECT_NE(dom.find("id=\"command\""), std::string::npos);
  EXPECT_NE(dom.find("id=\"version\""), std::string::npos);
}

// Issue 19: in the DOM Chromium renders, every chart mark lies inside its
// chart (the viewBox) and every data mark inside the plot frame, for the
// reports of tests/tuner/render/svg_geometry.h's three searches (175B on
// 1024 GPUs, LLaMA-3 70B on 128 H100s, gpt-tiny on one CPU rank).
TEST(ReportChromiumTest, RenderedChartsDrawEveryMarkInsideThemselves) {
  const std::string chromium = ChromiumPath();
  REQUIRE_CHROMIUM_OR_SKIP(chromium);
  const std::string dir = MakeTempDir();
  int index = 0;
  for (const char* search : testing::kGeometryReportSearches) {
    const std::string file = dir + "/r" + std::to_string(index++) + ".html";
    const TuneRun report =
        RunTune("report --html " + file + " " + std::string(search));
    ASSERT_EQ(report.exit_code, 0) << search << ": " << report.err;
    std::string log;
    const std::string dom = DumpDom(chromium, dir, file, &log);
    ASSERT_FALSE(dom.empty()) << search << ": " << log;
    // Chromium parsed every chart and serialized it back.
    for (const char* id : {"pareto", "time-breakdown", "memory-breakdown",
                           "pipeline-timeline"}) {
      EXPECT_FALSE(Chart(dom, id).empty()) << search << ": " << id;
    }
    const std::vector<std::string> problems = testing::SvgGeometryProblems(dom);
    std::string first;
    for (size_t i = 0; i < problems.size() && i < 10; ++i) {
      first += problems[i] + "\n";
    }
    EXPECT_TRUE(problems.empty())
        << search << ": " << problems.size() << " marks outside their chart:\n"
        << first;
  }
}

}  // namespace
}  // namespace meshtune::tuner
