// The HTML report's charts draw every mark inside themselves (issue 19): the
// geometry check of tests/tuner/render/svg_geometry.h on hand-made SVG (so
// that it is known to catch each kind of fault), then on the reports of the
// three searches of kGeometryReportSearches rendered in process, with the
// other promises of the issue read back from the HTML: bars scaled to their
// totals, the HBM limit on the axis, a readable pipeline chart, plain
// numbers, the summary's memory and "why this plan" lines. The same check on
// the DOM Chromium renders is tests/tuner/report_chromium_test.cc.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/tuner/render/svg_geometry.h"
#include "tests/tuner/tune_in_process.h"

namespace meshtune::tuner {
namespace {

using testing::MakeTempDir;
using testing::ReadFile;
using testing::RunTuneInProcess;
using testing::SvgGeometryProblems;

std::string Svg(const std::string& inner) {
  return "<svg id=\"c\" viewBox=\"0 0 200 100\" data-plot=\"20 10 160 70\">" +
         inner + "</svg>";
}

TEST(SvgGeometryTest, AcceptsMarksInsideTheirFrames) {
  EXPECT_TRUE(
      SvgGeometryProblems(
          Svg("<rect data-kind=\"forward\" x=\"20\" y=\"10\" width=\"160\" "
              "height=\"70\"/><circle data-rank=\"1\" cx=\"100\" cy=\"40\" "
              "r=\"6\"><title>x &lt; y</title></circle>"
              "<line x1=\"0\" y1=\"0\" x2=\"200\" y2=\"100\"/>"
              "<polyline points=\"20,10 180,80\"/>"
              "<path data-kind=\"out_of_memory\" d=\"M179,40 l-7,-4 v8 z\"/>"
              "<text x=\"100\" y=\"95\" text-anchor=\"middle\">12.5</text>"
              "<text class=\"title\" transform=\"translate(10,45) "
              "rotate(-90)\" text-anchor=\"middle\">step (s)</text>"))
          .empty());
}

TEST(SvgGeometryTest, ReportsEachKindOfFault) {
  struct Case {
    std::string inner;
    std::string why;
  };
  const std::vector<Case> cases = {
      // A bar past the viewBox (the time bars before the fix).
      {"<rect data-term=\"compute\" x=\"20\" y=\"20\" width=\"190\" "
       "height=\"10\"/>",
       "outside the viewBox"},
      // A total printed past the right edge.
      {"<text x=\"180\" y=\"50\">16.759 s</text>", "outside the viewBox"},
      // An out-of-memory point right of the frame, inside the viewBox.
      {"<circle data-kind=\"out_of_memory\" cx=\"190\" cy=\"40\" r=\"3\"/>",
       "outside the plot"},
      // The HBM line beyond the axis.
      {"<line data-gib=\"77\" x1=\"185\" x2=\"185\" y1=\"10\" y2=\"80\"/>",
       "outside the plot"},
      {"<path data-kind=\"x\" d=\"M170,40 L190,40\"/>", "outside the plot"},
      {"<polyline points=\"20,10 210,80\"/>", "outside the viewBox"},
      // A pipeline step of a pixel (aliases into a colour of no legend).
      {"<rect data-kind=\"forward\" x=\"30\" y=\"20\" width=\"1\" "
       "height=\"10\"/>",
       "narrower than 2 px"},
      // The HBM label over a total.
      {"<text x=\"60\" y=\"40\">usable HBM 77 GiB</text><text x=\"120\" "
       "y=\"42\">75.35</text>",
       "overlaps"},
      // A rotated title that runs off the top.
      {"<text transform=\"translate(10,20) rotate(-90)\" "
       "text-anchor=\"middle\">a very long axis title</text>",
       "outside the viewBox"},
      {"<path d=\"M10,10 C20,20 30,30 40,40\"/>", "command"},
      {"<text transform=\"skewX(10)\" x=\"50\" y=\"50\">a</text>", "transform"},
  };
  for (const Case& c : cases) {
    const std::vector<std::string> problems = SvgGeometryProblems(Svg(c.inner));
    ASSERT_EQ(problems.size(), 1u) << c.inner;
    EXPECT_NE(problems[0].find(c.why), std::string::npos) << problems[0];
  }
  EXPECT_EQ(SvgGeometryProblems("<svg id=\"c\" viewBox=\"0 0 9 9\"></svg>"),
            std::vector<std::string>{"chart c: no data-plot"});
}

// The <svg id="ID" ...>...</svg> element of `html` ("" when absent).
std::string Chart(const std::string& html, const std::string& id) {
  const size_t begin = html.find("<svg id=\"" + id + "\"");
  if (begin == std::string::npos) return "";
  return html.substr(begin, html.find("</svg>", begin) - begin);
}

std::vector<double> Numbers(const std::string& text, const std::regex& re) {
  std::vector<double> out;
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end;
       ++it) {
    out.push_back(std::stod((*it)[1]));
  }
  return out;
}

class ReportGeometryTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ReportGeometryTest, EveryMarkIsInsideItsChart) {
  const std::string file = MakeTempDir() + "/r.html";
  const auto run =
      RunTuneInProcess("report --html " + file + " " + std::string(GetParam()));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string html = ReadFile(file);
  const std::vector<std::string> problems = SvgGeometryProblems(html);
  std::string first;
  for (size_t i = 0; i < problems.size() && i < 10; ++i) {
    first += problems[i] + "\n";
  }
  EXPECT_TRUE(problems.empty())
      << problems.size() << " marks outside their chart:\n"
      << first;
  for (const char* id :
       {"pareto", "time-breakdown", "memory-breakdown", "pipeline-timeline"}) {
    EXPECT_FALSE(Chart(html, id).empty()) << id;
  }

