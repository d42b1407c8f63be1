// `tune explain`: the best plan of a search beside a configuration the user
// knows (the model's published recipe, ModelSpec::recipe_config, or any
// --config): where that configuration ranks, every time and memory term of
// both and the difference (tuner/render/compare_report.h), the terms that
// make the difference, and the assumptions the best plan relies on
// (overlaps, flash attention, how close it is to the memory limit). Text,
// JSON and an HTML section of `tune report`. docs/explain.md describes it.
#ifndef MESHTUNE_TUNER_RENDER_EXPLAIN_REPORT_H_
#define MESHTUNE_TUNER_RENDER_EXPLAIN_REPORT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/estimate.h"
#include "search_spaces/parallel_config.h"
#include "tuner/inputs/inputs.h"
#include "tuner/search/search_driver.h"

namespace meshtune::tuner {

struct PlanExplanation {
  costmodel::Estimate best;
  // What is compared: "NVIDIA's recipe" or "--config", and where it comes
  // from (the recipe's source, or the text as given).
  std::string other_label;
  std::string other_source;
  // The compared configuration's estimate; empty when it does not apply to
  // this search (not_applicable says why: a size that does not divide the
  // GPUs, a rule of search_spaces/space).
  std::optional<costmodel::Estimate> other;
  std::string not_applicable;
  // 1-based rank among the search's fitting configurations (its own place
  // when the search has it, else where its step time falls); 0 when it
  // does not fit or does not apply.
  int64_t other_rank = 0;
  int64_t feasible = 0;
  // A recipe published at another batch or sequence length is compared at
  // the search's; this says so ("" when they agree).
  std::string batch_note;
  // Assumptions of the best plan, one sentence each (PlanAssumptions).
  std::vector<std::string> assumptions;
};

// The explanation of `result` (REQUIRES: result.feasible > 0) against
// `other_text` (a configuration string, tuner/inputs/compare_config.h).
// `recipe_gbs`/`recipe_seq` (0 = unknown) fill batch_note.
PlanExplanation ExplainPlan(const Inputs& in, const SearchResult& result,
                            const costmodel::Calibration& calibration,
                            const std::string& other_text,
                            const std::string& other_label,
                            const std::string& other_source, int64_t recipe_gbs,
                            int64_t recipe_seq);

// What the best plan's estimate relies on, from its own terms: memory use
// against the usable HBM, the data-parallel overlaps, the attention kernel
// of the calibration, tensor-parallel overlap, the pipeline bubble.
std::vector<std::string> PlanAssumptions(const Inputs& in,
                                         const costmodel::Estimate& best,
                                         bool flash_attention);

void PrintExplanation(std::ostream& out, const Inputs& in,
                      const PlanExplanation& e);

// {"best": {...}, "other": {...} | null, "other_label", "other_source",
//  "not_applicable", "other_rank", "feasible", "batch_note",
//  "assumptions": [...], "comparison": CompareToJson | null,
//  "explanation": ExplainDifference | ""}.
nlohmann::json ExplanationToJson(const Inputs& in, const PlanExplanation& e);

// <section id="explain"> for the HTML report: the two configurations, their
// ranks, a term table with differences and the assumptions.
std::string ExplanationHtml(const Inputs& in, const PlanExplanation& e);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_RENDER_EXPLAIN_REPORT_H_
