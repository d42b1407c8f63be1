#include "tuner/interop/serving_commands.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "tuner/interop/launch_script.h"
#include "tuner/interop/shell_words.h"

namespace meshtune::tuner {

using search_spaces::Drafter;
using search_spaces::KvCacheDtype;
using search_spaces::Precision;
using search_spaces::ServingConfig;

namespace {

std::string Flag(const std::string& name, int64_t value) {
  return " \\\n  " + name + " " + std::to_string(value);
}

std::string Flag(const std::string& name, const std::string& value) {
  return " \\\n  " + name + " " + value;
}

// --quantization of vLLM and SGLang for the weight precision ("" = none).
std::string Quantization(Precision p) {
  if (p == Precision::kNvfp4) return "modelopt_fp4";
  if (search_spaces::IsFp8(p)) return "fp8";
  return "";
}

// The engines whose commands carry a chain of drafts only: an error naming
// `engine` for a tree (search_spaces::DraftsTree), SGLang's the one that
// carries it.
Status ChainsOnly(const ServingConfig& c, const std::string& engine) {
  if (!search_spaces::DraftsTree(c)) return Status::Ok();
  return Status::InvalidArgument(
      engine + " drafts a chain, not a tree of top-" +
          std::to_string(c.draft_topk),
      "use the SGLang command of this plan, or --draft-topk 1");
}

}  // namespace

StatusOr<std::string> VllmServeCommand(const ServingConfig& c,
                                       const ServingLaunch& launch) {
  const bool moe_ep = c.ep > 1;
  if (moe_ep && c.ep != c.tp * c.attention_dp) {
    return Status::InvalidArgument(
        "vLLM cannot run ep " + std::to_string(c.ep) + " with moe_tp " +
            std::to_string(c.moe_tp()) +
            ": its experts are either tensor-parallel or spread over all "
            "tp·dp ranks",
        "use the SGLang or TensorRT-LLM command of this plan");
  }
  if (!moe_ep && c.attention_dp > 1) {
    return Status::InvalidArgument(
        "vLLM's attention data parallelism needs --enable-expert-parallel "
        "(ep = tp·dp)",
        "use the SGLang or TensorRT-LLM command of this plan");
  }
  if (c.weights == Precision::kMxfp8 || c.kv_cache == KvCacheDtype::kNvfp4) {
    return Status::InvalidArgument(
        "vLLM has no flag for MXFP8 weights or an NVFP4 KV cache",
        "use the TensorRT-LLM command of this plan");
  }
  std::string cmd = "vllm serve " + ShellQuote(launch.model);
  cmd += Flag("--tensor-parallel-size", c.tp);
  cmd += Flag("--pipeline-parallel-size", c.pp);
  if (c.attention_dp > 1) cmd += Flag("--data-parallel-size", c.attention_dp);
  if (moe_ep) cmd += " \\\n  --enable-expert-parallel";
  cmd += Flag("--max-num-seqs", launch.max_batch);
  cmd += Flag("--max-model-len", launch.max_model_len);
  if (c.kv_cache == KvCacheDtype::kFp8) cmd += Flag("--kv-cache-dtype", "fp8");
  const std::string q = Quantization(c.weights);
  if (!q.empty()) cmd += Flag("--quantization", q);
  if (launch.prefix_caching) cmd += " \\\n  --enable-prefix-caching";
  MESHTUNE_RETURN_IF_ERROR(ChainsOnly(c, "vLLM"));
  if (c.nextn > 0) {
    // The head's checkpoint holds only JSON-safe characters
    // (search_spaces::ValidateSpeculation).
    const std::string method = c.drafter == Drafter::kEagle3
                                   ? R"({"method":"eagle3","model":")" +
                                         c.draft_head.checkpoint + R"(",)"
                                   : std::string(R"({"method":"mtp",)");
    cmd += Flag("--speculative-config",
                ShellQuote(method + R"("num_speculative_tokens":)" +
                           std::to_string(c.nextn) + "}"));
  }
  if (launch.role != ServingRole::kAggregated) {
    cmd += Flag("--kv-transfer-config",
                ShellQuote(R"({"kv_connector":"NixlConnector",)"
                           R"("kv_role":"kv_both"})"));
  }
  return cmd;
}

