// The HTML report's pieces (tuner/render/svg_chart.h,
// tuner/render/pipeline_timeline.h, tuner/render/report_html.h) and `tune
// report` end to end: its charts carry one mark per plotted candidate with the
// estimate's numbers, and bad input is one line with a hint and exit code 2.
#include "tuner/render/report_html.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "costmodel/datasheet_calibration.h"
#include "search_spaces/pipeline_schedule.h"
#include "tests/tuner/tune_in_process.h"
#include "tuner/inputs/inputs.h"
#include "tuner/render/pipeline_timeline.h"
#include "tuner/render/scale_report.h"
#include "tuner/render/svg_chart.h"
#include "tuner/search/search_driver.h"

namespace meshtune::tuner {
namespace {

using search_spaces::PipelineSchedule;
using testing::MakeTempDir;
using testing::ReadFile;
using testing::RunTuneInProcess;
using testing::TuneRun;

// Occurrences of `needle` in `text`.
size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

// The <svg id="ID" ...>...</svg> element of `html` ("" when absent).
std::string Chart(const std::string& html, const std::string& id) {
  const size_t begin = html.find("<svg id=\"" + id + "\"");
  if (begin == std::string::npos) return "";
  const size_t end = html.find("</svg>", begin);
  return html.substr(begin, end - begin);
}

TEST(SvgChartTest, EscapesEveryHtmlSpecialCharacter) {
  EXPECT_EQ(HtmlEscape("a<b>&\"c'd"), "a&lt;b&gt;&amp;&quot;c&#39;d");
  EXPECT_EQ(SvgAttr("data-x", "<"), " data-x=\"&lt;\"");
  EXPECT_EQ(SvgAttr("r", 2.5), " r=\"2.5\"");
}

TEST(SvgChartTest, NiceTicksAreRoundAndCoverTheRange) {
  EXPECT_EQ(NiceTicks(0, 10, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(NiceTicks(0, 0.3, 3), (std::vector<double>{0, 0.1, 0.2, 0.3}));
  EXPECT_EQ(NiceTicks(3, 3, 5), (std::vector<double>{3}));
  EXPECT_EQ(FormatNumber(-0.0), "0");
  EXPECT_EQ(FormatNumber(12.3456), "12.35");
  const LinearScale y{0, 10, 100, 0};  // y grows upwards
  EXPECT_DOUBLE_EQ(y(2.5), 75);
}

TEST(SvgChartTest, NumbersArePlainNeverInENotation) {
  EXPECT_EQ(FormatNumber(187734.4), "187734");
  EXPECT_EQ(FormatNumber(1.903e5, 4), "190300");
  EXPECT_EQ(FormatNumber(16.759), "16.76");
  EXPECT_EQ(FormatNumber(0.000123456), "0.0001235");
  EXPECT_EQ(FormatNumber(2.5, 6), "2.5");
  EXPECT_EQ(FormatNumber(1000), "1000");
  EXPECT_EQ(FormatNumber(-0.00001, 2), "-0.00001");
  EXPECT_EQ(FormatNumber(1e-15), "0");
  EXPECT_EQ(FormatNumber(-1e-9, 1), "-0.000000001");
}

TEST(SvgChartTest, NiceAxisEnclosesTheDataAndIsNeverEmpty) {
  // The time bars of 175B: 16.76 s; NiceTicks stops at 15, the axis at 20.
  EXPECT_EQ(NiceTicks(0, 16.76, 8).back(), 15);
  const NiceAxis time = NiceAxisCovering(0, 16.76, 8);
  EXPECT_EQ(time.lo, 0);
  EXPECT_GE(time.hi, 16.76);
  EXPECT_LE(time.hi, 20);
  EXPECT_EQ(time.ticks.front(), 0);
  EXPECT_EQ(time.ticks.back(), time.hi);
  const NiceAxis empty = NiceAxisCovering(0, 0, 5);
  EXPECT_EQ(empty.lo, 0);
  EXPECT_GT(empty.hi, 0);
  const NiceAxis point = NiceAxisCovering(3, 3, 5);
  EXPECT_LT(point.lo, 3);
  EXPECT_GT(point.hi, 3);
  const NiceAxis tiny = NiceAxisCovering(0, 0.3712, 10);
  EXPECT_GE(tiny.hi, 0.3712);
  EXPECT_LT(tiny.hi, 0.5);
  EXPECT_GE(tiny.ticks.size(), 4u);
}

TEST(SvgChartTest, LogAxisTicksAreOneTwoFive) {
  EXPECT_EQ(LogTicks(14.6, 1700),
            (std::vector<double>{20, 50, 100, 200, 500, 1000}));
  EXPECT_EQ(LogTicks(0.011, 0.6),
            (std::vector<double>{0.02, 0.05, 0.1, 0.2, 0.5}));
  // Narrower than a factor of 3: linear round values instead.
  EXPECT_EQ(LogTicks(1.1, 1.9), (std::vector<double>{1.2, 1.4, 1.6, 1.8}));
  const LogScale y{10, 1000, 100, 0};
  EXPECT_DOUBLE_EQ(y(100), 50);
  EXPECT_DOUBLE_EQ(y(10), 100);
}

costmodel::Estimate Point(double memory_gib, double step_s) {
  costmodel::Estimate e;
  e.memory.weights_bytes = memory_gib * 1024.0 * 1024.0 * 1024.0;
  e.step_time_s = step_s;
  return e;
}

TEST(ParetoTest, FrontierKeepsOnlyUnbeatenPointsByAscendingMemory) {
  // Ranked by step time: (40 GiB, 1 s), (30, 2), (35, 3), (20, 4), (20, 5).
  const std::vector<costmodel::Estimate> ranked = {
      Point(40, 1), Point(30, 2), Point(35, 3), Point(20, 4), Point(20, 5)};
  EXPECT_EQ(ParetoFrontier(ranked), (std::vector<size_t>{3, 1, 0}));
}

TEST(ParetoTest, EveryNthSamplesDeterministicallyAndSkipsExcluded) {
  const Sample all = EveryNth(5, 10, {2});
  EXPECT_EQ(all.stride, 1u);
  EXPECT_EQ(all.indices, (std::vector<size_t>{0, 1, 3, 4}));
  const Sample some = EveryNth(10, 3, {});
  EXPECT_EQ(some.stride, 4u);
  EXPECT_EQ(some.indices, (std::vector<size_t>{0, 4, 8}));
}

TEST(PipelineTimelineTest, OneFOneBSpanIsMicrobatchesPlusFillAndDrain) {
  // 1F1B: (m + pp - 1)(f + b), the bubble (pp-1)/(m+pp-1) of each rank.
  const PipelineSchedule schedule(/*pp=*/4, /*vpp=*/1, /*m=*/8);
  auto t = SimulatePipeline(schedule, {/*forward_s=*/1, /*backward_s=*/2});
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_DOUBLE_EQ(t->span_s, 33);
  EXPECT_EQ(t->ops.size(), 4u * 2 * 8);
  EXPECT_NEAR(t->IdleFraction(), 3.0 / 11.0, 1e-12);
  // Rank 0 starts with its pp-1 warm-up forwards, back to back.
  EXPECT_TRUE(t->ops[0].forward && t->ops[1].forward && t->ops[2].forward);
  EXPECT_DOUBLE_EQ(t->ops[2].end_s, 3);
}

TEST(PipelineTimelineTest, InterleavingShrinksTheBubbleByTheChunkCount) {
  // Interleaved: (pp-1)/vpp micro-batch times of idle per rank.
  const PipelineSchedule schedule(/*pp=*/4, /*vpp=*/2, /*m=*/8);
  auto t = SimulatePipeline(schedule, {1, 2});
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_DOUBLE_EQ(t->span_s, 8 * 3 + 3.0 * 3 / 2);
  EXPECT_EQ(t->ops.size(), 4u * 2 * 8 * 2);
}

TEST(PipelineTimelineTest, NoPipelineHasNoIdleTime) {
  auto t = SimulatePipeline(PipelineSchedule(1, 1, 4), {1, 2});
  ASSERT_TRUE(t.ok());
  EXPECT_DOUBLE_EQ(t->span_s, 12);
  EXPECT_DOUBLE_EQ(t->IdleFraction(), 0);
  const std::string svg = TimelineSvg(t.value(), "tl");
  EXPECT_EQ(Count(svg, "data-kind=\"forward\""), 4u);
  EXPECT_EQ(Count(svg, "data-kind=\"backward\""), 4u);
  EXPECT_EQ(Count(svg, "data-kind=\"idle\""), 0u);
}

TEST(PipelineTimelineTest, ManyStepsElideTheSteadyStateAndStayWide) {
  // 175B's schedule: 8 stages x 12 chunks x 24 micro-batches = 4608 steps,
  // a third of a pixel each at full width.
  const PipelineSchedule schedule(/*pp=*/8, /*vpp=*/12, /*m=*/24);
  auto t = SimulatePipeline(schedule, {1, 2});
  ASSERT_TRUE(t.ok());
  const TimelineView view = PlanTimelineView(t.value(), kTimelinePlotWidth);
  ASSERT_TRUE(view.elided);
  // The shortest step (a chunk's forward, 1/12 s) is kMinStepPx wide, and
  // both windows plus the gap fill the plot.
  EXPECT_NEAR(view.px_per_s / 12, TimelineView::kMinStepPx, 1e-9);
  EXPECT_NEAR(2 * view.head_end_s * view.px_per_s + TimelineView::kGapPx,
              kTimelinePlotWidth, 1e-9);
  EXPECT_NEAR(t->span_s - view.tail_start_s, view.head_end_s, 1e-9);
  // The warm-up of stage 0 (every stage's first forwards) is drawn.
  EXPECT_GT(view.head_end_s, (8 - 1) * 2.0 / 12 + 8.0 / 12);
  const std::string svg = TimelineSvg(t.value(), "tl");
  EXPECT_NE(svg.find("data-ops-total=\"4608\""), std::string::npos);
  EXPECT_NE(svg.find("<rect class=\"elided\""), std::string::npos);
  const std::regex width("data-kind=\"[a-z]+\"[^>]* width=\"([0-9.]+)\"");
  size_t rects = 0;
  for (std::sregex_iterator it(svg.begin(), svg.end(), width), end; it != end;
       ++it) {
    EXPECT_GE(std::stod((*it)[1]), 2.0);
    ++rects;
  }
  EXPECT_GT(rects, 100u);
  EXPECT_LT(Count(svg, "data-kind=\"forward\""), 4608u / 2);
  // A small schedule is drawn whole.
  auto small = SimulatePipeline(PipelineSchedule(4, 1, 8), {1, 2});
  ASSERT_TRUE(small.ok());
  EXPECT_FALSE(PlanTimelineView(small.value(), kTimelinePlotWidth).elided);
  const std::string whole = TimelineSvg(small.value(), "tl");
  EXPECT_NE(whole.find("data-ops=\"64\" data-ops-total=\"64\""),
            std::string::npos);
}

TEST(PipelineTimelineTest, StageTimesSplitTheEstimatesMicrobatchWork) {
  costmodel::Estimate e;
  e.time.compute_s = 30;
  e.time.recompute_s = 4;
  e.time.tp_comm_s = 2;
  e.time.pp_bubble_s = 100;  // not micro-batch work
  const StageMicrobatchTimes t = StageTimesFromEstimate(e, 2);
  EXPECT_DOUBLE_EQ(t.forward_s, (10 + 1) / 2.0);
  EXPECT_DOUBLE_EQ(t.backward_s, (20 + 4 + 1) / 2.0);
}

// A real search, rendered in process.
class RenderedReportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    InputFlags flags;
    flags.model = "gpt3-13b";
    flags.gpus = "64";
    flags.gpu = "a100-80g";
    flags.gbs = "256";
    auto in = ResolveInputs(flags);
    ASSERT_TRUE(in.ok()) << in.status().message();
    inputs_ = new Inputs(in.value());
    inputs_->model.name = "13b <&\"'> model";  // must come out escaped
    const costmodel::DatasheetCalibration cal(inputs_->cluster);
    SearchOptions options;
    options.keep_out_of_memory = true;
    result_ = new SearchResult(RunSearch(inputs_->model, inputs_->cluster,
                                         inputs_->training, inputs_->space, cal,
                                         options));
  }
  static void TearDownTestSuite() {
    delete inputs_;
    delete result_;
  }
  static Inputs* inputs_;
  static SearchResult* result_;
};
Inputs* RenderedReportTest::inputs_ = nullptr;
SearchResult* RenderedReportTest::result_ = nullptr;

TEST_F(RenderedReportTest, PlotsEveryCandidateWhenTheSearchIsSmall) {
  ASSERT_GT(result_->feasible, 0);
  ASSERT_FALSE(result_->out_of_memory.empty());
  EXPECT_EQ(static_cast<int64_t>(result_->out_of_memory.size()),
            result_->rejected.at("out_of_memory"));
  HtmlReportSource source;
  source.command = "tune report --html r.html --model <x>";
  source.version = "tune 9.9 (abc)";
  HtmlReportOptions options;
  options.max_feasible_points = result_->ranked.size();
  const std::string html =
      RenderHtmlReport(*inputs_, *result_, {}, source, options);
  const std::string pareto = Chart(html, "pareto");
  const size_t feasible = Count(pareto, "data-kind=\"feasible\"") +
                          Count(pareto, "data-kind=\"frontier\"");
  EXPECT_EQ(static_cast<int64_t>(feasible), result_->feasible);
  // Out-of-memory candidates near the feasible ones, greyed with reason.
  const size_t oom = Count(pareto, "data-kind=\"out_of_memory\"");
  EXPECT_GT(oom, 0u);
  EXPECT_EQ(Count(pareto, "data-reason=\"out_of_memory\""), oom);
  EXPECT_NE(pareto.find("data-out-of-memory=\"" +
                        std::to_string(result_->out_of_memory.size()) +
                        "\" data-out-of-memory-shown=\"" + std::to_string(oom) +
                        "\""),
            std::string::npos);
  EXPECT_EQ(Count(pareto, "class=\"frontier best\""), 1u);
  // Five breakdown rows; the bars of rank 1 add up to its step time.
  const std::string time = Chart(html, "time-breakdown");
  EXPECT_NE(time.find("data-rows=\"5\""), std::string::npos);
  EXPECT_NE(time.find("data-rank=\"5\""), std::string::npos);
  EXPECT_EQ(time.find("data-rank=\"6\""), std::string::npos);
  EXPECT_NE(Chart(html, "memory-breakdown").find("data-term=\"activations\""),
            std::string::npos);
  EXPECT_NE(Chart(html, "pipeline-timeline").find("data-kind=\"forward\""),
            std::string::npos);
  // Escaped everywhere: title, inputs, command.
  EXPECT_EQ(html.find("13b <&"), std::string::npos);
  EXPECT_NE(html.find("<title>meshtune: 13b &lt;&amp;&quot;&#39;&gt; model"),
            std::string::npos);
  EXPECT_NE(html.find("--model &lt;x&gt;"), std::string::npos);
  EXPECT_NE(html.find("tune 9.9 (abc)"), std::string::npos);
  EXPECT_NE(html.find("No measured runs"), std::string::npos);
  // Self-contained: nothing is fetched.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
}

TEST_F(RenderedReportTest, SamplesLargeSearchesAndSaysSoInTheLegend) {
  HtmlReportOptions options;
  options.max_feasible_points = 10;
  options.max_out_of_memory_points = 4;
  const std::string html =
      RenderHtmlReport(*inputs_, *result_, {}, HtmlReportSource(), options);
  const std::string pareto = Chart(html, "pareto");
  const size_t frontier = ParetoFrontier(result_->ranked).size();
  const size_t others = Count(pareto, "data-kind=\"feasible\"");
  EXPECT_EQ(Count(pareto, "data-kind=\"frontier\""), frontier);
  EXPECT_LE(others, 10u);
  EXPECT_LE(Count(pareto, "data-kind=\"out_of_memory\""), 4u);
  EXPECT_NE(html.find("other feasible: " + std::to_string(others) + " of " +
                      std::to_string(result_->ranked.size() - frontier) +
                      " shown (every "),
            std::string::npos);
}

TEST_F(RenderedReportTest, ValidationRunsArePlottedAgainstPredictions) {
  results::PredictedVsMeasured run;
  run.rank = 1;
  run.config_text = "tp2 <pp>";
  run.training_run_id = 7;
  run.predicted_step_time_s = 1.5;
  run.measured_step_time_s = 2.0;
  run.relative_error = -0.25;
  HtmlReportSource source;
  source.search_id = 3;
  const std::string html =
      RenderHtmlReport(*inputs_, *result_, {run}, source, HtmlReportOptions());
  const std::string chart = Chart(html, "validation");
  EXPECT_EQ(Count(chart, "data-kind=\"validation\""), 1u);
  EXPECT_NE(chart.find("data-predicted-s=\"1.5\" data-measured-s=\"2\""),
            std::string::npos);
  EXPECT_NE(html.find("<td>-25%</td>"), std::string::npos);
  EXPECT_NE(html.find("tp2 &lt;pp&gt;"), std::string::npos);
}

TEST_F(RenderedReportTest, ScaleSectionHasOnePointPerFeasibleSize) {
  ScaleReport scale;
  scale.first = *inputs_;
  for (const int64_t gpus : {32, 64, 128}) {
    ScaleRow row;
    row.gpus = gpus;
    row.feasible = gpus != 32;
    if (row.feasible) {
      row.best = result_->ranked.front();
    } else {
      row.reason = "needs <more> memory";
    }
    scale.rows.push_back(row);
  }
  FinishScaleRows(&scale);
  const std::string html = RenderHtmlReport(
      *inputs_, *result_, {}, HtmlReportSource(), HtmlReportOptions(), &scale);
  const std::string chart = Chart(html, "scale");
  EXPECT_EQ(Count(chart, "data-kind=\"scale\""), 2u);
  EXPECT_NE(chart.find("data-gpus=\"64\""), std::string::npos);
  EXPECT_NE(chart.find("data-scaling-efficiency=\"1\""), std::string::npos);
  EXPECT_EQ(chart.find("data-gpus=\"32\""), std::string::npos);
  EXPECT_NE(html.find("no feasible configuration: needs &lt;more&gt; memory"),
            std::string::npos);
}

// ---- `tune report` end to end ---------------------------------------------

constexpr const char* kSearch =
    "--model gpt3-13b --gpus 64 --gpu a100-80g --gbs 256";

TEST(ReportCommandTest, NumbersInTheHtmlAreTheSearchsJsonNumbers) {
  const std::string dir = MakeTempDir();
  const std::string file = dir + "/r.html";
  const TuneRun report =
      RunTuneInProcess(std::string("report --html ") + file + " " + kSearch +
                       " --no-db --scale-gpus 64,32");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.err.find("tune: wrote the HTML report to " + file),
            std::string::npos);
  const TuneRun search = RunTuneInProcess(std::string("search ") + kSearch +
                                          " --no-db --json --top 1");
  ASSERT_EQ(search.exit_code, 0) << search.err;
  const auto json = nlohmann::json::parse(search.out);
  const double step = json["candidates"][0]["step_time_s"].get<double>();
  const double mem = json["candidates"][0]["memory_gib"]["total"].get<double>();

