#include "tuner/serve/serve_report.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace meshtune::tuner {

namespace {

constexpr double kGiB = 1073741824.0;

// "tp4 pp1 adp1 ep1", with " nextn3" where the layout drafts (" nextn3
// tree4x8" for a tree of top-4 verifying 8 tokens).
std::string Shape(const search_spaces::ServingConfig& c) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "tp%lld pp%lld adp%lld ep%lld",
                static_cast<long long>(c.tp), static_cast<long long>(c.pp),
                static_cast<long long>(c.attention_dp),
                static_cast<long long>(c.ep));
  std::string shape = buf;
  if (c.nextn > 0) shape += " nextn" + std::to_string(c.nextn);
  if (search_spaces::DraftsTree(c)) {
    shape += " tree" + std::to_string(c.draft_topk) + "x" +
             std::to_string(c.draft_tokens);
  }
  return shape;
}

// "2x tp4 pp1 adp1 ep1", or disaggregated "1P tp8 ... + 3D tp8 ...".
std::string Layout(const ServePoint& p) {
  if (p.disaggregated) {
    return std::to_string(p.prefill_workers) + "P " + Shape(p.prefill) + " + " +
           std::to_string(p.estimate.replicas) + "D " + Shape(p.config);
  }
  return std::to_string(p.estimate.replicas) + "x " + Shape(p.config);
}

nlohmann::json PointValues(const ServePoint& p) {
  const costmodel::ServingEstimate& e = p.estimate;
  const costmodel::DecodeBreakdown& d = e.decode;
  return {{"tp", p.config.tp},
          {"pp", p.config.pp},
          {"attention_dp", p.config.attention_dp},
          {"ep", p.config.ep},
          {"moe_tp", p.config.moe_tp()},
          {"nextn", p.config.nextn},
          {"replicas", e.replicas},
          {"gpus_per_replica", p.config.gpus()},
          {"batch_per_replica", e.batch},
          {"weights", search_spaces::ToString(p.config.weights)},
          {"kv_cache_dtype", search_spaces::ToString(p.config.kv_cache)},
          {"ttft_ms", e.ttft_s * 1e3},
          {"tpot_ms", e.tpot_s * 1e3},
          {"output_tokens_per_s", e.output_tokens_per_s},
          {"output_tokens_per_s_per_gpu", e.output_tokens_per_s_per_gpu},
          {"output_tokens_per_s_per_user", e.output_tokens_per_s_per_user},
          {"meets_targets", p.meets_targets},
          {"priced_by", p.calendar ? "pass calendar" : "closed form"},
          {"memory_gib",
           {{"weights", e.weight_bytes / kGiB},
            {"runtime", e.runtime_bytes / kGiB},
            {"kv_cache", e.kv_cache_bytes / kGiB}}},
          {"max_sequences_per_replica", e.max_sequences},
          {"kv_block_tokens", e.kv_block_tokens},
          {"kv_shared_prefix_tokens", e.kv_shared_prefix_tokens},
          {"prefill_ms", e.prefill_s * 1e3},
          {"decode_ms",
           {{"weights", d.weights_s * 1e3},
            {"compute", d.compute_s * 1e3},
            {"kv_cache", d.kv_cache_s * 1e3},
            {"elementwise", d.elementwise_s * 1e3},
            {"tp_comm", d.tp_comm_s * 1e3},
            {"ep_comm", d.ep_comm_s * 1e3},
            {"pp_comm", d.pp_comm_s * 1e3},
            {"overhead", d.overhead_s * 1e3},
            {"drafts", d.draft_s * 1e3}}}};
}

nlohmann::json PointJson(const ServePoint& p) {
  nlohmann::json j = PointValues(p);
  j["disaggregated"] = p.disaggregated;
  if (p.disaggregated) {
    j["prefill"] = {{"workers", p.prefill_workers},
                    {"tp", p.prefill.tp},
                    {"pp", p.prefill.pp},
                    {"attention_dp", p.prefill.attention_dp},
                    {"ep", p.prefill.ep},
                    {"gpus_per_worker", p.prefill.gpus()}};
  }
  return j;
}