  // Plain numbers everywhere: no e-notation in text or attributes.
  std::smatch m;
  EXPECT_FALSE(std::regex_search(html, m, std::regex("[0-9]e[+-][0-9]")))
      << m.str() << " in "
      << m.prefix().str().substr(
             m.prefix().length() > 80 ? m.prefix().length() - 80 : 0);

  // Each time bar ends where its total says, and the longest reaches past
  // half the plot (the axis is scaled to the data, not 10x beyond it).
  const std::string time = Chart(html, "time-breakdown");
  const std::vector<double> totals =
      Numbers(time, std::regex("<text class=\"total\"[^>]*>([0-9.]+) s<"));
  ASSERT_FALSE(totals.empty());
  double longest = 0;
  for (const double t : totals) longest = std::max(longest, t);
  const std::vector<double> ticks = Numbers(
      time, std::regex("<text class=\"tick\" x=\"[0-9.]+\" y=\"[0-9.]+\" "
                       "text-anchor=\"middle\">([0-9.]+)<"));
  ASSERT_GE(ticks.size(), 2u);
  EXPECT_GE(ticks.back(), longest);
  EXPECT_GT(longest, ticks.back() / 2);

  // The pipeline chart draws only the legend's classes.
  const std::string timeline = Chart(html, "pipeline-timeline");
  const std::set<std::string> legend = {"fwd",   "fwd odd", "bwd",  "bwd odd",
                                        "idle",  "elided",  "grid", "tick",
                                        "title", "chart"};
  const std::regex cls("class=\"([^\"]*)\"");
  for (std::sregex_iterator it(timeline.begin(), timeline.end(), cls), end;
       it != end; ++it) {
    EXPECT_TRUE(legend.count((*it)[1]) > 0) << (*it)[1];
  }

  // The summary: memory against the usable HBM, and why this plan.
  EXPECT_TRUE(std::regex_search(
      html, std::regex("<span id=\"summary-memory\">Memory: [0-9.]+ of "
                       "[0-9.]+ GiB usable per GPU \\([0-9.]+%\\), [0-9.]+ "
                       "GiB headroom")));
  EXPECT_TRUE(std::regex_search(
      html, std::regex("<span id=\"summary-why\">Why this plan: .*Its step: "
                       "compute [0-9.]+% \\(recompute [0-9.]+%\\), pipeline "
                       "bubble [0-9.]+%, exposed communication [0-9.]+%\\.")));
}