std::string SglangServeCommand(const ServingConfig& c,
                               const ServingLaunch& launch) {
  std::string cmd = "python3 -m sglang.launch_server --model-path " +
                    ShellQuote(launch.model);
  cmd += Flag("--tp", c.tp * c.attention_dp);
  if (c.attention_dp > 1) {
    cmd += Flag("--dp", c.attention_dp);
    cmd += " \\\n  --enable-dp-attention";
  }
  if (c.ep > 1) cmd += Flag("--ep-size", c.ep);
  cmd += Flag("--pp-size", c.pp);
  cmd += Flag("--max-running-requests", launch.max_batch);
  cmd += Flag("--context-length", launch.max_model_len);
  if (c.kv_cache == KvCacheDtype::kFp8) {
    cmd += Flag("--kv-cache-dtype", "fp8_e4m3");
  }
  const std::string q = Quantization(c.weights);
  if (!q.empty()) cmd += Flag("--quantization", q);
  if (c.nextn > 0) {
    // SGLang runs DeepSeek's MTP layers as its EAGLE drafter, an EAGLE-3
    // head as EAGLE3: nextn chained steps of one draft each, verified as
    // nextn + 1 tokens.
    if (c.drafter == Drafter::kEagle3) {
      cmd += Flag("--speculative-algorithm", "EAGLE3");
      cmd += Flag("--speculative-draft-model-path",
                  ShellQuote(c.draft_head.checkpoint));
    } else {
      cmd += Flag("--speculative-algorithm", "EAGLE");
    }
    cmd += Flag("--speculative-num-steps", c.nextn);
    cmd += Flag("--speculative-eagle-topk", std::max<int64_t>(1, c.draft_topk));
    cmd +=
        Flag("--speculative-num-draft-tokens", search_spaces::DraftTokens(c));
  }
  if (launch.role != ServingRole::kAggregated) {
    cmd += Flag("--disaggregation-mode",
                launch.role == ServingRole::kPrefill ? "prefill" : "decode");
  }
  return cmd;
}

StatusOr<std::string> TrtllmServeCommand(const ServingConfig& c,
                                         const ServingLaunch& launch,
                                         std::string* options_yaml) {
  if (c.tp > 1 && c.attention_dp > 1) {
    return Status::InvalidArgument(
        "TensorRT-LLM's attention data parallelism spans all its tp_size "
        "ranks: it cannot run attention tp " +
            std::to_string(c.tp) + " within attention DP " +
            std::to_string(c.attention_dp),
        "use the SGLang command of this plan");
  }
  MESHTUNE_RETURN_IF_ERROR(ChainsOnly(c, "the TensorRT-LLM command"));
  std::string cmd = "trtllm-serve " + ShellQuote(launch.model);
  cmd += Flag("--tp_size", c.tp * c.attention_dp);
  cmd += Flag("--pp_size", c.pp);
  cmd += Flag("--ep_size", c.ep);
  cmd += Flag("--max_batch_size", launch.max_batch / c.attention_dp);
  cmd += Flag("--max_seq_len", launch.max_model_len);
  cmd += Flag("--kv_cache_free_gpu_memory_fraction", "0.9");
  cmd += Flag("--extra_llm_api_options", "extra_llm_api_options.yaml");
  std::string yaml;
  yaml += "enable_attention_dp: ";
  yaml += c.attention_dp > 1 ? "true\n" : "false\n";
  yaml += "kv_cache_config:\n  dtype: ";
  yaml += c.kv_cache == KvCacheDtype::kBf16  ? "auto\n"
          : c.kv_cache == KvCacheDtype::kFp8 ? "fp8\n"
                                             : "nvfp4\n";
  if (launch.prefix_caching) yaml += "  enable_block_reuse: true\n";
  if (!launch.attention_windows.empty()) {
    yaml += "  max_attention_window: [";
    for (size_t i = 0; i < launch.attention_windows.size(); ++i) {
      if (i > 0) yaml += ", ";
      yaml += std::to_string(launch.attention_windows[i]);
    }
    yaml += "]\n";
  }
  if (c.nextn > 0 && c.drafter == Drafter::kEagle3) {
    // Quoted: a plain YAML scalar cannot start with @ or be ~.
    yaml += "speculative_config:\n  decoding_type: Eagle3\n  max_draft_len: " +
            std::to_string(c.nextn) + "\n  speculative_model: \"" +
            c.draft_head.checkpoint + "\"\n";
  } else if (c.nextn > 0) {
    yaml +=
        "speculative_config:\n  decoding_type: MTP\n"
        "  num_nextn_predict_layers: " +
        std::to_string(c.nextn) + "\n";
  }
  if (launch.role == ServingRole::kPrefill) {
    // TensorRT-LLM's context servers do not run the overlap scheduler
    // (examples/disaggregated/README.md, ctx_extra-llm-api-config.yaml).
    yaml += "disable_overlap_scheduler: true\n";
  }
  if (launch.role != ServingRole::kAggregated) {
    yaml += "cache_transceiver_config:\n  backend: DEFAULT\n";
  }
  if (options_yaml != nullptr) *options_yaml = yaml;
  return cmd;
}

