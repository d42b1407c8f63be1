#include "tuner/interop/serving_commands.h"

#include <cctype>
#include <vector>

#include "tuner/interop/launch_script.h"
#include "tuner/interop/shell_words.h"

namespace meshtune::tuner {

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
  if (launch.role != ServingRole::kAggregated) {
    cmd += Flag("--disaggregation-mode",
                launch.role == ServingRole::kPrefill ? "prefill" : "decode");
  }
  return cmd;
}

std::string TrtllmServeCommand(const ServingConfig& c,
                               const ServingLaunch& launch,
                               std::string* options_yaml) {
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
  if (launch.role != ServingRole::kAggregated) {
    yaml += "cache_transceiver_config:\n  backend: DEFAULT\n";
  }
  if (options_yaml != nullptr) *options_yaml = yaml;
  return cmd;
}

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
  auto number = [](const std::string& flag,
                   const std::string& text) -> StatusOr<int64_t> {
    int64_t v = 0;
    if (text.empty() || text.size() > 12) {
      return Status::InvalidArgument(
          flag + " needs a whole number, got '" + text + "'",
          "write the size in digits");
    }
    for (char ch : text) {
      if (!std::isdigit(static_cast<unsigned char>(ch))) {
        return Status::InvalidArgument(
            flag + " needs a whole number, got '" + text + "'",
            "write the size in digits");
      }
      v = v * 10 + (ch - '0');
    }
    return v;
  };
  for (size_t i = 3; i < w.size(); ++i) {
    std::string flag = w[i];
    std::string value;
    const size_t eq = flag.find('=');
    if (eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (flag == "--enable-expert-parallel") {
      expert_parallel = true;
      continue;
    } else if (i + 1 < w.size() && w[i + 1].rfind("-", 0) != 0) {
      value = w[++i];  // a flag followed by a flag is a switch
    }
    auto size = [&](int64_t* out) -> Status {
      auto v = number(flag, value);
      if (!v.ok()) return v.status();
      *out = v.value();
      return Status::Ok();
    };
    if (flag == "--tensor-parallel-size" || flag == "-tp") {
      MESHTUNE_RETURN_IF_ERROR(size(&c.tp));
    } else if (flag == "--pipeline-parallel-size" || flag == "-pp") {
      MESHTUNE_RETURN_IF_ERROR(size(&c.pp));
    } else if (flag == "--data-parallel-size" || flag == "-dp") {
      MESHTUNE_RETURN_IF_ERROR(size(&c.attention_dp));
    } else if (flag == "--max-num-seqs") {
      MESHTUNE_RETURN_IF_ERROR(size(&l.max_batch));
    } else if (flag == "--max-model-len") {
      MESHTUNE_RETURN_IF_ERROR(size(&l.max_model_len));
    } else if (flag == "--kv-cache-dtype") {
      c.kv_cache =
          value.rfind("fp8", 0) == 0 ? KvCacheDtype::kFp8 : KvCacheDtype::kBf16;
    } else if (flag == "--quantization") {
      c.weights = value == "modelopt_fp4" ? Precision::kNvfp4
                  : value == "fp8"        ? Precision::kFp8
                                          : Precision::kBf16;
    }
  }
  c.ep = expert_parallel ? c.tp * c.attention_dp : 1;
  c.max_batch = l.max_batch;
  if (launch != nullptr) *launch = l;
  return c;
}

}  // namespace meshtune::tuner