INSTANTIATE_TEST_SUITE_P(Issue19, ReportGeometryTest,
                         ::testing::ValuesIn(testing::kGeometryReportSearches));

TEST(ReportGeometryTest175b, ElidesTheSteadyStateAndKeepsTheHbmOnTheAxis) {
  const std::string file = MakeTempDir() + "/r.html";
  ASSERT_EQ(RunTuneInProcess("report --html " + file + " " +
                             std::string(testing::kGeometryReportSearches[0]))
                .exit_code,
            0);
  const std::string html = ReadFile(file);
  // tp4 pp8 vpp12, 24 micro-batches: 2 x 8 x 12 x 24 steps, too many for
  // 870 pixels, so the steady state is elided and said so.
  const std::string timeline = Chart(html, "pipeline-timeline");
  EXPECT_NE(timeline.find("data-ops-total=\"4608\""), std::string::npos);
  EXPECT_NE(timeline.find("data-elided-from-s="), std::string::npos);
  EXPECT_NE(timeline.find("<rect class=\"elided\""), std::string::npos);
  EXPECT_NE(html.find("Interleaved 1F1B: 8 stages x 12 model chunks (vpp), 24 "
                      "micro-batches, 4608 steps; bubble 2.43% of the "
                      "micro-batch work (cost model)"),
            std::string::npos);
  EXPECT_NE(html.find("of steady state between are elided"), std::string::npos);
  // The usable HBM (77 GiB) is on both memory axes, with its line.
  EXPECT_NE(Chart(html, "pareto")
                .find("<line class=\"limit\" "
                      "id=\"hbm-limit\" data-gib=\"77\""),
            std::string::npos);
  EXPECT_NE(Chart(html, "memory-breakdown")
                .find("<line class=\"limit\" "
                      "data-gib=\"77\""),
            std::string::npos);
  // Most sampled out-of-memory candidates need more than the axis shows:
  // triangles at the frame's edge, counted in the legend.
  EXPECT_NE(Chart(html, "pareto").find("<path class=\"out_of_memory\""),
            std::string::npos);
  EXPECT_NE(html.find(" beyond the axes are drawn as triangles"),
            std::string::npos);
  // 97.9 % of the HBM: the summary says near capacity and the margin.
  EXPECT_NE(html.find("Memory: 75.35 of 77.00 GiB usable per GPU (97.9%), "
                      "1.65 GiB headroom &mdash; near capacity"),
            std::string::npos);
  EXPECT_NE(html.find("the fastest with another tp/pp, tp8 pp4 vpp24"),
            std::string::npos);
  EXPECT_NE(html.find("187705 tokens/s"), std::string::npos);
}

TEST(ReportGeometryTestTiny, ScalesEveryAxisToItsData) {
  const std::string file = MakeTempDir() + "/r.html";
  ASSERT_EQ(RunTuneInProcess("report --html " + file + " " +
                             std::string(testing::kGeometryReportSearches[2]))
                .exit_code,
            0);
  const std::string html = ReadFile(file);
  // 0.4 GiB of 11.27: the memory axes end below 1 GiB and say where the
  // HBM limit is instead of drawing it 30x beyond the data.
  for (const char* id : {"pareto", "memory-breakdown"}) {
    const std::string chart = Chart(html, id);
    const std::vector<double> ticks = Numbers(
        chart, std::regex("<text class=\"tick\" x=\"[0-9.]+\" y=\"[0-9.]+\" "
                          "text-anchor=\"middle\">([0-9.]+)<"));
    ASSERT_GE(ticks.size(), 3u) << id;
    EXPECT_LT(ticks.back(), 1) << id;
    EXPECT_NE(chart.find("beyond this axis"), std::string::npos) << id;
  }
  EXPECT_NE(html.find("GPT tiny (gpt-tiny): 4.3 M parameters"),
            std::string::npos);
  EXPECT_NE(html.find("1F1B: 1 stage, 1 micro-batch, 2 steps"),
            std::string::npos);
  EXPECT_NE(html.find("no feasible plan has another tp/pp"), std::string::npos);
}

}  // namespace
}  // namespace meshtune::tuner
