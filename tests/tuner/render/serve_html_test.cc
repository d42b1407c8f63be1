// `tune serve --html` (tuner/render/serve_html.h): the page names the best
// plan, plots one point per Pareto point with the JSON's numbers, escapes
// every engine command and user value, keeps its chart inside its frame,
// and a bad path is one line with a hint and exit code 2.
#include "tuner/render/serve_html.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/tuner/render/svg_geometry.h"
#include "tests/tuner/tune_in_process.h"
#include "tuner/render/svg_chart.h"

namespace meshtune::tuner {
namespace {

using testing::MakeTempDir;
using testing::ReadFile;
using testing::SvgGeometryProblems;
using testing::Tune;

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

// `tune serve ARGS --json --html DIR/serve.html`: the JSON on stdout and the
// page it wrote.
struct ServeRun {
  nlohmann::json report;
  std::string html;
};

ServeRun RunServe(std::vector<std::string> args) {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/serve.html";
  args.insert(args.begin(), "serve");
  args.insert(args.end(), {"--json", "--html", path});
  const auto run = Tune(args);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("tune: wrote the HTML report to " + path),
            std::string::npos)
      << run.err;
  ServeRun r;
  if (run.exit_code == 0) {
    r.report = nlohmann::json::parse(run.out);
    r.html = ReadFile(path);
  }
  std::filesystem::remove_all(dir);
  return r;
}

TEST(ServeHtml, PageHasTheBestPlanAndOnePointPerParetoPoint) {
  // docs/serving.md §6: the best plan is two replicas of tp4.
  const ServeRun r =
      RunServe({"--model", "llama3-70b", "--gpus", "8", "--gpu", "h100",
                "--isl", "2048", "--osl", "512", "--tpot-ms", "50"});
  ASSERT_FALSE(r.html.empty());
  const nlohmann::json& j = r.report;
  ASSERT_TRUE(j["best"].is_object());
  EXPECT_EQ(r.html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(r.html.find("<title>tune serve: llama3-70b on 8 x h100</title>"),
            std::string::npos);
  EXPECT_NE(r.html.find(
                "<p id=\"best\"><b>2x tp4 pp1 adp1 ep1</b>, batch " +
                std::to_string(j["best"]["batch_per_replica"].get<int64_t>())),
            std::string::npos);
  // The rows checked on the pass calendar are marked, the best among them.
  EXPECT_NE(r.html.find("met* &larr; best</td></tr>"), std::string::npos);
  EXPECT_NE(r.html.find("<p class=\"note\">* priced pass by pass"),
            std::string::npos);
  // One point per Pareto point, each with the JSON's numbers; filled where
  // it meets the target.
  const size_t front = j["pareto"].size();
  EXPECT_EQ(Count(r.html, "data-kind=\"pareto\""), front);
  EXPECT_NE(r.html.find("data-points=\"" + std::to_string(front) + "\""),
            std::string::npos);
  size_t met = 0;
  for (const nlohmann::json& p : j["pareto"]) {
    met += p["meets_targets"].get<bool>();
    EXPECT_NE(
        r.html.find(SvgAttr("data-tokens-per-s-per-gpu",
                            p["output_tokens_per_s_per_gpu"].get<double>()) +
                    SvgAttr("data-ttft-ms", p["ttft_ms"].get<double>()) +
                    SvgAttr("data-tpot-ms", p["tpot_ms"].get<double>())),
        std::string::npos)
        << p.dump();
  }
  EXPECT_EQ(Count(r.html, "class=\"pareto met\""), met);
  EXPECT_EQ(Count(r.html, "class=\"pareto missed\""), front - met);
  EXPECT_GT(met, 0u);
  EXPECT_GT(front - met, 0u);
  // The best plan once, highlighted; its row in the table marked.
  EXPECT_EQ(Count(r.html, "data-kind=\"best\""), 1u);
  EXPECT_NE(r.html.find(SvgAttr(
                "data-tokens-per-s-per-gpu",
                j["best"]["output_tokens_per_s_per_gpu"].get<double>())),
            std::string::npos);
  EXPECT_EQ(Count(r.html, "<tr class=\"best\">"), 1u);
  // The TPOT target as a line, the breakdowns, the rejections.
  EXPECT_EQ(Count(r.html, "data-kind=\"tpot-target\""), 1u);
  EXPECT_NE(r.html.find("<table id=\"best-memory\">"), std::string::npos);
  EXPECT_NE(r.html.find("<td class=\"l\">TP comm</td>"), std::string::npos);
  EXPECT_NE(r.html.find("<td class=\"l\">prefill of one request</td>"),
            std::string::npos);
  EXPECT_NE(r.html.find("<td class=\"l\">out_of_memory</td><td>1</td>"),
            std::string::npos);
  EXPECT_NE(r.html.find("<th class=\"l\">targets</th><td class=\"l\">TPOT "
                        "&le; 50.0 ms</td>"),
            std::string::npos);
  // The commands, escaped: the shell's single quotes become entities.
  const std::string vllm = j["commands"]["vllm"].get<std::string>();
  EXPECT_NE(r.html.find("<pre class=\"command\" data-engine=\"vllm\">" +
                        HtmlEscape(vllm) + "</pre>"),
            std::string::npos);
  EXPECT_NE(r.html.find("vllm serve &#39;meta-llama/Meta-Llama-3-70B&#39;"),
            std::string::npos);
  EXPECT_EQ(r.html.find("'meta-llama"), std::string::npos);
  EXPECT_NE(r.html.find("data-engine=\"sglang\""), std::string::npos);
  EXPECT_NE(r.html.find("data-engine=\"trtllm\""), std::string::npos);
  // The run that checks the plan, escaped, with its predicted means.
  EXPECT_NE(
      r.html.find("<pre class=\"command\" data-engine=\"bench\">" +
                  HtmlEscape(j["benchmark"]["command"].get<std::string>()) +
                  "</pre><p>Predicted for that run, first requests "
                  "included: mean TTFT "),
      std::string::npos);
  EXPECT_NE(r.html.find("--base-url &quot;${BASE_URL:-http://localhost:8000}"
                        "&quot;"),
            std::string::npos);
  EXPECT_NE(r.html.find("<pre id=\"command\">tune serve --model "
                        "&#39;llama3-70b&#39; --gpus 8 --gpu &#39;h100&#39; "
                        "--isl 2048 --osl 512 --tpot-ms 50 --html "),
            std::string::npos);
  EXPECT_EQ(SvgGeometryProblems(r.html), std::vector<std::string>{});
}

TEST(ServeHtml, SpeculationAndASharedPrefixHaveTheirRows) {
  // DeepSeek-V3 with per-position acceptance rates and a shared prefix:
  // the problem table names both, the step table the drafts' time, the
  // memory note the pages and the prefix held once.
  const ServeRun r = RunServe(
      {"--model", "deepseek-v3", "--gpus", "8", "--gpu", "h200", "--isl",
       "2048", "--osl", "512", "--precision", "fp8", "--prefix", "1024",
       "--nextn-accept-rates", "0.8,0.5", "--tpot-ms", "30"});
  ASSERT_FALSE(r.html.empty());
  ASSERT_TRUE(r.report["best"].is_object());
  EXPECT_NE(r.html.find("<th class=\"l\">speculative decoding</th><td "
                        "class=\"l\">MTP, 0 to 2 draft tokens a step, "
                        "accepted by position at 0.80, 0.50</td>"),
            std::string::npos);
  EXPECT_NE(r.html.find("<th class=\"l\">cached prefix</th><td "
                        "class=\"l\">1024 tokens of each prompt, one prefix "
                        "for all, held once in the KV cache</td>"),
            std::string::npos);
  EXPECT_NE(r.html.find(" tokens, in pages of 64 tokens, per replica.</p>"),
            std::string::npos);
  const bool drafts = r.report["best"]["nextn"].get<int64_t>() > 0;
  EXPECT_EQ(r.html.find("<td class=\"l\">MTP drafts (speculative "
                        "decoding)</td>") != std::string::npos,
            drafts);
  EXPECT_EQ(SvgGeometryProblems(r.html), std::vector<std::string>{});
}

TEST(ServeHtml, AnEagle3HeadIsNamedWithItsDrafts) {
  // LLaMA-3 8B with an EAGLE-3 head: the problem table names the head, the
  // step table its drafts.
  const ServeRun r = RunServe({"--model",
                               "llama3-8b",
                               "--gpus",
                               "1",
                               "--gpu",
                               "h100",
                               "--isl",
                               "1024",
                               "--osl",
                               "256",
                               "--precision",
                               "fp8",
                               "--spec-method",
                               "eagle3",
                               "--draft-model",
                               "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
                               "--nextn",
                               "2",
                               "--nextn-accepted",
                               "1.2",
                               "--concurrency",
                               "8"});
  ASSERT_FALSE(r.html.empty());
  ASSERT_TRUE(r.report["best"].is_object());
  EXPECT_NE(r.html.find("<th class=\"l\">speculative decoding</th><td "
                        "class=\"l\">EAGLE-3 head "
                        "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, 2 draft tokens "
                        "a step, 1.20 accepted on average</td>"),
            std::string::npos);
  EXPECT_NE(r.html.find("<td class=\"l\">EAGLE-3 drafts (speculative "
                        "decoding)</td>"),
            std::string::npos);
  EXPECT_EQ(r.html.find("MTP"), std::string::npos);
  EXPECT_EQ(SvgGeometryProblems(r.html), std::vector<std::string>{});
}

TEST(ServeHtml, DisaggregatedPlanListsEachRolesEscapedCommands) {
  const ServeRun r =
      RunServe({"--model", "llama3-70b", "--gpus", "16", "--gpu", "h100",
                "--isl", "8192", "--osl", "256", "--precision", "fp8",
                "--disagg", "--tpot-ms", "40", "--ttft-ms", "2000"});
  ASSERT_FALSE(r.html.empty());
  ASSERT_EQ(r.report["best"]["disaggregated"], true);
  EXPECT_NE(r.html.find("<h3>prefill workers</h3>"), std::string::npos);
  EXPECT_NE(r.html.find("<h3>decode workers</h3>"), std::string::npos);
  // The KV-transfer JSON inside the shell quotes, every quote an entity.
  EXPECT_NE(r.html.find("&#39;{&quot;kv_connector&quot;:&quot;NixlConnector"
                        "&quot;,&quot;kv_role&quot;:&quot;kv_both&quot;}"
                        "&#39;"),
            std::string::npos);
  EXPECT_EQ(r.html.find("\"kv_connector\""), std::string::npos);
  EXPECT_NE(r.html.find("--disaggregation-mode prefill"), std::string::npos);
  const std::string layout =
      std::to_string(r.report["best"]["prefill"]["workers"].get<int64_t>()) +
      "P tp";
  EXPECT_NE(r.html.find("<p id=\"best\"><b>" + layout), std::string::npos);
  EXPECT_EQ(Count(r.html, "data-kind=\"pareto\""), r.report["pareto"].size());
  EXPECT_EQ(SvgGeometryProblems(r.html), std::vector<std::string>{});
}

TEST(ServeHtml, EscapesUserValuesAndCommands) {
  const ServeRun r = RunServe({"--model", "llama3-8b", "--gpus", "2", "--gpu",
                               "h100", "--isl", "1024", "--osl", "256"});
  ASSERT_FALSE(r.html.empty());
  nlohmann::json j = r.report;
  j["problem"]["model"] = "<script>alert('x')</script>";
  j["rejected"]["a<b"] = 2;
  j["commands"]["vllm"] = "vllm serve '<img src=x>' && echo \"&\"";
  j["commands"]["trtllm_extra_llm_api_options"] = "key: </pre><b>\n";
  HtmlReportSource source;
  source.command = "tune serve --model '<m>'";
  source.version = "tune 1 (<rev>)";
  const std::string html = RenderServeHtml(j, source);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<m>"), std::string::npos);
  EXPECT_EQ(html.find("<rev>"), std::string::npos);
  EXPECT_EQ(Count(html, "</pre><b>"), 0u);
  EXPECT_NE(html.find("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"),
            std::string::npos);
  EXPECT_NE(html.find("vllm serve &#39;&lt;img src=x&gt;&#39; &amp;&amp; "
                      "echo &quot;&amp;&quot;"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"l\">a&lt;b</td><td>2</td>"),
            std::string::npos);
}

TEST(ServeHtml, NoPlanMeetsTheTargets) {
  const ServeRun r =
      RunServe({"--model", "llama3-8b", "--gpus", "1", "--gpu", "h100", "--isl",
                "1024", "--osl", "256", "--tpot-ms", "0.01"});
  ASSERT_FALSE(r.html.empty());
  EXPECT_TRUE(r.report["best"].is_null());
  EXPECT_NE(r.html.find("<p id=\"best\">No plan meets the targets"),
            std::string::npos);
  EXPECT_EQ(r.html.find("data-kind=\"best\""), std::string::npos);
  EXPECT_EQ(r.html.find("id=\"commands\""), std::string::npos);
  EXPECT_EQ(r.html.find("id=\"benchmark\""), std::string::npos);
  EXPECT_EQ(Count(r.html, "class=\"pareto missed\""),
            r.report["pareto"].size());
  // A 100 000 tokens/s-per-user target lies far beyond the front: no line.
  EXPECT_EQ(r.html.find("data-kind=\"tpot-target\""), std::string::npos);
  EXPECT_EQ(SvgGeometryProblems(r.html), std::vector<std::string>{});
}

TEST(ServeHtml, BadPathIsOneLineWithAHintAndExitCode2) {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/no/such/dir/serve.html";
  const auto run = Tune({"serve", "--model", "llama3-8b", "--gpus", "1",
                         "--isl", "8", "--osl", "8", "--html", path});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");  // refused before the search
  EXPECT_EQ(run.err, "tune: error: --html: cannot write '" + path +
                         "': directory '" + dir +
                         "/no/such/dir': No such file or directory\n"
                         "tune: hint: create the directory first, or write "
                         "somewhere else\n");
  const auto directory = Tune({"serve", "--model", "llama3-8b", "--gpus", "1",
                               "--isl", "8", "--osl", "8", "--html", dir});
  EXPECT_EQ(directory.exit_code, 2);
  EXPECT_EQ(
      directory.err.rfind(
          "tune: error: --html: '" + dir + "' is a directory\ntune: hint: ", 0),
      0u)
      << directory.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/no"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace meshtune::tuner
