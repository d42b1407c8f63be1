#include "tuner/render/compare_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <utility>

#include "tuner/inputs/compare_config.h"
#include "tuner/io/text_format.h"

namespace meshtune::tuner {
namespace {

using costmodel::Estimate;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct Term {
  const char* name;
  std::function<double(const Estimate&)> get;
};

// Every exposed time term (they add up to the step): costmodel::kTimeTerms.
const std::vector<Term>& TimeTerms() {
  static const std::vector<Term> kTerms = [] {
    std::vector<Term> terms;
    for (const costmodel::TimeTerm& term : costmodel::kTimeTerms) {
      const auto seconds = term.seconds;
      terms.push_back({term.name, [seconds](const Estimate& e) {
                         return e.time.*seconds;
                       }});
    }
    return terms;
  }();
  return kTerms;
}

const std::vector<Term>& MemoryTerms() {
  static const std::vector<Term> kTerms = {
      {"weights", [](const Estimate& e) { return e.memory.weights_bytes; }},
      {"gradients", [](const Estimate& e) { return e.memory.gradients_bytes; }},
      {"optimizer", [](const Estimate& e) { return e.memory.optimizer_bytes; }},
      {"activations",
       [](const Estimate& e) { return e.memory.activations_bytes; }},
      {"other", [](const Estimate& e) { return e.memory.rest_bytes(); }},
      {"total", [](const Estimate& e) { return e.memory.total_bytes(); }},
  };
  return kTerms;
}

double Step(const Estimate& e) { return e.time.total_s(); }

}  // namespace

std::string ExplainDifference(const Estimate& base, const Estimate& other) {
  const double delta = Step(other) - Step(base);
  std::string s = FormatCompactConfig(other.config);
  if (std::fabs(delta) < 5e-4) {
    s += " takes the same step time as " + FormatCompactConfig(base.config);
  } else {
    s += Fmt(" is %.3f s %s than ", std::fabs(delta),
             delta > 0 ? "slower" : "faster") +
         FormatCompactConfig(base.config);
  }
  std::vector<std::pair<double, const char*>> changes;
  double total_abs = 0;
  for (const Term& t : TimeTerms()) {
    const double d = t.get(other) - t.get(base);
    total_abs += std::fabs(d);
    if (std::fabs(d) >= 5e-4) changes.emplace_back(d, t.name);
  }
  std::stable_sort(changes.begin(), changes.end(),
                   [](const auto& a, const auto& b) {
                     return std::fabs(a.first) > std::fabs(b.first);
                   });
  double covered = 0;
  std::string terms;
  for (size_t i = 0; i < changes.size() && i < 3; ++i) {
    terms += (terms.empty() ? "" : ", ") +
             Fmt("%s %+.3f s", changes[i].second, changes[i].first);
    covered += std::fabs(changes[i].first);
    if (covered >= 0.9 * total_abs) break;
  }
  if (!terms.empty()) s += ": " + terms;
  return s;
}

void PrintCompareTable(std::ostream& out, const Inputs& in,
                       const std::vector<Estimate>& estimates) {
  out << Fmt("model %s on %lld x %s, global batch %lld, seq %lld\n\n",
             in.model.name.c_str(),
             static_cast<long long>(in.training.num_gpus),
             in.cluster.name.c_str(),
             static_cast<long long>(in.training.global_batch_size),
             static_cast<long long>(in.training.seq_length));
  const size_t n = estimates.size();
  for (size_t i = 0; i < n; ++i) {
    out << Fmt("[%zu] %s", i + 1,
               FormatCompactConfig(estimates[i].config).c_str());
    if (!estimates[i].fits) {
      out << " (does not fit: " << estimates[i].infeasible_reason << ")";
    }
    out << "\n";
  }
  out << "\n" << Fmt("%-14s", "term");
  for (size_t i = 0; i < n; ++i)
    out << Fmt(" %10s", Fmt("[%zu]", i + 1).c_str());
  for (size_t i = 1; i < n; ++i) {
    out << Fmt(" %10s", Fmt("[%zu]-[1]", i + 1).c_str());
  }
  out << "\n";
  auto row = [&](const std::string& label, auto value, const char* format) {
    out << Fmt("%-14s", label.c_str());
    for (const Estimate& e : estimates) out << Fmt(format, value(e));
    for (size_t i = 1; i < n; ++i) {
      out << Fmt(" %+10.3f", value(estimates[i]) - value(estimates[0]));
    }
    out << "\n";
  };
  out << "time (s)\n";
  for (const Term& t : TimeTerms()) {
    row(std::string("  ") + t.name, t.get, " %10.3f");
  }
  row("  step", Step, " %10.3f");
  out << "memory (GiB)\n";
  for (const Term& t : MemoryTerms()) {
    row(
        std::string("  ") + t.name,
        [&t](const Estimate& e) { return t.get(e) / kGiB; }, " %10.3f");
  }
  row(
      "  usable",
      [](const Estimate& e) { return e.memory_capacity_bytes / kGiB; },
      " %10.3f");
  out << "throughput\n";
  row(
      "  tokens/s/gpu",
      [](const Estimate& e) { return e.tokens_per_s_per_gpu; }, " %10.1f");
  row(
      "  MFU %", [](const Estimate& e) { return 100.0 * e.mfu; }, " %10.1f");
  out << "\n";
  for (size_t i = 1; i < n; ++i) {
    out << ExplainDifference(estimates[0], estimates[i]) << "\n";
  }
}

nlohmann::json CompareToJson(const Inputs& in,
                             const std::vector<Estimate>& estimates) {
  nlohmann::json j;
  j["model"] = in.model.name;
  j["gpu"] = in.cluster.name;
  j["gpus"] = in.training.num_gpus;
  auto terms = [](const Estimate& e, const std::vector<Term>& list,
                  double scale) {
    nlohmann::json o = nlohmann::json::object();
    for (const Term& t : list) o[t.name] = t.get(e) / scale;
    return o;
  };
  nlohmann::json configs = nlohmann::json::array();
  for (const Estimate& e : estimates) {
    nlohmann::json c;
    c["config"] = FormatCompactConfig(e.config);
    c["fits"] = e.fits;
    c["infeasible_reason"] = e.infeasible_reason;
    c["time_s"] = terms(e, TimeTerms(), 1.0);
    c["time_s"]["step"] = Step(e);
    c["memory_gib"] = terms(e, MemoryTerms(), kGiB);
    c["tokens_per_s"] = e.tokens_per_s;
    c["mfu"] = e.mfu;
    configs.push_back(c);
  }
  j["configs"] = configs;
  nlohmann::json diffs = nlohmann::json::array();
  for (size_t i = 1; i < estimates.size(); ++i) {
    const Estimate& a = estimates[0];
    const Estimate& b = estimates[i];
    nlohmann::json d;
    d["config"] = FormatCompactConfig(b.config);
    d["vs"] = FormatCompactConfig(a.config);
    d["time_s"] = nlohmann::json::object();
    for (const Term& t : TimeTerms()) d["time_s"][t.name] = t.get(b) - t.get(a);
    d["time_s"]["step"] = Step(b) - Step(a);
    d["memory_gib"] = nlohmann::json::object();
    for (const Term& t : MemoryTerms()) {
      d["memory_gib"][t.name] = (t.get(b) - t.get(a)) / kGiB;
    }
    d["explanation"] = ExplainDifference(a, b);
    diffs.push_back(d);
  }
  j["differences"] = diffs;
  return j;
}

}  // namespace meshtune::tuner