namespace {

// A size written in digits (at most 12), for `flag`.
StatusOr<int64_t> WholeNumber(const std::string& flag,
                              const std::string& text) {
  int64_t v = 0;
  bool ok = !text.empty() && text.size() <= 12;
  for (char ch : text) {
    ok = ok && std::isdigit(static_cast<unsigned char>(ch));
    if (ok) v = v * 10 + (ch - '0');
  }
  if (!ok) {
    return Status::InvalidArgument(
        flag + " needs a whole number, got '" + text + "'",
        "write the size in digits");
  }
  return v;
}

// The flags of a command's words from `first` on, in order: "--flag value"
// and "--flag=value"; a flag followed by another flag (or the end) is a
// switch, with an empty value. Words that are no flag's value are skipped.
std::vector<std::pair<std::string, std::string>> Flags(
    const std::vector<std::string>& w, size_t first) {
  std::vector<std::pair<std::string, std::string>> flags;
  for (size_t i = first; i < w.size(); ++i) {
    if (w[i].rfind("-", 0) != 0) continue;
    const size_t eq = w[i].find('=');
    if (eq != std::string::npos) {
      flags.emplace_back(w[i].substr(0, eq), w[i].substr(eq + 1));
    } else if (i + 1 < w.size() && w[i + 1].rfind("-", 0) != 0) {
      flags.emplace_back(w[i], w[i + 1]);
      ++i;
    } else {
      flags.emplace_back(w[i], "");
    }
  }
  return flags;
}

// Reads `value` into *out when `flag` is one of `names`; *matched says
// whether it was.
Status SizeFlag(const std::string& flag, const std::string& value,
                std::initializer_list<const char*> names, int64_t* out,
                bool* matched) {
  for (const char* name : names) {
    if (flag != name) continue;
    *matched = true;
    auto v = WholeNumber(flag, value);
    if (!v.ok()) return v.status();
    *out = v.value();
  }
  return Status::Ok();
}

// The draft tokens of vLLM's --speculative-config JSON (YAML reads JSON):
// num_speculative_tokens where the method is mtp (or its older name
// deepseek_mtp) or eagle3 (then the head's checkpoint, its model, into
// `c`), 0 for other methods, which meshtune does not price.
StatusOr<int64_t> VllmDrafts(const std::string& json, ServingConfig* c) {
  try {
    const YAML::Node n = YAML::Load(json);
    if (!n.IsMap() || !n["method"]) {
      return Status::InvalidArgument(
          "--speculative-config needs a JSON object with a method, got '" +
              json + "'",
          R"(write it as '{"method":"mtp","num_speculative_tokens":N}')");
    }
    const std::string method = n["method"].as<std::string>();
    if (method == "eagle3") {
      c->drafter = Drafter::kEagle3;
      if (n["model"]) c->draft_head.checkpoint = n["model"].as<std::string>();
    } else if (method != "mtp" && method != "deepseek_mtp") {
      return int64_t{0};
    }
    return n["num_speculative_tokens"]
               ? n["num_speculative_tokens"].as<int64_t>()
               : int64_t{1};
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(
        "--speculative-config is not JSON of the right types: " +
            std::string(e.what()),
        R"(write it as '{"method":"mtp","num_speculative_tokens":N}')");
  }
}

// vLLM's and SGLang's --quantization.
Precision WeightsOf(const std::string& quantization) {
  if (quantization == "modelopt_fp4") return Precision::kNvfp4;
  if (quantization == "fp8") return Precision::kFp8;
  return Precision::kBf16;
}

}  // namespace

