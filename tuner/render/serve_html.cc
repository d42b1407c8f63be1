#include "tuner/render/serve_html.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tuner/io/text_format.h"
#include "tuner/render/svg_chart.h"

namespace meshtune::tuner {
namespace {

using nlohmann::json;

constexpr double kChartWidth = 960;
// The TPOT target joins the x axis only while it is at most this many times
// the fastest point per user: beyond, the front would shrink into a corner.
constexpr double kTargetOnAxisFactor = 4;

double Num(const json& j, const char* key) { return j.at(key).get<double>(); }
int64_t Int(const json& j, const char* key) { return j.at(key).get<int64_t>(); }
std::string Str(const json& j, const char* key) {
  return j.at(key).get<std::string>();
}

// "tp4 pp1 adp1 ep1" of a point or of its "prefill" object.
std::string Shape(const json& c) {
  return "tp" + std::to_string(Int(c, "tp")) + " pp" +
         std::to_string(Int(c, "pp")) + " adp" +
         std::to_string(Int(c, "attention_dp")) + " ep" +
         std::to_string(Int(c, "ep"));
}

// "2x tp4 pp1 adp1 ep1", or disaggregated "1P tp8 ... + 3D tp8 ...", as the
// text report writes it.
std::string Layout(const json& p) {
  if (p.value("disaggregated", false)) {
    const json& prefill = p.at("prefill");
    return std::to_string(Int(prefill, "workers")) + "P " + Shape(prefill) +
           " + " + std::to_string(Int(p, "replicas")) + "D " + Shape(p);
  }
  return std::to_string(Int(p, "replicas")) + "x " + Shape(p);
}

// "concurrency 64", "8 requests/s" or "batch swept".
std::string Load(const json& problem) {
  if (Num(problem, "request_rate") > 0) {
    return FormatNumber(Num(problem, "request_rate")) + " requests/s";
  }
  if (Int(problem, "concurrency") > 0) {
    return "concurrency " + std::to_string(Int(problem, "concurrency"));
  }
  return "batch swept";
}

std::string Targets(const json& problem) {
  std::string s;
  if (Num(problem, "ttft_target_ms") > 0) {
    s += "TTFT &le; " + Fixed(Num(problem, "ttft_target_ms"), 0) + " ms";
  }
  if (Num(problem, "tpot_target_ms") > 0) {
    s += (s.empty() ? "" : ", ") + std::string("TPOT &le; ") +
         Fixed(Num(problem, "tpot_target_ms"), 1) + " ms";
  }
  return s.empty() ? "none" : s;
}

std::string Row(const std::string& name, const std::string& value_html) {
  return "<tr><th class=\"l\">" + HtmlEscape(name) + "</th><td class=\"l\">" +
         value_html + "</td></tr>";
}

std::string ProblemSection(const json& report) {
  const json& p = report.at("problem");
  std::string s = "<h2>Problem</h2><table id=\"problem\">";
  s += Row("model", HtmlEscape(Str(p, "model")));
  s += Row("GPUs", std::to_string(Int(p, "num_gpus")));
  s += Row("GPU kind", HtmlEscape(Str(p, "gpu")));
  s += Row("ISL / OSL", std::to_string(Int(p, "isl")) + " / " +
                            std::to_string(Int(p, "osl")) + " tokens");
  if (p.value("prefix", int64_t{0}) > 0) {
    const int64_t pool = p.value("prefix_pool", int64_t{1});
    s += Row("cached prefix",
             std::to_string(Int(p, "prefix")) + " tokens of each prompt, " +
                 (pool > 1 ? std::to_string(pool) +
                                 " distinct prefixes, each held once in the "
                                 "KV cache"
                           : "one prefix for all, held once in the KV cache"));
  }
  const json rates = p.value("nextn_accept_rates", json::array());
  const std::string drafter =
      p.value("spec_method", std::string("mtp")) == "eagle3"
          ? "EAGLE-3 head " + p.value("draft_model", std::string())
          : "MTP";
  if (!rates.empty()) {
    std::string list;
    for (const json& r : rates) {
      list += (list.empty() ? "" : ", ") + Fixed(r.get<double>(), 2);
    }
    const int64_t nextn = p.value("nextn", int64_t{0});
    s += Row("speculative decoding",
             HtmlEscape(drafter) + ", " +
                 (nextn > 0 ? std::to_string(nextn)
                            : "0 to " + std::to_string(rates.size())) +
                 " draft tokens a step, accepted by position at " +
                 HtmlEscape(list));
  } else if (p.value("nextn", int64_t{0}) > 0) {
    const int64_t topk = p.value("draft_topk", int64_t{1});
    const std::string tree =
        topk > 1 ? ", a tree of top-" + std::to_string(topk) + " verifying " +
                       std::to_string(p.value("draft_tokens", int64_t{0})) +
                       " tokens"
                 : "";
    s += Row("speculative decoding",
             HtmlEscape(drafter) + ", " + std::to_string(Int(p, "nextn")) +
                 " draft tokens a step" + tree + ", " +
                 HtmlEscape(Fixed(Num(p, "nextn_accepted"), 2)) +
                 " accepted on average");
  }
  s += Row("load", HtmlEscape(Load(p)));
  s += Row("weights / KV cache", HtmlEscape(Str(p, "weights")) + " / " +
                                     HtmlEscape(Str(p, "kv_cache_dtype")));
  s += Row("targets", Targets(p));
  s += Row("deployments", p.value("disaggregated", false)
                              ? "aggregated and disaggregated"
                              : "aggregated");
  const json& considered = report.at("considered");
  s += Row("priced", std::to_string(Int(considered, "layouts")) + " layouts, " +
                         std::to_string(Int(considered, "points")) +
                         " points; " +
                         std::to_string(report.at("pareto").size()) +
                         " on the Pareto front");
  return s + "</table>";
}

// The point's tooltip: layout, batch and the numbers of the table.
std::string PointTitle(const json& p) {
  return Layout(p) + ", batch " + std::to_string(Int(p, "batch_per_replica")) +
         ": TTFT " + Fixed(Num(p, "ttft_ms"), 1) + " ms, TPOT " +
         Fixed(Num(p, "tpot_ms"), 2) + " ms, " +
         Fixed(Num(p, "output_tokens_per_s_per_user"), 1) +
         " tokens/s per user, " +
         Fixed(Num(p, "output_tokens_per_s_per_gpu"), 1) +
         " tokens/s per GPU (" +
         (p.at("meets_targets").get<bool>() ? "meets" : "misses") +
         " the targets)";
}

std::string PointAttrs(const json& p) {
  return SvgAttr("data-tokens-per-s-per-user",
                 Num(p, "output_tokens_per_s_per_user")) +
         SvgAttr("data-tokens-per-s-per-gpu",
                 Num(p, "output_tokens_per_s_per_gpu")) +
         SvgAttr("data-ttft-ms", Num(p, "ttft_ms")) +
         SvgAttr("data-tpot-ms", Num(p, "tpot_ms")) +
         SvgAttr("data-batch",
                 static_cast<double>(Int(p, "batch_per_replica"))) +
         SvgAttr("data-meets-targets",
                 p.at("meets_targets").get<bool>() ? "true" : "false");
}

std::string ParetoSection(const json& report) {
  const json& front = report.at("pareto");
  const json& best = report.at("best");
  const double tpot_target_ms = Num(report.at("problem"), "tpot_target_ms");
  double max_x = 0;
  double max_y = 0;
  auto widen = [&](const json& p) {
    max_x = std::max(max_x, Num(p, "output_tokens_per_s_per_user"));
    max_y = std::max(max_y, Num(p, "output_tokens_per_s_per_gpu"));
  };
  for (const json& p : front) widen(p);
  if (best.is_object()) widen(best);
  // TPOT <= target is tokens/s per user >= 1000 / target (ms).
  const double target_x = tpot_target_ms > 0 ? 1e3 / tpot_target_ms : 0;
  const bool target_on_axis =
      target_x > 0 && target_x <= kTargetOnAxisFactor * max_x;
  const NiceAxis x_axis = NiceAxisCovering(
      0, 1.05 * std::max(max_x, target_on_axis ? target_x : 0), 10);
  const NiceAxis y_axis = NiceAxisCovering(0, 1.05 * max_y, 8);
  const PlotArea area{84, 12, kChartWidth - 84 - 24, 380};
  // Marks `kInset` pixels inside the frame, so that a point at the end of an
  // axis (radius up to 6) stays inside it.
  constexpr double kInset = 8;
  const LinearScale x{x_axis.lo, x_axis.hi, area.left + kInset,
                      area.right() - kInset};
  const LinearScale y{y_axis.lo, y_axis.hi, area.bottom() - kInset,
                      area.top + kInset};

  std::string s =
      "<h2>Output tokens/s per GPU against tokens/s per user</h2>"
      "<p class=\"note\">Every point of the Pareto front: no other priced "
      "point serves more tokens/s per GPU and more per user."
      "<span class=\"swatch\" style=\"background:#0550ae\"></span>meets the "
      "targets<span class=\"swatch\" style=\"background:#fff;border:1.5px "
      "solid #0550ae\"></span>misses them<span class=\"swatch\" "
      "style=\"background:#cf222e\"></span>best plan</p>";
  s += SvgOpen("serve-pareto", kChartWidth, area.bottom() + 48, area,
               SvgAttr("data-points", static_cast<double>(front.size())));
  s += SvgAxes(area, TicksAt(x_axis.ticks, x),
               "output tokens/s per user (1000 / TPOT ms)",
               TicksAt(y_axis.ticks, y), "output tokens/s per GPU", 56);
  if (target_on_axis) {
    const double px = x(target_x);
    s += "<line class=\"limit\" data-kind=\"tpot-target\"" +
         SvgAttr("data-tpot-ms", tpot_target_ms) + SvgAttr("x1", px) +
         SvgAttr("x2", px) + SvgAttr("y1", area.top) +
         SvgAttr("y2", area.bottom()) + "/>";
    // The label beside the line, on the side with room for it (about 6.6 px
    // per character of the 11 px text).
    const std::string label =
        "TPOT target " + FormatNumber(tpot_target_ms) + " ms";
    const double label_px = 6.6 * static_cast<double>(label.size());
    const bool right = px + 6 + label_px <= area.right() - 4;
    s += "<text class=\"limit\"" + SvgAttr("x", right ? px + 6 : px - 6) +
         SvgAttr("y", area.top + 14) + (right ? "" : " text-anchor=\"end\"") +
         ">" + HtmlEscape(label) + "</text>";
  }
  std::string line;
  for (const json& p : front) {
    line += FormatNumber(x(Num(p, "output_tokens_per_s_per_user")), 6) + "," +
            FormatNumber(y(Num(p, "output_tokens_per_s_per_gpu")), 6) + " ";
  }
  s += "<polyline class=\"frontier\"" + SvgAttr("points", line) + "/>";
  for (const json& p : front) {
    const bool met = p.at("meets_targets").get<bool>();
    s += std::string("<circle class=\"pareto ") + (met ? "met" : "missed") +
         "\" data-kind=\"pareto\"" + PointAttrs(p) +
         SvgAttr("cx", x(Num(p, "output_tokens_per_s_per_user"))) +
         SvgAttr("cy", y(Num(p, "output_tokens_per_s_per_gpu"))) +
         (met ? " r=\"4\" fill=\"#0550ae\" stroke=\"#fff\""
              : " r=\"4\" fill=\"#fff\" stroke=\"#0550ae\" "
                "stroke-width=\"1.5\"") +
         "><title>" + HtmlEscape(PointTitle(p)) + "</title></circle>";
  }
  if (best.is_object()) {
    s += "<circle class=\"best\" data-kind=\"best\"" + PointAttrs(best) +
         SvgAttr("cx", x(Num(best, "output_tokens_per_s_per_user"))) +
         SvgAttr("cy", y(Num(best, "output_tokens_per_s_per_gpu"))) +
         " r=\"6\"><title>" + HtmlEscape("best: " + PointTitle(best)) +
         "</title></circle>";
  }
  return s + "</svg>";
}

std::string ParetoTable(const json& report) {
  const json& best = report.at("best");
  // A sweep checks its candidates for best on the pass calendar
  // (tuner/serve/serve_search.h): those rows are marked, as in the text.
  const json& problem = report.at("problem");
  const bool sweep = problem.value("concurrency", int64_t{0}) == 0 &&
                     problem.value("request_rate", 0.0) <= 0;
  bool marked = false;
  std::string s =
      "<table id=\"pareto-table\"><tr><th class=\"l\">layout</th><th>batch"
      "</th><th>TTFT ms</th><th>TPOT ms</th><th>tok/s/user</th><th>tok/s/GPU"
      "</th><th class=\"l\">targets</th></tr>";
  for (const json& p : report.at("pareto")) {
    const bool is_best = best.is_object() && p == best;
    const bool mark = sweep && p.value("priced_by", "") == "pass calendar";
    marked = marked || mark;
    s += std::string("<tr") + (is_best ? " class=\"best\"" : "") +
         "><td class=\"l\">" + HtmlEscape(Layout(p)) + "</td><td>" +
         std::to_string(Int(p, "batch_per_replica")) + "</td><td>" +
         Fixed(Num(p, "ttft_ms"), 1) + "</td><td>" +
         Fixed(Num(p, "tpot_ms"), 2) + "</td><td>" +
         Fixed(Num(p, "output_tokens_per_s_per_user"), 1) + "</td><td>" +
         Fixed(Num(p, "output_tokens_per_s_per_gpu"), 1) +
         "</td><td class=\"l\">" +
         (p.at("meets_targets").get<bool>() ? "met" : "missed") +
         (mark ? "*" : "") + (is_best ? " &larr; best" : "") + "</td></tr>";
  }
  s += "</table>";
  if (marked) {
    s += "<p class=\"note\">* priced pass by pass, as a benchmark at that "
         "concurrency; the sweep's points off the front by the closed "
         "form.</p>";
  }
  return s;
}

std::string BestSection(const json& report) {
  const json& b = report.at("best");
  std::string s = "<h2>Best plan</h2>";
  if (!b.is_object()) {
    return s + "<p id=\"best\">No plan meets the targets (" +
           Targets(report.at("problem")) + "); relax them or add GPUs.</p>";
  }
  const bool disagg = b.value("disaggregated", false);
  const char* per = disagg ? "decode worker" : "replica";
  s += "<p id=\"best\"><b>" + HtmlEscape(Layout(b)) + "</b>, batch " +
       std::to_string(Int(b, "batch_per_replica")) + " per " + per + ": TTFT " +
       Fixed(Num(b, "ttft_ms"), 1) + " ms, TPOT " +
       Fixed(Num(b, "tpot_ms"), 2) + " ms, " +
       Fixed(Num(b, "output_tokens_per_s_per_user"), 1) +
       " tokens/s per user, " +
       Fixed(Num(b, "output_tokens_per_s_per_gpu"), 1) + " tokens/s per GPU (" +
       Fixed(Num(b, "output_tokens_per_s"), 0) + " in all).</p>";
  const json& m = b.at("memory_gib");
  const double total_gib =
      Num(m, "weights") + Num(m, "runtime") + Num(m, "kv_cache");
  s += "<table id=\"best-memory\"><tr><th class=\"l\">memory per GPU</th>"
       "<th>GiB</th></tr>";
  for (const auto& [key, label] :
       {std::pair<const char*, const char*>{"weights", "weights"},
        {"runtime", "runtime (activations, workspaces)"},
        {"kv_cache", "KV cache"}}) {
    s += "<tr><td class=\"l\">" + std::string(label) + "</td><td>" +
         Fixed(Num(m, key), 2) + "</td></tr>";
  }
  s += "<tr><th class=\"l\">total</th><th>" + Fixed(total_gib, 2) +
       "</th></tr></table>";
  const json& problem = report.at("problem");
  s += "<p class=\"note\">The KV cache holds " +
       std::to_string(Int(b, "max_sequences_per_replica")) + " sequences of " +
       std::to_string(Int(problem, "isl") + Int(problem, "osl")) +
       " tokens, in pages of " +
       std::to_string(b.value("kv_block_tokens", int64_t{1})) +
       " tokens, per " + per + ".</p>";
  const json& d = b.at("decode_ms");
  double step_ms = 0;
  std::string rows;
  for (const auto& [key, label] :
       {std::pair<const char*, const char*>{"weights", "weights (read)"},
        {"compute", "compute"},
        {"kv_cache", "KV cache (read)"},
        {"elementwise", "elementwise kernels"},
        {"tp_comm", "TP comm"},
        {"ep_comm", "EP comm"},
        {"pp_comm", "PP comm"},
        {"overhead", "overhead"},
        {"drafts", "drafts (speculative decoding)"}}) {
    if (std::string(key) == "drafts" && d.value(key, 0.0) <= 0) continue;
    step_ms += Num(d, key);
    const std::string name =
        std::string(key) == "drafts"
            ? (problem.value("spec_method", std::string("mtp")) == "eagle3"
                   ? "EAGLE-3 "
                   : "MTP ") +
                  std::string(label)
            : std::string(label);
    rows += "<tr><td class=\"l\">" + name + "</td><td>" +
            Fixed(Num(d, key), 2) + "</td></tr>";
  }
  s += "<table id=\"best-time\"><tr><th class=\"l\">time</th><th>ms</th>"
       "</tr><tr><td class=\"l\">prefill of one request</td><td>" +
       Fixed(Num(b, "prefill_ms"), 1) +
       "</td></tr><tr><th class=\"l\" colspan=\"2\">decode step, by "
       "part</th></tr>" +
       rows + "<tr><th class=\"l\">decode step</th><th>" + Fixed(step_ms, 2) +
       "</th></tr></table>";
  if (disagg) {
    const json& prefill = b.at("prefill");
    s += "<p class=\"note\">Prefill runs on " +
         std::to_string(Int(prefill, "workers")) + " workers of " +
         std::to_string(Int(prefill, "gpus_per_worker")) + " GPUs (" +
         HtmlEscape(Shape(prefill)) +
         "); the memory and the decode step above are one decode "
         "worker's.</p>";
  }
  return s;
}

std::string RejectedSection(const json& report) {
  const json& rejected = report.at("rejected");
  std::string s = "<h2>Rejected</h2>";
  if (rejected.empty()) return s + "<p id=\"rejected\">Nothing.</p>";
  s += "<table id=\"rejected\"><tr><th class=\"l\">reason</th><th>count</th>"
       "</tr>";
  for (const auto& [reason, n] : rejected.items()) {
    s += "<tr><td class=\"l\">" + HtmlEscape(reason) + "</td><td>" +
         std::to_string(n.get<int64_t>()) + "</td></tr>";
  }
  return s + "</table>";
}

// One role's (or the replica's) engine commands.
std::string RoleCommands(const json& c) {
  std::string s = "<h3>vLLM</h3>";
  if (c.contains("vllm")) {
    s += "<pre class=\"command\" data-engine=\"vllm\">" +
         HtmlEscape(Str(c, "vllm")) + "</pre>";
  } else {
    s += "<p class=\"note\">" + HtmlEscape(Str(c, "vllm_error")) + "</p>";
  }
  s += "<h3>SGLang</h3><pre class=\"command\" data-engine=\"sglang\">" +
       HtmlEscape(Str(c, "sglang")) + "</pre>";
  s += "<h3>TensorRT-LLM</h3>";
  if (!c.contains("trtllm")) {
    return s + "<p class=\"note\">" + HtmlEscape(Str(c, "trtllm_error")) +
           "</p>";
  }
  s += "<pre class=\"command\" data-engine=\"trtllm\">" +
       HtmlEscape(Str(c, "trtllm")) +
       "</pre><p class=\"note\">with extra_llm_api_options.yaml:</p>"
       "<pre class=\"options\">" +
       HtmlEscape(Str(c, "trtllm_extra_llm_api_options")) + "</pre>";
  return s;
}

std::string CommandsSection(const json& report) {
  if (!report.contains("commands")) return "";
  const json& c = report.at("commands");
  std::string s = "<h2>Engine commands</h2><div id=\"commands\">";
  if (!c.at("disaggregated").get<bool>()) {
    const int64_t replicas = Int(c, "replicas");
    s += "<p>Run " + std::to_string(replicas) + " replica" +
         (replicas == 1 ? "" : "s") + " of " +
         std::to_string(Int(c, "gpus_per_worker")) +
         " GPUs each, behind one load balancer, each with one of:</p>";
    s += RoleCommands(c);
  } else {
    for (const char* role : {"prefill", "decode"}) {
      const json& r = c.at(role);
      const int64_t workers = Int(r, "workers");
      s += "<h3>" + std::string(role) + " workers</h3><p>Run " +
           std::to_string(workers) + " worker" + (workers == 1 ? "" : "s") +
           " of " + std::to_string(Int(r, "gpus_per_worker")) +
           " GPUs each, each with one of:</p>";
      s += RoleCommands(r);
    }
    s += "<p class=\"note\">Behind a disaggregation router: vLLM's "
         "vllm-router, SGLang's router, TensorRT-LLM's trtllm-serve "
         "disaggregated or NVIDIA Dynamo.</p>";
  }
  s += "<p class=\"note\">The checkpoint is " +
       HtmlEscape(Str(c, "checkpoint")) +
       "; quantised checkpoints need their own path.</p>";
  return s + "</div>";
}

// report["benchmark"]: the run of vLLM's benchmark client that checks the
// plan, and its predicted means.
std::string BenchmarkSection(const json& report) {
  if (!report.contains("benchmark")) return "";
  const json& b = report.at("benchmark");
  std::string s =
      "<h2>Check it</h2><div id=\"benchmark\"><p>vLLM's benchmark client "
      "(it drives any of the three servers), against the deployment's "
      "endpoint:</p><pre class=\"command\" data-engine=\"bench\">" +
      HtmlEscape(Str(b, "command")) + "</pre>";
  if (b.contains("not_predicted")) {
    s += "<p class=\"note\">That run is not predicted: " +
         HtmlEscape(Str(b, "not_predicted")) + "</p>";
  } else {
    s += "<p>Predicted for that run, first requests included: mean TTFT " +
         Fixed(Num(b, "ttft_ms"), 1) + " ms, mean TPOT " +
         Fixed(Num(b, "tpot_ms"), 2) + " ms, " +
         Fixed(Num(b, "output_tokens_per_s"), 0) + " output tokens/s.</p>";
  }
  return s + "</div>";
}

}  // namespace

std::string RenderServeHtml(const json& report,
                            const HtmlReportSource& source) {
  const json& p = report.at("problem");
  const std::string title = "tune serve: " + Str(p, "model") + " on " +
                            std::to_string(Int(p, "num_gpus")) + " x " +
                            Str(p, "gpu");
  std::string body = ProblemSection(report);
  body += ParetoSection(report);
  body += ParetoTable(report);
  body += BestSection(report);
  body += RejectedSection(report);
  body += CommandsSection(report);
  body += BenchmarkSection(report);
  body += "<h2>Reproduce</h2><pre id=\"command\">" +
          HtmlEscape(source.command) +
          "</pre><p class=\"note\">Generated by <span id=\"version\">" +
          HtmlEscape(source.version) +
          "</span>; the numbers are the serving cost model's "
          "(docs/serving.md).</p>";
  return HtmlPage(title, body);
}

}  // namespace meshtune::tuner
