#include "tuner/validate/serving.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>

#include "costmodel/serving_model.h"
#include "search_spaces/serving_spec.h"
#include "tuner/generate/generation.h"
#include "tuner/io/text_format.h"

namespace meshtune::tuner {
namespace {

using search_spaces::ServingConfig;

Status CheckRequest(const ServeValidationRequest& r) {
  if (r.isl < 1 || r.osl < 1 || r.repeats < 1 || r.batches.empty() ||
      *std::min_element(r.batches.begin(), r.batches.end()) < 1) {
    return Status::InvalidArgument(
        "serving validation needs --isl and --osl of 1 or more, --repeats "
        "of 1 or more and batches of 1 or more",
        "e.g. tune serve --model llama-tiny --gpus 2 --gpu local --isl 128 "
        "--osl 16 --validate");
  }
  search_spaces::ServingWorkload w{r.isl, r.osl, 0};
  w.prefix = r.prefix;
  return search_spaces::ValidateServingWorkload(w);
}

// Tensor-parallel sizes the engine can run the model at, up to gpus.
std::vector<int64_t> TpSizes(const ServeValidationRequest& r) {
  std::vector<int64_t> sizes;
  const auto& m = r.model;
  for (int64_t tp = 1; tp <= r.gpus; ++tp) {
    if (r.gpus % tp == 0 && m.num_attention_heads % tp == 0 &&
        m.num_query_groups % tp == 0 && m.ffn_hidden_size % tp == 0) {
      sizes.push_back(tp);
    }
  }
  return sizes;
}

// The cost model's TTFT and TPOT of the engine's static batch (serving.h).
void Predict(const ServeValidationRequest& r, ServePlanOutcome* p) {
  ServingConfig c;
  c.tp = p->tp;
  const int64_t b = p->batch;
  p->predicted_ttft_s = costmodel::PromptsPrefillTime_s(
      r.model, r.cluster, c, r.isl, r.prefix, b, *r.calibration);
  const costmodel::DecodeBreakdown step = costmodel::DecodeStep(
      r.model, r.cluster, c, b, r.isl + r.osl / 2, *r.calibration);
  p->predicted_tpot_s = step.total_s() - step.overhead_s;
}

GenerationRequest Generation(const ServeValidationRequest& r,
                             const ServePlanOutcome& p) {
  GenerationRequest g;
  g.config.model = r.model;
  g.tp = static_cast<int>(p.tp);
  g.threads_per_rank = 1;  // the local preset: one core per rank
  g.backend = r.backend;
  g.max_new_tokens = r.osl;
  g.cached_prefix = r.prefix;
  const int64_t vocab = std::min<int64_t>(r.model.vocab_size, 256);
  for (int64_t bi = 0; bi < p.batch; ++bi) {
    std::vector<int32_t> prompt(r.isl);
    for (int64_t ti = 0; ti < r.isl; ++ti) {
      prompt[ti] = static_cast<int32_t>((7 * ti + 31 * bi + 3) % vocab);
    }
    g.prompts.push_back(std::move(prompt));
  }
  return g;
}

// AnalyzeOutcomes over the plans that ran, in predicted order of `metric`.
ValidationStats Analyze(const std::vector<ServePlanOutcome>& plans, bool ttft) {
  std::vector<CandidateOutcome> outcomes;
  for (const ServePlanOutcome& p : plans) {
    CandidateOutcome o;
    o.predicted_step_s = ttft ? p.predicted_ttft_s : p.predicted_tpot_s;
    o.measured_step_s = ttft ? p.measured_ttft_s : p.measured_tpot_s;
    o.spread_pct = ttft ? p.ttft_spread_pct : p.tpot_spread_pct;
    if (o.measured_step_s) outcomes.push_back(o);
  }
  std::stable_sort(outcomes.begin(), outcomes.end(),
                   [](const CandidateOutcome& a, const CandidateOutcome& b) {
                     return a.predicted_step_s < b.predicted_step_s;
                   });
  return AnalyzeOutcomes(outcomes);
}

double Ratio(const std::vector<ServePlanOutcome>& plans, bool ttft) {
  std::vector<double> v;
  for (const ServePlanOutcome& p : plans) {
    v.push_back(ttft ? p.predicted_ttft_s : p.predicted_tpot_s);
  }
  auto range = RangeOf(v);
  return range ? range->ratio() : 0.0;
}

std::string Ms(std::optional<double> s, int digits) {
  return s ? Fixed(*s * 1e3, digits) : "-";
}

std::string Stat(const std::optional<double>& v, int digits) {
  return v && std::isfinite(*v) ? Fixed(*v, digits) : "-";
}

nlohmann::json StatsJson(const ValidationStats& s, double ratio) {
  nlohmann::json j;
  j["measured"] = s.measured;
  j["spearman"] = s.spearman && std::isfinite(*s.spearman)
                      ? nlohmann::json(*s.spearman)
                      : nlohmann::json();
  j["mape_pct"] = s.mape_pct ? nlohmann::json(*s.mape_pct) : nlohmann::json();
  j["noise_pct"] =
      s.noise_pct ? nlohmann::json(*s.noise_pct) : nlohmann::json();
  j["separated_pairs"] = s.separated_pairs;
  j["separated_pairs_in_order"] = s.separated_pairs_in_order;
  j["predicted_ratio"] = ratio;
  return j;
}

}  // namespace

StatusOr<ServeValidation> ValidateServing(const ServeValidationRequest& r,
                                          std::ostream& progress) {
  MESHTUNE_RETURN_IF_ERROR(CheckRequest(r));
  const std::vector<int64_t> tps = TpSizes(r);
  if (tps.empty()) {
    return Status::InvalidArgument(
        "no tensor-parallel size up to --gpus " + std::to_string(r.gpus) +
            " divides model " + r.model.name + "'s heads and FFN",
        "pass --gpus 1 or a multiple of a size that divides them");
  }
  ServeValidation v;
  for (int64_t tp : tps) {
    for (int64_t b : r.batches) {
      ServePlanOutcome p;
      p.tp = tp;
      p.batch = b;
      Predict(r, &p);
      v.plans.push_back(p);
    }
  }
  // Warm-up (and the check that each plan runs), then interleaved rounds.
  std::vector<std::vector<double>> ttft(v.plans.size()), tpot(v.plans.size());
  for (size_t i = 0; i < v.plans.size(); ++i) {
    auto warm = RunGeneration(Generation(r, v.plans[i]));
    if (warm.ok()) continue;
    // The first plan (tp 1, the smallest batch) meets every check the
    // others share (positions, model features): its error is the command's.
    if (i == 0) return warm.status();
    v.plans[i].error = warm.status().message();
  }
  for (int64_t round = 0; round < r.repeats; ++round) {
    for (size_t i : RoundOrder(v.plans.size(), round)) {
      ServePlanOutcome& p = v.plans[i];
      if (!p.error.empty()) continue;
      auto run = RunGeneration(Generation(r, p));
      if (!run.ok()) {
        p.error = run.status().message();
        continue;
      }
      ttft[i].push_back(run->ttft_s.front());
      tpot[i].push_back(run->tpot_s.front());
      progress << "tune: round " << round + 1 << "/" << r.repeats << " tp"
               << p.tp << " batch " << p.batch << ": TTFT "
               << Fixed(ttft[i].back() * 1e3, 2) << " ms, TPOT "
               << Fixed(tpot[i].back() * 1e3, 3) << " ms\n";
    }
  }
  for (size_t i = 0; i < v.plans.size(); ++i) {
    ServePlanOutcome& p = v.plans[i];
    if (!p.error.empty() || ttft[i].empty()) continue;
    const RepeatedRuns t = SummarizeRuns(ttft[i]);
    p.measured_ttft_s = t.median_s;
    // One token: no decode step; the plan has no TPOT.
    if (r.osl > 1) {
      const RepeatedRuns d = SummarizeRuns(tpot[i]);
      p.measured_tpot_s = d.median_s;
      if (tpot[i].size() > 1) p.tpot_spread_pct = d.spread_pct;
    }
    if (ttft[i].size() > 1) p.ttft_spread_pct = t.spread_pct;
  }
  v.ttft = Analyze(v.plans, /*ttft=*/true);
  v.tpot = Analyze(v.plans, /*ttft=*/false);
  v.predicted_ttft_ratio = Ratio(v.plans, true);
  v.predicted_tpot_ratio = Ratio(v.plans, false);
  return v;
}

void PrintServeValidation(std::ostream& out, const ServeValidationRequest& r,
                          const ServeValidation& v) {
  out << "Serving plans of " << r.model.name << " run on this machine's "
      << (r.backend == "cuda" ? "GPUs (" + r.cluster.name + ")" : "CPU engine")
      << " (ISL " << r.isl
      << (r.prefix > 0 ? " with " + std::to_string(r.prefix) + " cached" : "")
      << ", OSL " << r.osl << ", " << r.repeats
      << (r.repeats == 1 ? " round" : " rounds") << ", medians):\n\n";
  out << Fmt("  %-4s %6s  %13s %13s %7s  %13s %13s %7s\n", "tp", "batch",
             "TTFT pred ms", "measured ms", "noise", "TPOT pred ms",
             "measured ms", "noise");
  for (const ServePlanOutcome& p : v.plans) {
    out << Fmt(
        "  %-4lld %6lld  %13s %13s %7s  %13s %13s %7s",
        static_cast<long long>(p.tp), static_cast<long long>(p.batch),
        Ms(p.predicted_ttft_s, 2).c_str(), Ms(p.measured_ttft_s, 2).c_str(),
        (Stat(p.ttft_spread_pct, 0) + "%").c_str(),
        Ms(p.predicted_tpot_s, 3).c_str(), Ms(p.measured_tpot_s, 3).c_str(),
        (Stat(p.tpot_spread_pct, 0) + "%").c_str());
    if (!p.error.empty()) out << "  failed: " << p.error;
    out << "\n";
  }
  auto line = [&](const char* what, const ValidationStats& s, double ratio) {
    out << "  " << what << ": Spearman " << Stat(s.spearman, 2) << " over "
        << s.measured << " plans predicted " << Fixed(ratio, 1)
        << "x apart; MAPE " << Stat(s.mape_pct, 1) << " %; noise "
        << Stat(s.noise_pct, 0) << " %; " << s.separated_pairs_in_order
        << " of " << s.separated_pairs
        << " pairs apart by more than the noise in predicted order\n";
  };
  out << "\n";
  line("TTFT", v.ttft, v.predicted_ttft_ratio);
  line("TPOT", v.tpot, v.predicted_tpot_ratio);
  out << "\nPredicted: the serving cost model on the "
      << (r.backend == "cuda" ? r.cluster.name : "local")
      << " preset for the engine's static batch (docs/serving.md §8)"
      << (r.backend == "cuda"
              ? ".\n"
              : "; the engine runs fp32, the model prices 16-bit weights, so "
                "the ranking is the check.\n");
}

nlohmann::json ServeValidationJson(const ServeValidationRequest& r,
                                   const ServeValidation& v) {
  nlohmann::json j;
  j["model"] = r.model.name;
  j["backend"] = r.backend;
  j["preset"] = r.cluster.name;
  j["isl"] = r.isl;
  j["prefix"] = r.prefix;
  j["osl"] = r.osl;
  j["repeats"] = r.repeats;
  j["plans"] = nlohmann::json::array();
  auto opt = [](const std::optional<double>& x, double scale) {
    return x ? nlohmann::json(*x * scale) : nlohmann::json();
  };
  for (const ServePlanOutcome& p : v.plans) {
    nlohmann::json e;
    e["tp"] = p.tp;
    e["batch"] = p.batch;
    e["predicted_ttft_ms"] = p.predicted_ttft_s * 1e3;
    e["predicted_tpot_ms"] = p.predicted_tpot_s * 1e3;
    e["measured_ttft_ms"] = opt(p.measured_ttft_s, 1e3);
    e["measured_tpot_ms"] = opt(p.measured_tpot_s, 1e3);
    e["ttft_spread_pct"] = opt(p.ttft_spread_pct, 1);
    e["tpot_spread_pct"] = opt(p.tpot_spread_pct, 1);
    if (!p.error.empty()) e["error"] = p.error;
    j["plans"].push_back(e);
  }
  j["ttft"] = StatsJson(v.ttft, v.predicted_ttft_ratio);
  j["tpot"] = StatsJson(v.tpot, v.predicted_tpot_ratio);
  return j;
}

}  // namespace meshtune::tuner