StatusOr<ServingConfig> ParseVllmServeCommand(const std::string& command,
                                              ServingLaunch* launch) {
  auto words = SplitShellWords(command, "the vLLM command");
  if (!words.ok()) return words.status();
  const std::vector<std::string>& w = words.value();
  if (w.size() < 3 || w[0] != "vllm" || w[1] != "serve") {
    return Status::InvalidArgument("not a 'vllm serve MODEL ...' command",
                                   "give the command tune serve printed");
  }
  ServingConfig c;
  ServingLaunch l;
  l.model = w[2];
  bool expert_parallel = false;
  for (const auto& [flag, value] : Flags(w, 3)) {
    bool m = false;
    MESHTUNE_RETURN_IF_ERROR(
        SizeFlag(flag, value, {"--tensor-parallel-size", "-tp"}, &c.tp, &m));
    MESHTUNE_RETURN_IF_ERROR(
        SizeFlag(flag, value, {"--pipeline-parallel-size", "-pp"}, &c.pp, &m));
    MESHTUNE_RETURN_IF_ERROR(SizeFlag(
        flag, value, {"--data-parallel-size", "-dp"}, &c.attention_dp, &m));
    MESHTUNE_RETURN_IF_ERROR(
        SizeFlag(flag, value, {"--max-num-seqs"}, &l.max_batch, &m));
    MESHTUNE_RETURN_IF_ERROR(
        SizeFlag(flag, value, {"--max-model-len"}, &l.max_model_len, &m));
    if (flag == "--enable-expert-parallel") expert_parallel = true;
    if (flag == "--enable-prefix-caching") l.prefix_caching = true;
    if (flag == "--kv-cache-dtype") {
      c.kv_cache =
          value.rfind("fp8", 0) == 0 ? KvCacheDtype::kFp8 : KvCacheDtype::kBf16;
    }
    if (flag == "--quantization") c.weights = WeightsOf(value);
    if (flag == "--speculative-config") {
      auto drafts = VllmDrafts(value, &c);
      if (!drafts.ok()) return drafts.status();
      c.nextn = drafts.value();
    }
  }
  // --kv-transfer-config is skipped: vLLM's NixlConnector workers are
  // kv_both, so the command does not say which side a worker is.
  c.ep = expert_parallel ? c.tp * c.attention_dp : 1;
  c.max_batch = l.max_batch;
  if (launch != nullptr) *launch = l;
  return c;
}