// "concurrency 64", "8 requests/s" or "batch swept".
std::string Load(const ServeProblem& p) {
  if (p.request_rate > 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g requests/s", p.request_rate);
    return buf;
  }
  if (p.workload.concurrency > 0) {
    return "concurrency " + std::to_string(p.workload.concurrency);
  }
  return "batch swept";
}

// What drafts: "MTP", or "EAGLE-3 head yuhuili/EAGLE3-LLaMA3.1-Instruct-8B".
std::string Drafter(const ServeProblem& p) {
  return p.drafter == search_spaces::Drafter::kEagle3
             ? "EAGLE-3 head " + p.draft_head.checkpoint
             : "MTP";
}

// ", MTP nextn 3 (1.8 accepted)" with speculative decoding, ", MTP nextn
// 0-3 (acceptance 0.85, 0.6, 0.4 by position)" with per-position rates
// (the drafter as Drafter names it), else empty.
std::string Speculation(const ServeProblem& p) {
  const std::vector<double>& rates = p.workload.nextn_accept_rates;
  if (p.nextn <= 0 && rates.empty()) return "";
  char buf[96];
  if (rates.empty()) {
    std::snprintf(buf, sizeof buf, " nextn %lld (%g accepted)",
                  static_cast<long long>(p.nextn), p.workload.nextn_accepted);
    std::string s = ", " + Drafter(p) + buf;
    if (p.draft_topk > 1) {
      std::snprintf(buf, sizeof buf, ", a tree of top-%lld verifying %lld",
                    static_cast<long long>(p.draft_topk),
                    static_cast<long long>(p.draft_tokens));
      s += buf;
    }
    return s;
  }
  std::string s = ", " + Drafter(p) +
                  (p.nextn > 0 ? " nextn " + std::to_string(p.nextn)
                               : " nextn 0-" + std::to_string(rates.size()));
  s += " (acceptance ";
  for (size_t k = 0; k < rates.size(); ++k) {
    std::snprintf(buf, sizeof buf, "%s%g", k > 0 ? ", " : "", rates[k]);
    s += buf;
  }
  return s + " by position)";
}

// ", 6144 of them shared," where a cached prefix's pages are held once.
std::string Shared(const costmodel::ServingEstimate& e) {
  if (e.kv_shared_prefix_tokens <= 0) return "";
  return ", " + std::to_string(e.kv_shared_prefix_tokens) + " of them shared,";
}

std::string Targets(const ServeProblem& p) {
  std::string s;
  char buf[64];
  if (p.ttft_target_s > 0) {
    std::snprintf(buf, sizeof buf, "TTFT <= %.0f ms", p.ttft_target_s * 1e3);
    s += buf;
  }
  if (p.tpot_target_s > 0) {
    std::snprintf(buf, sizeof buf, "%sTPOT <= %.1f ms", s.empty() ? "" : ", ",
                  p.tpot_target_s * 1e3);
    s += buf;
  }
  return s.empty() ? "none" : s;
}

}  // namespace

