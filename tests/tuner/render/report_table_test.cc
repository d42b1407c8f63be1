// The text report's near-capacity mark and footnote, the optional etp and
// layout columns, the parameter count of the header, and the --out YAML's
// near-capacity comment.
#include "tuner/render/report_table.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "costmodel/datasheet_calibration.h"
#include "search_spaces/cluster_spec.h"
#include "tuner/inputs/inputs.h"
#include "tuner/render/model_facts.h"
#include "tuner/render/report_json.h"
#include "tuner/render/report_yaml.h"
#include "tuner/search/search_driver.h"

namespace meshtune::tuner {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

Inputs ResolveOrDie(const std::string& model, const std::string& gpus,
                    const std::string& pp = "") {
  InputFlags f;
  f.model = model;
  f.gpus = gpus;
  f.gpu = "h100";
  f.pp = pp;
  auto in = ResolveInputs(f);
  EXPECT_TRUE(in.ok()) << in.status().message();
  return in.value();
}

TEST(ReportHeader, ParameterCountsBelowOneBillionAreInMillions) {
  const Inputs tiny = ResolveOrDie("gpt-tiny", "1");
  EXPECT_EQ(FormatParameterCount(tiny.model), "4.3 M");
  std::ostringstream out;
  PrintInputsHeader(out, tiny, "datasheet");
  EXPECT_EQ(
      out.str().rfind(
          "model        GPT tiny (gpt-tiny): 4.3 M parameters, 4 layers", 0),
      0u)
      << out.str();
  EXPECT_EQ(FormatParameterCount(ResolveOrDie("gpt3-175b", "8").model),
            "174.6 B");
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// The line that starts with `prefix` (after leading spaces), or "".
std::string LineStartingWith(const std::string& text,
                             const std::string& prefix) {
  for (const std::string& line : Lines(text)) {
    const size_t b = line.find_first_not_of(' ');
    if (b != std::string::npos && line.compare(b, prefix.size(), prefix) == 0) {
      return line;
    }
  }
  return "";
}

// A real estimate whose memory is replaced by `fraction` of its capacity
// (all of it in weights, so the parts still add up).
costmodel::Estimate WithMemoryFraction(costmodel::Estimate e, double fraction) {
  e.memory = costmodel::MemoryBreakdown();
  e.memory.weights_bytes = fraction * e.memory_capacity_bytes;
  return e;
}

class NearCapacityReport : public ::testing::Test {
 protected:
  void SetUp() override {
    in_ = ResolveOrDie("gpt3-1.3b", "8");
    const costmodel::DatasheetCalibration calibration(in_.cluster);
    const SearchResult found =
        RunSearch(in_.model, in_.cluster, in_.training, in_.space, calibration);
    ASSERT_GE(found.ranked.size(), 2u);
    // h100: 79.65 GiB − 3 GiB reserve = 76.65 GiB usable.
    ASSERT_NEAR(found.ranked[0].memory_capacity_bytes / kGiB, 76.65, 1e-9);
    at96_ = WithMemoryFraction(found.ranked[0], 0.96);
    at90_ = WithMemoryFraction(found.ranked[1], 0.90);
    result_.ranked = {at96_, at90_};
    result_.evaluated = result_.feasible = 2;
  }
  Inputs in_;
  costmodel::Estimate at96_, at90_;
  SearchResult result_;
};

TEST_F(NearCapacityReport, TableMarksTheRowAt96PercentOnly) {
  std::ostringstream out;
  PrintSearchReport(out, in_, result_, 2);
  const std::string text = out.str();
  // 0.96 · 76.65 = 73.584 GiB, 0.90 · 76.65 = 68.985 GiB.
  const std::string row1 = LineStartingWith(text, "1 ");
  const std::string row2 = LineStartingWith(text, "2 ");
  ASSERT_FALSE(row1.empty()) << text;
  ASSERT_FALSE(row2.empty()) << text;
  EXPECT_EQ(row1.substr(row1.size() - 9), "   73.58*") << row1;
  EXPECT_EQ(row2.substr(row2.size() - 8), "   68.99") << row2;
  EXPECT_EQ(LineStartingWith(text, "* near capacity"),
            "* near capacity: memory within 5% of the usable 76.65 GiB; "
            "allocator fragmentation varies from run to run, so such a plan "
            "may run out of memory: keep a margin with --memory-headroom "
            "(e.g. 5%)");
  // The best plan's breakdown says it too.
  EXPECT_EQ(LineStartingWith(text, "total"),
            "  total                         73.58 of 76.65 usable (96.0%) -- "
            "near capacity (within 5%): keep a margin with --memory-headroom");
  // A dense model with even layouts: no etp or layout column.
  EXPECT_EQ(LineStartingWith(text, "rank"),
            "rank   tp   pp  vpp   cp   ep     dp   sp  mbs recompute     "
            "dist_opt    step_s  tokens/s/GPU   MFU%  mem_GiB");
}

TEST_F(NearCapacityReport, NoFootnoteWithoutANearCapacityRow) {
  result_.ranked = {at90_};
  result_.evaluated = result_.feasible = 1;
  std::ostringstream out;
  PrintSearchReport(out, in_, result_, 1);
  EXPECT_EQ(out.str().find("near capacity"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find('*'), std::string::npos) << out.str();
}

TEST_F(NearCapacityReport, JsonAndYamlCarryTheFlag) {
  EXPECT_TRUE(EstimateToJson(at96_, in_.training)["near_capacity"].get<bool>());
  EXPECT_FALSE(
      EstimateToJson(at90_, in_.training)["near_capacity"].get<bool>());
  const std::string yaml96 = ConfigToYaml(in_, at96_);
  EXPECT_NE(yaml96.find("\n# near_capacity: true -- 96.0 % of the usable "
                        "memory; allocator fragmentation varies from run to "
                        "run, consider --memory-headroom.\n"),
            std::string::npos)
      << yaml96;
  EXPECT_EQ(ConfigToYaml(in_, at90_).find("near_capacity"), std::string::npos);
}

TEST_F(NearCapacityReport, HeaderStatesTheHeadroom) {
  InputFlags f;
  f.model = "gpt3-1.3b";
  f.gpus = "8";
  f.gpu = "h100";
  f.memory_headroom = "4GiB";
  auto in = ResolveInputs(f);
  ASSERT_TRUE(in.ok()) << in.status().message();
  std::ostringstream out;
  PrintInputsHeader(out, in.value(), "datasheet");
  EXPECT_EQ(LineStartingWith(out.str(), "gpu"),
            "gpu          h100: NVIDIA H100 SXM5 80GB, 80 GB HBM, usable 72.7 "
            "GiB per GPU (4.0 GiB headroom kept free)");
  const std::string yaml = ConfigToYaml(in.value(), at90_);
  EXPECT_NE(yaml.find("\n# Memory headroom: 4.00 GiB per GPU kept free "
                      "(--memory-headroom); usable 72.65 GiB.\n"),
            std::string::npos)
      << yaml;
}

}  // namespace
}  // namespace meshtune::tuner
