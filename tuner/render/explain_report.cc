#include "tuner/render/explain_report.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "costmodel/cost_model.h"
#include "search_spaces/space/enumerate.h"
#include "tuner/inputs/compare_config.h"
#include "tuner/io/text_format.h"
#include "tuner/render/compare_report.h"
#include "tuner/render/svg_chart.h"

namespace meshtune::tuner {
namespace {

using costmodel::Estimate;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Where `other` falls among the fitting candidates: its own place when the
// search ranked the same configuration, else one after every candidate
// with a shorter step.
int64_t RankOf(const SearchResult& result, const Estimate& other) {
  for (size_t i = 0; i < result.ranked.size(); ++i) {
    if (result.ranked[i].config == other.config) {
      return static_cast<int64_t>(i) + 1;
    }
  }
  int64_t faster = 0;
  for (const Estimate& e : result.ranked) {
    if (e.step_time_s < other.step_time_s) ++faster;
  }
  return faster + 1;
}

std::string BatchNote(const Inputs& in, int64_t gbs, int64_t seq) {
  const bool other_gbs = gbs > 0 && gbs != in.training.global_batch_size;
  const bool other_seq = seq > 0 && seq != in.training.seq_length;
  if (!other_gbs && !other_seq) return "";
  std::string published;
  if (other_gbs) published += "global batch " + std::to_string(gbs);
  if (other_seq) {
    published +=
        std::string(other_gbs ? ", " : "") + "sequence " + std::to_string(seq);
  }
  return "published at " + published + "; compared at this search's global " +
         "batch " + std::to_string(in.training.global_batch_size) +
         ", sequence " + std::to_string(in.training.seq_length) +
         " (give --gbs " +
         std::to_string(other_gbs ? gbs : in.training.global_batch_size) +
         " --seq-len " +
         std::to_string(other_seq ? seq : in.training.seq_length) +
         " to compare at the recipe's)";
}

// "rank 412 of 17540 fitting, 14.6 % slower", "does not fit: ...".
std::string Standing(const PlanExplanation& e) {
  if (!e.other) return "does not apply: " + e.not_applicable;
  if (!e.other->fits) {
    return "does not fit: " + e.other->infeasible_reason + " (needs " +
           Fixed(e.other->memory.total_bytes() / kGiB, 1) + " of " +
           Fixed(e.other->memory_capacity_bytes / kGiB, 1) + " GiB)";
  }
  const double slower = e.other->step_time_s / e.best.step_time_s - 1;
  std::string s = "rank " + std::to_string(e.other_rank) + " of " +
                  std::to_string(e.feasible) + " fitting";
  if (std::fabs(slower) < 5e-4) return s + ", the same step time";
  return s + ", " + Fixed(100 * std::fabs(slower), 1) + " % " +
         (slower > 0 ? "slower" : "faster") + " (" +
         Fixed(e.other->step_time_s, 2) + " s vs " +
         Fixed(e.best.step_time_s, 2) + " s per step)";
}

}  // namespace

std::vector<std::string> PlanAssumptions(const Inputs& in, const Estimate& best,
                                         bool flash_attention) {
  std::vector<std::string> a;
  const double used = best.memory.total_bytes() / kGiB;
  const double usable = best.memory_capacity_bytes / kGiB;
  const double share = usable > 0 ? used / usable : 0;
  std::string memory = "memory: " + Fixed(used, 1) + " of " + Fixed(usable, 1) +
                       " GiB usable per GPU (" + Fixed(100 * share, 1) +
                       " %), " + Fixed(usable - used, 1) + " GiB headroom";
  if (share > 0.95) {
    memory +=
        "; allocator fragmentation varies from run to run, so "
        "--memory-headroom "
        "2GiB searches with room to spare";
  }
  a.push_back(memory);
  const auto& c = best.config;
  if (c.dp > 1) {
    a.push_back(std::string("data-parallel overlap: the gradient ") +
                (c.dist_opt ? "reduce-scatter" : "all-reduce") +
                " runs behind backward (--overlap-grad-reduce)" +
                (c.dist_opt ? " and the parameter all-gather behind forward "
                              "(--overlap-param-gather)"
                            : "") +
                "; " + Fixed(best.time.dp_comm_s, 2) + " s stays exposed");
  }
  a.push_back(
      flash_attention
          ? "flash attention (--attention-backend flash, or fused for MLA): "
            "no score matrix in activation memory; calibration " +
                best.calibration
          : "no fused attention kernel (--attention-backend unfused): the "
            "score matrix is kept for backward; calibration " +
                best.calibration);
  if (c.tp > 1) {
    a.push_back(std::string("tensor-parallel communication ") +
                (in.training.tp_comm_overlap && c.sp
                     ? "overlapped with the GEMMs (--tp-comm-overlap)"
                     : "not overlapped (no --tp-comm-overlap)") +
                ": " + Fixed(best.time.tp_comm_s, 2) + " s exposed");
  }
  if (c.pp > 1) {
    a.push_back("pipeline: " +
                std::string(c.vpp > 1 ? "interleaved 1F1B with vpp " +
                                            std::to_string(c.vpp)
                                      : "1F1B") +
                ", bubble " + Fixed(best.time.pp_bubble_s, 2) + " s (" +
                Fixed(100 * best.time.pp_bubble_s / best.step_time_s, 1) +
                " % of the step)");
  }
  return a;
}

PlanExplanation ExplainPlan(const Inputs& in, const SearchResult& result,
                            const costmodel::Calibration& calibration,
                            const std::string& other_text,
                            const std::string& other_label,
                            const std::string& other_source, int64_t recipe_gbs,
                            int64_t recipe_seq) {
  PlanExplanation e;
  e.best = result.ranked.front();
  e.other_label = other_label;
  e.other_source = other_source;
  e.feasible = result.feasible;
  e.batch_note = BatchNote(in, recipe_gbs, recipe_seq);
  e.assumptions = PlanAssumptions(in, e.best, calibration.UsesFlashAttention());
  auto config =
      ParseConfigString(other_text, in.training.num_gpus, other_label);
  if (!config.ok()) {
    e.not_applicable = config.status().message();
    return e;
  }
  std::string detail;
  const std::string reason = search_spaces::CheckConfig(
      in.model, in.training, in.cluster, config.value(), &detail);
  if (!reason.empty()) {
    e.not_applicable = (detail.empty() ? reason : detail) + " (" + reason + ")";
    return e;
  }
  e.other = costmodel::EstimateConfig(in.model, in.cluster, in.training,
                                      config.value(), calibration);
  if (e.other->fits) e.other_rank = RankOf(result, *e.other);
  return e;
}

void PrintExplanation(std::ostream& out, const Inputs& in,
                      const PlanExplanation& e) {
  const auto label = [](const std::string& text) {
    return text + std::string(text.size() < 10 ? 10 - text.size() : 1, ' ');
  };
  out << label("best") << FormatCompactConfig(e.best.config) << ": rank 1 of "
      << e.feasible << " fitting, " << Fixed(e.best.step_time_s, 2)
      << " s per step\n";
  out << label(e.other_label)
      << (e.other ? FormatCompactConfig(e.other->config) + ": " : "")
      << Standing(e) << "\n";
  if (!e.other_source.empty()) {
    out << label("") << "source: " << e.other_source << "\n";
  }
  if (!e.batch_note.empty()) out << label("") << e.batch_note << "\n";
  if (e.other) {
    out << "\n";
    PrintCompareTable(out, in, {e.best, *e.other});
    out << "\n";
  } else {
    out << "\n";
  }
  out << "The best plan assumes:\n";
  for (const std::string& a : e.assumptions) out << "  - " << a << "\n";
}

nlohmann::json ExplanationToJson(const Inputs& in, const PlanExplanation& e) {
  nlohmann::json j;
  j["best"] = FormatCompactConfig(e.best.config);
  j["other"] = e.other ? nlohmann::json(FormatCompactConfig(e.other->config))
                       : nlohmann::json(nullptr);
  j["other_label"] = e.other_label;
  j["other_source"] = e.other_source;
  j["not_applicable"] = e.not_applicable;
  j["other_rank"] = e.other_rank;
  j["feasible"] = e.feasible;
  j["batch_note"] = e.batch_note;
  j["assumptions"] = e.assumptions;
  if (e.other) {
    j["comparison"] = CompareToJson(in, {e.best, *e.other});
    j["explanation"] = ExplainDifference(e.best, *e.other);
  } else {
    j["comparison"] = nullptr;
    j["explanation"] = "";
  }
  return j;
}

std::string ExplanationHtml(const Inputs& in, const PlanExplanation& e) {
  std::ostringstream h;
  h << "<section id=\"explain\">\n<h2>Why this plan rather than "
    << (e.other_label == "recipe" ? "the published recipe"
                                  : "the given configuration")
    << "</h2>\n";
  h << "<p>Best: <code>" << HtmlEscape(FormatCompactConfig(e.best.config))
    << "</code>, rank 1 of " << e.feasible << " fitting, "
    << Fixed(e.best.step_time_s, 2) << " s per step.<br>\n"
    << HtmlEscape(e.other_label) << ": <code>"
    << (e.other ? HtmlEscape(FormatCompactConfig(e.other->config)) : "")
    << "</code>, " << HtmlEscape(Standing(e)) << ".";
  if (!e.other_source.empty()) {
    h << "<br>\n<small>" << HtmlEscape(e.other_source) << "</small>";
  }
  if (!e.batch_note.empty()) {
    h << "<br>\n<small>" << HtmlEscape(e.batch_note) << "</small>";
  }
  h << "</p>\n";
  if (e.other) {
    std::ostringstream table;
    PrintCompareTable(table, in, {e.best, *e.other});
    // pre-wrap: the closing sentence is longer than the page is wide.
    h << "<pre id=\"explain-terms\" style=\"white-space: pre-wrap\">"
      << HtmlEscape(table.str()) << "</pre>\n";
  }
  h << "<p>The best plan assumes:</p>\n<ul id=\"explain-assumptions\">\n";
  for (const std::string& a : e.assumptions) {
    h << "<li>" << HtmlEscape(a) << "</li>\n";
  }
  h << "</ul>\n</section>\n";
  return h.str();
}

}  // namespace meshtune::tuner