void PrintServeReport(std::ostream& out, const ServeProblem& p,
                      const ServeResult& r, size_t top) {
  char buf[512];
  // "isl 4096 (3072 cached)" with a cached prefix.
  std::string isl = std::to_string(p.workload.isl);
  if (p.workload.prefix > 0) {
    isl += " (" + std::to_string(p.workload.prefix) + " cached" +
           (p.workload.prefix_pool > 1
                ? ", " + std::to_string(p.workload.prefix_pool) + " prefixes"
                : "") +
           ")";
  }
  std::snprintf(buf, sizeof buf,
                "serving %s on %lld x %s: isl %s, osl %lld, %s, weights %s, "
                "KV cache %s%s%s; targets: %s\n",
                p.model.name.c_str(), static_cast<long long>(p.num_gpus),
                p.cluster.name.c_str(), isl.c_str(),
                static_cast<long long>(p.workload.osl), Load(p).c_str(),
                search_spaces::ToString(p.weights),
                search_spaces::ToString(p.kv_cache), Speculation(p).c_str(),
                p.disaggregated ? "; aggregated and disaggregated" : "",
                Targets(p).c_str());
  out << buf;
  std::snprintf(buf, sizeof buf,
                "%lld layouts, %zu points priced; the Pareto front of tokens/s "
                "per GPU against tokens/s per user:\n",
                static_cast<long long>(r.layouts), r.points.size());
  out << buf;
  // The layout column as wide as the widest layout listed.
  size_t width = 30;
  size_t counted = 0;
  for (size_t i : r.front) {
    if (counted++ >= top) break;
    width = std::max(width, Layout(r.points[i]).size());
  }
  out << "  " << std::string("layout") + std::string(width - 6 + 1, ' ')
      << " batch  TTFT ms  TPOT ms  tok/s/user  tok/s/GPU   targets\n";
  // A sweep prices its points on the closed form and its front and
  // candidates for best on the pass calendar (serve_search.h): those rows
  // are marked (a disaggregated row has its own closed form).
  const bool sweep = SweepsBatch(p);
  size_t shown = 0;
  bool marked = false;
  for (size_t i : r.front) {
    if (shown++ >= top) break;
    const ServePoint& q = r.points[i];
    const bool mark = sweep && q.calendar;
    marked = marked || mark;
    std::snprintf(
        buf, sizeof buf, "  %-*s %6lld %8.1f %8.2f %11.1f %10.1f   %s%s%s\n",
        static_cast<int>(width), Layout(q).c_str(),
        static_cast<long long>(q.estimate.batch), q.estimate.ttft_s * 1e3,
        q.estimate.tpot_s * 1e3, q.estimate.output_tokens_per_s_per_user,
        q.estimate.output_tokens_per_s_per_gpu,
        q.meets_targets ? "met" : "missed", mark ? "*" : "",
        r.best && *r.best == i ? "  <- best" : "");
    out << buf;
  }
  if (marked) {
    out << "  (* priced pass by pass, as a benchmark at that concurrency; "
           "the sweep's points off the front by the closed form)\n";
  }
  if (r.front.size() > top) {
    out << "  (" << r.front.size() - top << " more on the front; --top "
        << r.front.size() << " shows them)\n";
  }
  if (!r.best) {
    out << "no plan meets the targets (" << Targets(p)
        << "); relax them or add GPUs\n";
  } else {
    const ServePoint& b = r.points[*r.best];
    const costmodel::ServingEstimate& e = b.estimate;
    const costmodel::DecodeBreakdown& d = e.decode;
    std::snprintf(
        buf, sizeof buf,
        "best: %s, batch %lld per %s: TTFT %.1f ms, TPOT %.2f ms, "
        "%.1f tokens/s per user, %.1f tokens/s per GPU (%.0f in all)\n",
        Layout(b).c_str(), static_cast<long long>(e.batch),
        b.disaggregated ? "decode worker" : "replica", e.ttft_s * 1e3,
        e.tpot_s * 1e3, e.output_tokens_per_s_per_user,
        e.output_tokens_per_s_per_gpu, e.output_tokens_per_s);
    out << buf;
    std::snprintf(buf, sizeof buf,
                  "  memory per GPU: weights %.1f GiB, runtime %.1f GiB, KV "
                  "cache %.1f GiB (%lld sequences of %lld tokens%s in "
                  "%lld-token pages per %s)\n",
                  e.weight_bytes / kGiB, e.runtime_bytes / kGiB,
                  e.kv_cache_bytes / kGiB,
                  static_cast<long long>(e.max_sequences),
                  static_cast<long long>(p.workload.isl + p.workload.osl),
                  Shared(e).c_str(), static_cast<long long>(e.kv_block_tokens),
                  b.disaggregated ? "decode worker" : "replica");
    out << buf;
    std::string drafts;
    if (d.draft_s > 0) {
      // The step verifies and drafts; it emits 1 + accepted tokens each.
      std::snprintf(
          buf, sizeof buf, ", %s drafts %.2f; %.2f tokens per request a step",
          p.drafter == search_spaces::Drafter::kEagle3 ? "EAGLE-3" : "MTP",
          d.draft_s * 1e3,
          search_spaces::DecodeProgress(
              p.workload, search_spaces::ServedDrafts(p.model, b.config)));
      drafts = buf;
    }
    std::snprintf(buf, sizeof buf,
                  "  decode step %.2f ms: weights %.2f, compute %.2f, KV "
                  "cache %.2f, elementwise %.2f, tp %.2f, ep %.2f, pp %.2f, "
                  "overhead %.2f%s; prefill of one request %.1f ms\n",
                  d.total_s() * 1e3, d.weights_s * 1e3, d.compute_s * 1e3,
                  d.kv_cache_s * 1e3, d.elementwise_s * 1e3, d.tp_comm_s * 1e3,
                  d.ep_comm_s * 1e3, d.pp_comm_s * 1e3, d.overhead_s * 1e3,
                  drafts.c_str(), e.prefill_s * 1e3);
    out << buf;
  }
  if (!r.rejected.empty()) {
    out << "rejected:";
    for (const auto& [reason, n] : r.rejected) {
      out << " " << n << " x " << reason << ";";
    }
    out << "\n";
  }
}