StatusOr<ServingConfig> ParseSglangServeCommand(const std::string& command,
                                                ServingLaunch* launch) {
  auto words = SplitShellWords(command, "the SGLang command");
  if (!words.ok()) return words.status();
  const std::vector<std::string>& w = words.value();
  size_t first = w.size();
  for (size_t i = 0; i + 1 < w.size(); ++i) {
    if (w[i] == "-m" && w[i + 1] == "sglang.launch_server") first = i + 2;
  }
  if (first == w.size() &&
      !(w.size() >= 2 && w.back() == "sglang.launch_server")) {
    return Status::InvalidArgument(
        "not a 'python3 -m sglang.launch_server ...' command",
        "give the command tune serve printed");
  }
  ServingConfig c;
  ServingLaunch l;
  int64_t gpus = 1, dp = 1, steps = 0, topk = 1, draft_tokens = 0;
  bool dp_attention = false, speculative = false;
  for (const auto& [flag, value] : Flags(w, first)) {
    bool m = false;
    MESHTUNE_RETURN_IF_ERROR(
        SizeFlag(flag, value, {"--tp", "--tp-size"}, &gpus, &m));
    MESHTUNE_RETURN_IF_ERROR(
        SizeFlag(flag, value, {"--dp", "--dp-size"}, &dp, &m));
    MESHTUNE_RETURN_IF_ERROR(
        SizeFlag(flag, value, {"--ep-size", "--ep"}, &c.ep, &m));
    MESHTUNE_RETURN_IF_ERROR(
        SizeFlag(flag, value, {"--pp-size", "--pp"}, &c.pp, &m));
    MESHTUNE_RETURN_IF_ERROR(
        SizeFlag(flag, value, {"--max-running-requests"}, &l.max_batch, &m));
    MESHTUNE_RETURN_IF_ERROR(
        SizeFlag(flag, value, {"--context-length"}, &l.max_model_len, &m));
    MESHTUNE_RETURN_IF_ERROR(
        SizeFlag(flag, value, {"--speculative-num-steps"}, &steps, &m));
    MESHTUNE_RETURN_IF_ERROR(
        SizeFlag(flag, value, {"--speculative-eagle-topk"}, &topk, &m));
    MESHTUNE_RETURN_IF_ERROR(SizeFlag(
        flag, value, {"--speculative-num-draft-tokens"}, &draft_tokens, &m));
    if (flag == "--model-path" || flag == "--model") l.model = value;
    if (flag == "--enable-dp-attention") dp_attention = true;
    if (flag == "--speculative-algorithm") {
      speculative = value == "EAGLE" || value == "NEXTN" || value == "EAGLE3";
      c.drafter = value == "EAGLE3" ? Drafter::kEagle3 : Drafter::kMtp;
    }
    if (flag == "--speculative-draft-model-path") {
      c.draft_head.checkpoint = value;
    }
    if (flag == "--kv-cache-dtype") {
      c.kv_cache =
          value.rfind("fp8", 0) == 0 ? KvCacheDtype::kFp8 : KvCacheDtype::kBf16;
    }
    if (flag == "--quantization") c.weights = WeightsOf(value);
    if (flag == "--disaggregation-mode") {
      l.role = value == "prefill"  ? ServingRole::kPrefill
               : value == "decode" ? ServingRole::kDecode
                                   : ServingRole::kAggregated;
    }
  }
  // SGLang's --tp is the replica's GPUs; with DP attention they hold dp
  // attention ranks of tp/dp GPUs each. Without it --dp starts whole
  // replicas behind SGLang's router: one replica is what is read here.
  c.attention_dp = dp_attention ? dp : 1;
  if (gpus % c.attention_dp != 0) {
    return Status::InvalidArgument(
        "SGLang's --tp " + std::to_string(gpus) +
            " is not a multiple of --dp " + std::to_string(dp) +
            " with --enable-dp-attention",
        "give --tp as the replica's GPUs, a multiple of --dp");
  }
  c.tp = gpus / c.attention_dp;
  c.max_batch = l.max_batch;
  // The drafts a step chains (DeepSeek's MTP as SGLang's EAGLE or NEXTN
  // drafter, an EAGLE-3 head as EAGLE3); 1 when the steps are left to
  // SGLang's default.
  if (speculative) c.nextn = steps > 0 ? steps : 1;
  // A tree: its top-k and verified tokens; a chain keeps the defaults.
  if (speculative && topk > 1) {
    c.draft_topk = topk;
    c.draft_tokens = draft_tokens;
  }
  if (launch != nullptr) *launch = l;
  return c;
}