  const std::string html = ReadFile(file);
  std::smatch m;
  const std::regex best(
      "class=\"frontier best\" data-kind=\"frontier\" "
      "data-step-time-s=\"([0-9.e+-]+)\" data-memory-gib=\"([0-9.e+-]+)\" "
      "data-rank=\"1\"");
  ASSERT_TRUE(std::regex_search(html, m, best));
  EXPECT_NEAR(std::stod(m[1]), step, 1e-5 * step);
  EXPECT_NEAR(std::stod(m[2]), mem, 1e-5 * mem);
  const std::regex compute(
      "data-rank=\"1\" data-term=\"compute\" data-value=\"([0-9.e+-]+)\"");
  ASSERT_TRUE(std::regex_search(html, m, compute));
  const double json_compute =
      json["candidates"][0]["time_s"]["compute"].get<double>();
  EXPECT_NEAR(std::stod(m[1]), json_compute, 1e-5 * json_compute);
  EXPECT_NE(html.find("tune report --html " + file +
                      " --scale-gpus 64,32 --model gpt3-13b"),
            std::string::npos);
  // The scaling section's 64-GPU point is the same search's best.
  EXPECT_EQ(Count(Chart(html, "scale"), "data-kind=\"scale\""), 2u);
  const std::regex scale_64(
      "data-gpus=\"64\" data-tokens-per-s-per-gpu=\"[0-9.e+-]+\" "
      "data-scaling-efficiency=\"[0-9.e+-]+\" "
      "data-step-time-s=\"([0-9.e+-]+)\"");
  ASSERT_TRUE(std::regex_search(html, m, scale_64));
  EXPECT_NEAR(std::stod(m[1]), step, 1e-5 * step);
}

TEST(ReportCommandTest, ReportsARecordedSearchById) {
  const std::string dir = MakeTempDir();
  const std::string db = dir + "/t.db";
  const TuneRun search =
      RunTuneInProcess(std::string("search ") + kSearch + " --db " + db);
  ASSERT_EQ(search.exit_code, 0) << search.err;
  const TuneRun report = RunTuneInProcess("report --html " + dir +
                                          "/r.html --search 1 --db " + db);
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_EQ(report.err.find("warning"), std::string::npos) << report.err;
  const std::string html = ReadFile(dir + "/r.html");
  EXPECT_NE(html.find("from search 1 in " + db), std::string::npos);
  EXPECT_NE(html.find("# search 1 ran: tune search --model gpt3-13b"),
            std::string::npos);
  EXPECT_NE(html.find("tune validate --search 1"), std::string::npos);
}

TEST(ReportCommandTest, BadInputIsOneLineWithAHintAndExitCode2) {
  const std::string dir = MakeTempDir();
  const std::string db = dir + "/t.db";
  ASSERT_EQ(RunTuneInProcess(std::string("search ") + kSearch + " --db " + db)
                .exit_code,
            0);
  struct Case {
    std::string args;
    std::string err;
  };
  const std::vector<Case> cases = {
      {"report --html " + dir + "/r.html --search 9 --db " + db,
       "tune: error: --search: no search 9 in " + db +
           "\ntune: hint: list the recorded searches with 'tune db "
           "searches --db " +
           db + "'\n"},
      {"report --html " + dir + "/no/such/dir/r.html " + kSearch,
       "tune: error: --html: cannot write '" + dir +
           "/no/such/dir/r.html': directory '" + dir +
           "/no/such/dir': No such file or directory\ntune: hint: create the "
           "directory first, or write somewhere else\n"},
      {"report " + std::string(kSearch),
       "tune: error: tune report needs --html FILE\ntune: hint: e.g. tune "
       "report --html report.html --model 175b --gpus 1024\n"},
      {"report --html " + dir + "/r.html",
       "tune: error: no search to report\ntune: hint: pass --search ID (see "
       "'tune db searches') or search flags such as --model 175b --gpus "
       "1024\n"},
      {"report --html " + dir + "/r.html --search 1 --model 175b",
       "tune: error: --search and --model/--gpus both choose the search to "
       "report\ntune: hint: pass --search ID alone, or the search flags "
       "without --search\n"},
      {"report --html " + dir + "/r.html --search x --db " + db,
       "tune: error: --search must be a positive integer, got 'x'\n"},
  };
  for (const Case& c : cases) {
    const TuneRun run = RunTuneInProcess(c.args);
    EXPECT_EQ(run.exit_code, 2) << c.args;
    if (c.err.find("positive integer") != std::string::npos) {
      EXPECT_EQ(run.err.rfind(c.err, 0), 0u) << run.err;
    } else {
      EXPECT_EQ(run.err, c.err) << c.args;
    }
    EXPECT_TRUE(run.out.empty());
  }
  // A failed report leaves no file behind.
  EXPECT_TRUE(ReadFile(dir + "/r.html").empty());
}

}  // namespace
}  // namespace meshtune::tuner
