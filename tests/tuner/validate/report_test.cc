// What `tune validate` prints: the candidate table lines up with its header
// whatever the configurations, reasons and numbers are.
#include "tuner/validate/report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "search_spaces/parallel_config.h"

namespace meshtune::tuner {
namespace {

ValidatedCandidate Candidate(size_t index, const std::string& reason,
                             const search_spaces::ParallelConfig& config,
                             double predicted_s, std::vector<double> runs_s) {
  ValidatedCandidate c;
  c.pick.index = index;
  c.pick.reason = reason;
  c.estimate.config = config;
  c.estimate.step_time_s = predicted_s;
  c.runs_s = std::move(runs_s);
  return c;
}

// The table's lines: from the header to the "measured N of M" line.
std::vector<std::string> TableLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  bool in_table = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("measured ", 0) == 0) break;
    if (line.find("rank") == 0) in_table = true;
    if (in_table) lines.push_back(line);
  }
  return lines;
}

TEST(ValidationTable, ColumnsFitTheirContent) {
  // A long configuration (vpp, full:block recompute, distributed
  // optimizer), a long reason, a four-digit rank and a slow step: each used
  // to push the columns after it out of line with the header.
  search_spaces::ParallelConfig wide;
  wide.tp = 8;
  wide.pp = 16;
  wide.vpp = 12;
  wide.dp = 1024;
  wide.sp = true;
  wide.mbs = 16;
  wide.recompute.granularity = search_spaces::RecomputeGranularity::kFull;
  wide.recompute.method = search_spaces::RecomputeMethod::kBlock;
  wide.recompute.num_layers = 12;
  wide.dist_opt = true;
  ValidationResult v;
  v.validation_id = 1;
  v.search_id = 2;
  v.calibration = "datasheet";
  v.candidates = {
      Candidate(0, "top 1", search_spaces::ParallelConfig(), 0.5, {0.6, 0.7}),
      Candidate(1234, "other tp/pp split, the widest reason", wide, 12345.678,
                {23456.789}),
      Candidate(2, "top 3", search_spaces::ParallelConfig(), 0.4, {})};
  v.candidates[2].error = "exit status 1";
  ValidationRequest request;
  request.steps = 8;
  request.repeats = 2;
  std::ostringstream out;
  PrintValidationTable(out, request, v, "");
  const std::vector<std::string> lines = TableLines(out.str());
  ASSERT_EQ(lines.size(), 4u) << out.str();
  const std::string& header = lines[0];
  // Left-aligned columns start where their header does, right-aligned ones
  // end where it does.
  const size_t config_at = header.find("config");
  const size_t why_at = header.find("why");
  const size_t pred_end = header.find("pred_s") + 6;
  const size_t err_end = header.find("err%") + 4;
  const size_t status_at = header.find("status");
  const std::string configs[] = {
      "tp1 pp1", search_spaces::ToString(wide).substr(0, 7), "tp1 pp1"};
  const std::string reasons[] = {"top 1", "other tp/pp split", "top 3"};
  const std::string predicted[] = {"0.500", "12345.678", "0.400"};
  const std::string errors[] = {"-23.1", "-47.4", "-"};
  const std::string status[] = {"ok", "ok", "failed: exit status 1"};
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    SCOPED_TRACE(line);
    EXPECT_EQ(line.substr(config_at, 7), configs[i - 1]);
    EXPECT_EQ(line.substr(why_at, reasons[i - 1].size()), reasons[i - 1]);
    const std::string& p = predicted[i - 1];
    ASSERT_GE(line.size(), pred_end);
    EXPECT_EQ(line.substr(pred_end - p.size(), p.size()), p);
    EXPECT_EQ(line[pred_end], ' ');
    const std::string& e = errors[i - 1];
    EXPECT_EQ(line.substr(err_end - e.size(), e.size()), e);
    EXPECT_EQ(line.substr(status_at, status[i - 1].size()), status[i - 1]);
    EXPECT_EQ(line.substr(status_at - 2, 2), "  ");
  }
  // No column is wider than its widest cell: the narrow table stays narrow.
  v.candidates.erase(v.candidates.begin() + 1);
  std::ostringstream narrow;
  PrintValidationTable(narrow, request, v, "");
  EXPECT_EQ(TableLines(narrow.str())[0],
            "rank  config                              why    pred_s  meas_s  "
            "spread%   err%  status")
      << narrow.str();
}