StatusOr<ServingConfig> ParseTrtllmServeCommand(const std::string& command,
                                                const std::string& options_yaml,
                                                ServingLaunch* launch) {
  auto words = SplitShellWords(command, "the trtllm-serve command");
  if (!words.ok()) return words.status();
  const std::vector<std::string>& w = words.value();
  if (w.size() < 2 || w[0] != "trtllm-serve") {
    return Status::InvalidArgument("not a 'trtllm-serve MODEL ...' command",
                                   "give the command tune serve printed");
  }
  ServingConfig c;
  ServingLaunch l;
  l.model = w[1];
  int64_t gpus = 1, batch_per_rank = 0;
  for (const auto& [flag, value] : Flags(w, 2)) {
    bool m = false;
    MESHTUNE_RETURN_IF_ERROR(SizeFlag(flag, value, {"--tp_size"}, &gpus, &m));
    MESHTUNE_RETURN_IF_ERROR(SizeFlag(flag, value, {"--pp_size"}, &c.pp, &m));
    MESHTUNE_RETURN_IF_ERROR(SizeFlag(flag, value, {"--ep_size"}, &c.ep, &m));
    MESHTUNE_RETURN_IF_ERROR(
        SizeFlag(flag, value, {"--max_batch_size"}, &batch_per_rank, &m));
    MESHTUNE_RETURN_IF_ERROR(
        SizeFlag(flag, value, {"--max_seq_len"}, &l.max_model_len, &m));
  }
  bool attention_dp = false;
  if (!options_yaml.empty()) {
    YAML::Node root;
    try {
      root = YAML::Load(options_yaml);
    } catch (const YAML::Exception& e) {
      return Status::InvalidArgument(
          "the --extra_llm_api_options YAML does not parse: " +
              std::string(e.what()),
          "give the options file tune serve printed beside the command");
    }
    try {
      if (root["enable_attention_dp"]) {
        attention_dp = root["enable_attention_dp"].as<bool>();
      }
      if (root["kv_cache_config"] && root["kv_cache_config"]["dtype"]) {
        const std::string dtype =
            root["kv_cache_config"]["dtype"].as<std::string>();
        c.kv_cache = dtype == "fp8"     ? KvCacheDtype::kFp8
                     : dtype == "nvfp4" ? KvCacheDtype::kNvfp4
                                        : KvCacheDtype::kBf16;
      }
      if (root["kv_cache_config"] &&
          root["kv_cache_config"]["enable_block_reuse"]) {
        l.prefix_caching =
            root["kv_cache_config"]["enable_block_reuse"].as<bool>();
      }
      if (root["kv_cache_config"] &&
          root["kv_cache_config"]["max_attention_window"]) {
        l.attention_windows = root["kv_cache_config"]["max_attention_window"]
                                  .as<std::vector<int64_t>>();
      }
      const YAML::Node spec = root["speculative_config"];
      const std::string decoding = spec && spec["decoding_type"]
                                       ? spec["decoding_type"].as<std::string>()
                                       : "";
      if (decoding == "MTP") {
        c.nextn = spec["num_nextn_predict_layers"]
                      ? spec["num_nextn_predict_layers"].as<int64_t>()
                      : 1;
      }
      // Eagle is TensorRT-LLM's older name of Eagle3; the head's path was
      // speculative_model_dir before speculative_model.
      if (decoding == "Eagle3" || decoding == "Eagle") {
        c.drafter = Drafter::kEagle3;
        c.nextn =
            spec["max_draft_len"] ? spec["max_draft_len"].as<int64_t>() : 1;
        for (const char* key : {"speculative_model", "speculative_model_dir"}) {
          if (spec[key]) c.draft_head.checkpoint = spec[key].as<std::string>();
        }
      }
      if (root["cache_transceiver_config"]) {
        const bool context = root["disable_overlap_scheduler"] &&
                             root["disable_overlap_scheduler"].as<bool>();
        l.role = context ? ServingRole::kPrefill : ServingRole::kDecode;
      }
    } catch (const YAML::Exception& e) {
      return Status::InvalidArgument(
          "the --extra_llm_api_options YAML has a field of the wrong type: " +
              std::string(e.what()),
          "enable_attention_dp and kv_cache_config.enable_block_reuse are "
          "true or false, kv_cache_config.dtype a name, "
          "kv_cache_config.max_attention_window a list of token counts, "
          "speculative_config.num_nextn_predict_layers and max_draft_len "
          "counts");
    }
    for (const int64_t window : l.attention_windows) {
      if (window < 1) {
        return Status::InvalidArgument(
            "kv_cache_config.max_attention_window holds " +
                std::to_string(window) + ", not a number of tokens",
            "give each layer's window as a positive token count");
      }
    }
  }
  // TensorRT-LLM's attention DP spans all tp_size ranks (no hybrid), and
  // --max_batch_size is per attention-DP rank. The weight precision is the
  // checkpoint's (no flag): not read.
  c.attention_dp = attention_dp ? gpus : 1;
  c.tp = attention_dp ? 1 : gpus;
  l.max_batch = batch_per_rank * c.attention_dp;
  c.max_batch = l.max_batch;
  if (launch != nullptr) *launch = l;
  return c;
}

}  // namespace meshtune::tuner