nlohmann::json ServeReportJson(const ServeProblem& p, const ServeResult& r) {
  nlohmann::json j;
  j["problem"] = {{"model", p.model.name},
                  {"gpu", p.cluster.name},
                  {"num_gpus", p.num_gpus},
                  {"isl", p.workload.isl},
                  {"osl", p.workload.osl},
                  {"prefix", p.workload.prefix},
                  {"prefix_pool", p.workload.prefix_pool},
                  {"nextn", p.nextn},
                  {"nextn_accepted", p.workload.nextn_accepted},
                  {"nextn_accept_rates", p.workload.nextn_accept_rates},
                  {"spec_method", search_spaces::ToString(p.drafter)},
                  {"draft_topk", p.draft_topk},
                  {"draft_tokens", p.draft_tokens},
                  {"concurrency", p.workload.concurrency},
                  {"request_rate", p.request_rate},
                  {"weights", search_spaces::ToString(p.weights)},
                  {"kv_cache_dtype", search_spaces::ToString(p.kv_cache)},
                  {"ttft_target_ms", p.ttft_target_s * 1e3},
                  {"tpot_target_ms", p.tpot_target_s * 1e3},
                  {"disaggregated", p.disaggregated}};
  if (p.drafter == search_spaces::Drafter::kEagle3) {
    const search_spaces::ModelSpec head =
        search_spaces::Eagle3HeadModel(p.model, p.draft_head);
    j["problem"]["draft_model"] = p.draft_head.checkpoint;
    j["problem"]["draft_intermediate"] = head.ffn_hidden_size;
    j["problem"]["draft_vocab"] = head.vocab_size;
  }
  j["considered"] = {{"layouts", r.layouts}, {"points", r.points.size()}};
  j["rejected"] = nlohmann::json::object();
  for (const auto& [reason, n] : r.rejected) j["rejected"][reason] = n;
  j["best"] = r.best ? PointJson(r.points[*r.best]) : nlohmann::json();
  j["pareto"] = nlohmann::json::array();
  for (size_t i : r.front) j["pareto"].push_back(PointJson(r.points[i]));
  return j;
}

}  // namespace meshtune::tuner