// Two top candidates and three of --spread 3 (one failed): predicted 0.55,
// 1.0 and 2.0 s for the spread, 0.5 to 2.0 s over the four measured.
ValidationResult SpreadResult() {
  ValidationResult v;
  v.validation_id = 3;
  v.search_id = 4;
  v.calibration = "datasheet";
  const search_spaces::ParallelConfig c;
  v.candidates = {Candidate(0, "top 1", c, 0.5, {0.6}),
                  Candidate(1, "top 2", c, 0.52, {0.62}),
                  Candidate(7, "spread q=0", c, 0.55, {0.7}),
                  Candidate(20, "spread q=0.5", c, 1.0, {}),
                  Candidate(41, "spread q=1", c, 2.0, {2.5})};
  v.candidates[3].error = "exit status 1";
  for (size_t i = 2; i < 5; ++i) v.candidates[i].pick.from_spread = true;
  return v;
}

TEST(ValidationTable, SpreadLinesGiveTheRangesTheyCover) {
  ValidationRequest request;
  request.steps = 8;
  request.repeats = 1;
  request.spread = 3;
  const ValidationResult v = SpreadResult();
  std::ostringstream out;
  PrintValidationTable(out, request, v, "");
  // 2.0/0.55 = 3.636; 2.0/0.5 = 4; the failed 1.0 s one is not measured.
  EXPECT_NE(out.str().find(
                "\nspread: 3 candidates across the predicted range, 0.550 to "
                "2.000 s/step (max/min 3.64x)\n"
                "the statistics above are over all 4 measured candidates, "
                "spread ones included: predicted 0.500 to 2.000 s/step "
                "(max/min 4.00x)\n"),
            std::string::npos)
      << out.str();
  // Fewer than asked: the trainable candidates ran out.
  request.spread = 5;
  std::ostringstream fewer;
  PrintValidationTable(fewer, request, v, "");
  EXPECT_NE(fewer.str().find("\nspread: 3 candidates (of --spread 5: every "
                             "other trainable candidate is already chosen) "
                             "across the predicted range, 0.550 to 2.000 "
                             "s/step (max/min 3.64x)\n"),
            std::string::npos)
      << fewer.str();
  // None at all.
  ValidationResult top_only = v;
  top_only.candidates.resize(2);
  request.spread = 2;
  std::ostringstream none;
  PrintValidationTable(none, request, top_only, "");
  EXPECT_NE(none.str().find("\nspread: no candidate added (of --spread 2: "
                            "every trainable candidate is already chosen)\n"
                            "the statistics above are over all 2 measured "
                            "candidates, spread ones included: predicted "
                            "0.500 to 0.520 s/step (max/min 1.04x)\n"),
            std::string::npos)
      << none.str();
  // --spread 0: the output of before, without either line.
  request.spread = 0;
  std::ostringstream off;
  PrintValidationTable(off, request, top_only, "");
  EXPECT_EQ(off.str().find("\nspread: "), std::string::npos) << off.str();
  EXPECT_EQ(off.str().find("the statistics above"), std::string::npos);
}

TEST(ValidationJson, SpreadMarksItsCandidatesAndRanges) {
  ValidationRequest request;
  request.steps = 8;
  request.repeats = 1;
  request.spread = 3;
  const ValidationResult v = SpreadResult();
  std::ostringstream out;
  PrintValidationJson(out, request, v);
  const auto j = nlohmann::json::parse(out.str());
  ASSERT_EQ(j["candidates"].size(), 5u);
  const bool from_spread[] = {false, false, true, true, true};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(j["candidates"][i]["from_spread"], from_spread[i]) << i;
  }
  EXPECT_EQ(j["candidates"][4]["reason"], "spread q=1");
  const nlohmann::json& s = j["spread"];
  EXPECT_EQ(s["requested"], 3);
  EXPECT_EQ(s["chosen"], 3);
  EXPECT_DOUBLE_EQ(s["predicted_range"]["min_s"].get<double>(), 0.55);
  EXPECT_DOUBLE_EQ(s["predicted_range"]["max_s"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(s["predicted_range"]["ratio"].get<double>(), 2.0 / 0.55);
  EXPECT_EQ(s["measured_candidates"], 4);
  EXPECT_DOUBLE_EQ(s["measured_predicted_range"]["min_s"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(s["measured_predicted_range"]["max_s"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(s["measured_predicted_range"]["ratio"].get<double>(), 4.0);

  // --spread 0: the keys of before, none added.
  request.spread = 0;
  std::ostringstream off;
  PrintValidationJson(off, request, v);
  const auto k = nlohmann::json::parse(off.str());
  EXPECT_FALSE(k.contains("spread"));
  for (const auto& c : k["candidates"]) EXPECT_FALSE(c.contains("from_spread"));
}

}  // namespace
}  // namespace meshtune::tuner
