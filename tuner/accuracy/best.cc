#include "tuner/accuracy/best.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>

#include "costmodel/datasheet_calibration.h"
#include "search_spaces/space/search_space.h"
#include "tuner/search/search_driver.h"

namespace meshtune::tuner {

std::string ProblemKey(const AccuracyCase& c) {
  const search_spaces::TrainingSpec& t = c.training;
  std::string key = c.model_key;
  auto add = [&key](const std::string& field) {
    key += std::to_string(field.size()) + ':' + field;
  };
  add(c.cluster.name);
  add(std::to_string(t.num_gpus));
  add(std::to_string(t.global_batch_size));
  add(std::to_string(t.seq_length));
  add(search_spaces::ToString(t.precision));
  // The software flags, in TrainingSpec's order (train_tokens only sets
  // days_to_train, which no ranking reads), and what the row's notes set
  // beyond its model cells (forced balancing; tuner/accuracy/rules.h).
  std::string flags;
  for (bool flag :
       {t.grad_reduce_in_bf16, t.fp8_param_gather, t.tp_comm_overlap,
        t.moe_ep_overlap, t.overlap_grad_reduce, t.overlap_param_gather,
        t.cross_entropy_loss_fusion, t.cp_comm_a2a, t.moe_shared_expert_overlap,
        t.megatron_fsdp, t.fp8_dot_product_attention,
        c.model.moe_router_force_load_balancing}) {
    flags += flag ? '1' : '0';
  }
  add(flags);
  add(std::to_string(static_cast<int>(t.cross_entropy_fusion_impl)));
  add(std::to_string(t.cpu_offloading_num_layers));
  // The dispatcher a recipe chose (RecipeMoeSoftware) is software too.
  add(std::to_string(static_cast<int>(c.model.moe_token_dispatcher_type)));
  add(c.attention == costmodel::AttentionKernel::kFlash    ? "flash"
      : c.attention == costmodel::AttentionKernel::kFlash2 ? "flash2"
                                                           : "unfused");
  return key;
}

std::string WhyNotSearched(const AccuracyResult& r) {
  if (!r.prediction) return "row not predicted: " + r.row.skipped_reason;
  switch (r.row.kind) {
    case MetricKind::kLayerForward:
    case MetricKind::kLayerBackward:
    case MetricKind::kLayerForwardBackward:
      return "not searched: a per-layer row times one layer of a shortened "
             "model, there is no step time to compare";
    case MetricKind::kAllocatedMemory:
      return "not searched: a memory row compares allocated memory, not a "
             "step time";
    case MetricKind::kStepTime:
    case MetricKind::kUnknown:
      break;
  }
  if (!(r.prediction->predicted_step_s > 0)) {
    return "not searched: the row's predicted step time is not positive";
  }
  return "";
}

TermSaving LargestSaving(const costmodel::TimeBreakdown& row,
                         const costmodel::TimeBreakdown& best) {
  TermSaving largest;
  bool first = true;
  for (const costmodel::TimeTerm& term : costmodel::kTimeTerms) {
    const double saved_s = row.*term.seconds - best.*term.seconds;
    if (first || saved_s > largest.saved_s) {
      largest = {term.name, saved_s};
      first = false;
    }
  }
  return largest;
}

std::string SearchKey(const AccuracyCase& c, double margin_gib) {
  char margin[32];
  std::snprintf(margin, sizeof(margin), "|margin %.3f", margin_gib);
  return ProblemKey(c) + margin;
}

double SearchMarginGib(double row_memory_gib, double usable_gib) {
  const double near = (1 - search_spaces::kNearCapacityFraction) * usable_gib;
  return std::max(0.0, std::min(near, usable_gib - row_memory_gib));
}

BestPlan BestPlanFinder::Find(const AccuracyCase& c, double row_step_s,
                              double margin_gib) {
  const std::string key = SearchKey(c, margin_gib);
  auto it = cache_.find(key);
  BestPlan plan;
  plan.searched = true;
  if (it != cache_.end()) {
    ++cache_hits_;
    plan.cached = true;
  } else {
    ++searches_;
    // The calibration Predict() uses for the row (tuner/accuracy/cases.cc), so
    // that the gain compares two predictions of one cost model.
    const costmodel::DatasheetCalibration calibration(c.cluster, c.attention);
    search_spaces::ClusterSpec cluster = c.cluster;
    cluster.memory_headroom_gib += margin_gib;
    const SearchResult result =
        RunSearch(c.model, cluster, c.training, search_spaces::SearchSpace(),
                  calibration);
    Searched searched;
    if (result.ranked.empty()) {
      searched.reason =
          NoFeasibleConfigStatus(c.model, c.cluster, c.training, result)
              .message();
    } else {
      searched.config = result.ranked.front().config;
      searched.step_s = result.ranked.front().step_time_s;
      searched.time = result.ranked.front().time;
    }
    it = cache_.emplace(key, std::move(searched)).first;
  }
  const Searched& s = it->second;
  if (!s.config) {
    plan.reason = s.reason;
    return plan;
  }
  plan.config = s.config;
  plan.step_s = s.step_s;
  plan.time = s.time;
  plan.gain_pct = 100.0 * (row_step_s - s.step_s) / row_step_s;
  return plan;
}

void AddBestPlans(std::vector<AccuracyResult>* results, BestPlanFinder* finder,
                  const BestPlanProgress& progress) {
  // The margin of each row's search (SearchMarginGib).
  auto margin_of = [](const AccuracyResult& r) {
    return SearchMarginGib(r.prediction->memory_gib,
                           r.prediction->capacity_gib);
  };
  std::set<std::string> problems;
  for (const AccuracyResult& r : *results) {
    if (!WhyNotSearched(r).empty()) continue;
    const double margin = margin_of(r);
    if (!finder->HasSearched(r.row, margin)) {
      problems.insert(SearchKey(r.row, margin));
    }
  }
  const int64_t total = static_cast<int64_t>(problems.size());
  const int64_t searches_before = finder->searches();
  if (progress) progress(0, total);
  for (AccuracyResult& r : *results) {
    const std::string why = WhyNotSearched(r);
    if (!why.empty()) {
      BestPlan plan;
      plan.reason = why;
      r.best = std::move(plan);
      continue;
    }
    const int64_t before = finder->searches();
    r.best = finder->Find(r.row, r.prediction->predicted_step_s, margin_of(r));
    if (progress && finder->searches() != before) {
      progress(finder->searches() - searches_before, total);
    }
  }
}

}  // namespace meshtune::tuner
