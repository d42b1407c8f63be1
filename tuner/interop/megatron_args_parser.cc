#include "tuner/interop/megatron_args_parser.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <utility>

#include "search_spaces/limits.h"
#include "search_spaces/pipeline_layout.h"
#include "search_spaces/yaml_util.h"
#include "tuner/interop/shell_words.h"

namespace meshtune::tuner {
namespace {

// Megatron asserts --delay-wgrad-compute only with the EP overlap
// (transformer_config.py).
Status CheckDelayWgrad(bool delay_wgrad, bool ep_overlap) {
  if (!delay_wgrad || ep_overlap) return Status::Ok();
  return Status::InvalidArgument(
      "--delay-wgrad-compute needs --overlap-moe-expert-parallel-comm",
      "add --overlap-moe-expert-parallel-comm or remove "
      "--delay-wgrad-compute");
}

using search_spaces::Activation;
using search_spaces::Normalization;
using search_spaces::PositionEmbedding;
using search_spaces::Precision;
using search_spaces::RecomputeGranularity;
using search_spaces::RecomputeMethod;
using search_spaces::SizeLimit;
using search_spaces::yaml_util::Printable;
namespace limits = search_spaces::limits;

// kList: one or more values (argparse nargs="+").
enum class Kind { kSwitch, kInt, kString, kList };

// --mtp-num-layers on a hybrid model must equal the depths its pattern's '/'
// parts set (Megatron infers them from the pattern); `pattern` names where
// the pattern came from in the message.
Status CheckHybridMtpDepths(int64_t depths, const search_spaces::ModelSpec& m,
                            const std::string& pattern) {
  if (!m.is_hybrid() || depths == m.mtp_num_layers) return Status::Ok();
  return Status::InvalidArgument(
      "--mtp-num-layers " + std::to_string(depths) + " but " + pattern +
          " has " + std::to_string(m.mtp_num_layers) +
          " MTP depths ('/' parts)",
      "make them agree, or leave --mtp-num-layers out for a hybrid model");
}

// The flags that shape the plan (megatron/training/arguments.py names), with
// the kind of value each takes. The string flags' allowed values are checked
// where they are read.
const std::map<std::string, Kind>& PlanFlags() {
  static const auto* flags = new std::map<std::string, Kind>{
      {"--num-layers", Kind::kInt},
      {"--hidden-size", Kind::kInt},
      {"--num-attention-heads", Kind::kInt},
      {"--group-query-attention", Kind::kSwitch},
      {"--num-query-groups", Kind::kInt},
      {"--kv-channels", Kind::kInt},
      {"--ffn-hidden-size", Kind::kInt},
      {"--vocab-size", Kind::kInt},
      {"--seq-length", Kind::kInt},
      {"--max-position-embeddings", Kind::kInt},
      {"--normalization", Kind::kString},
      {"--swiglu", Kind::kSwitch},
      {"--position-embedding-type", Kind::kString},
      {"--untie-embeddings-and-output-weights", Kind::kSwitch},
      {"--tensor-model-parallel-size", Kind::kInt},
      {"--pipeline-model-parallel-size", Kind::kInt},
      {"--virtual-pipeline-model-parallel-size", Kind::kInt},
      {"--num-layers-per-virtual-pipeline-stage", Kind::kInt},
      {"--account-for-embedding-in-pipeline-split", Kind::kSwitch},
      {"--account-for-loss-in-pipeline-split", Kind::kSwitch},
      {"--context-parallel-size", Kind::kInt},
      {"--expert-model-parallel-size", Kind::kInt},
      {"--num-experts", Kind::kInt},
      {"--moe-router-topk", Kind::kInt},
      {"--moe-ffn-hidden-size", Kind::kInt},
      {"--moe-layer-freq", Kind::kString},
      {"--expert-tensor-parallel-size", Kind::kInt},
      {"--pipeline-model-parallel-layout", Kind::kString},
      {"--squared-relu", Kind::kSwitch},
      {"--hybrid-layer-pattern", Kind::kString},
      {"--is-hybrid-model", Kind::kSwitch},
      {"--mamba-state-dim", Kind::kInt},
      {"--mamba-head-dim", Kind::kInt},
      {"--mamba-num-groups", Kind::kInt},
      {"--mamba-num-heads", Kind::kInt},
      {"--quick-geglu", Kind::kSwitch},
      {"--glu-linear-offset", Kind::kString},
      {"--activation-func-clamp-value", Kind::kString},
      {"--sequence-parallel", Kind::kSwitch},
      {"--use-distributed-optimizer", Kind::kSwitch},
      {"--overlap-grad-reduce", Kind::kSwitch},
      {"--overlap-param-gather", Kind::kSwitch},
      {"--recompute-activations", Kind::kSwitch},
      {"--recompute-granularity", Kind::kString},
      {"--recompute-method", Kind::kString},
      {"--recompute-num-layers", Kind::kInt},
      {"--micro-batch-size", Kind::kInt},
      {"--global-batch-size", Kind::kInt},
      {"--bf16", Kind::kSwitch},
      {"--fp16", Kind::kSwitch},
      {"--fp8-format", Kind::kString},
      {"--fp8-recipe", Kind::kString},
      {"--fp4-format", Kind::kString},
      {"--fp4-recipe", Kind::kString},
      {"--fp8-param-gather", Kind::kSwitch},
      {"--fp8-dot-product-attention", Kind::kSwitch},
      {"--grad-reduce-in-bf16", Kind::kSwitch},
      {"--tp-comm-overlap", Kind::kSwitch},
      {"--cuda-graph-impl", Kind::kString},
      {"--cuda-graph-scope", Kind::kList},
      {"--overlap-moe-expert-parallel-comm", Kind::kSwitch},
      {"--delay-wgrad-compute", Kind::kSwitch},
      {"--use-megatron-fsdp", Kind::kSwitch},
      {"--data-parallel-sharding-strategy", Kind::kString},
      {"--cpu-offloading", Kind::kSwitch},
      {"--cpu-offloading-num-layers", Kind::kInt},
      // 2025-26 vocabulary (docs/sources.md §2.2-2.4).
      {"--multi-latent-attention", Kind::kSwitch},
      {"--q-lora-rank", Kind::kInt},
      {"--kv-lora-rank", Kind::kInt},
      {"--qk-head-dim", Kind::kInt},
      {"--qk-pos-emb-head-dim", Kind::kInt},
      {"--v-head-dim", Kind::kInt},
      {"--qk-layernorm", Kind::kSwitch},
      {"--window-size", Kind::kString},
      {"--window-attn-skip-freq", Kind::kInt},
      {"--mtp-num-layers", Kind::kInt},
      {"--mtp-use-repeated-layer", Kind::kSwitch},
      {"--disable-bias-linear", Kind::kSwitch},
      {"--rotary-base", Kind::kString},
      {"--attention-backend", Kind::kString},
      {"--moe-shared-expert-intermediate-size", Kind::kInt},
      {"--moe-latent-size", Kind::kInt},
      {"--moe-router-score-function", Kind::kString},
      {"--moe-router-pre-softmax", Kind::kSwitch},
      {"--moe-router-num-groups", Kind::kInt},
      {"--moe-router-group-topk", Kind::kInt},
      {"--moe-router-enable-expert-bias", Kind::kSwitch},
      {"--moe-router-force-load-balancing", Kind::kSwitch},
      {"--moe-expert-capacity-factor", Kind::kString},
      {"--moe-pad-expert-input-to-capacity", Kind::kSwitch},
      {"--moe-token-dispatcher-type", Kind::kString},
      {"--moe-grouped-gemm", Kind::kSwitch},
      {"--use-transformer-engine-op-fuser", Kind::kSwitch},
  };
  return *flags;
}

// The bound of each integer flag (search_spaces/limits.h). The values are
// multiplied (tp·pp·cp, pp·layers per stage, 4·hidden) and divided by, so an
// unbounded pair of 2^32 would wrap a product to 0 and divide by it.
const SizeLimit& FlagLimit(const std::string& flag) {
  static const auto* const kLimits = new std::map<std::string, SizeLimit>{
      {"--num-layers", limits::kNumLayers},
      {"--hidden-size", limits::kHiddenSize},
      {"--num-attention-heads", limits::kAttentionHeads},
      {"--num-query-groups", limits::kAttentionHeads},
      {"--kv-channels", limits::kKvChannels},
      {"--ffn-hidden-size", limits::kFfnHiddenSize},
      {"--moe-ffn-hidden-size", limits::kFfnHiddenSize},
      {"--vocab-size", limits::kVocabSize},
      {"--seq-length", limits::kSeqLength},
      {"--max-position-embeddings", limits::kSeqLength},
      {"--num-experts", limits::kNumExperts},
      {"--moe-router-topk", limits::kNumExperts},
      {"--virtual-pipeline-model-parallel-size", limits::kLayerCount},
      {"--num-layers-per-virtual-pipeline-stage", limits::kLayerCount},
      {"--recompute-num-layers", limits::kLayerCount},
      {"--micro-batch-size", limits::kMicroBatchSize},
      {"--global-batch-size", limits::kGlobalBatchSize},
      {"--q-lora-rank", limits::kHiddenSize},
      {"--kv-lora-rank", limits::kHiddenSize},
      {"--qk-head-dim", limits::kKvChannels},
      {"--qk-pos-emb-head-dim", limits::kKvChannels},
      {"--v-head-dim", limits::kKvChannels},
      {"--window-attn-skip-freq", limits::kNumLayers},
      {"--mtp-num-layers", limits::kLayerCount},
      {"--moe-shared-expert-intermediate-size", limits::kFfnHiddenSize},
      {"--moe-latent-size", limits::kHiddenSize},
      {"--moe-router-num-groups", limits::kNumExperts},
      {"--moe-router-group-topk", limits::kNumExperts},
  };
  const auto it = kLimits->find(flag);
  // --tensor-, --pipeline-, --context- and --expert-model-parallel-size.
  return it == kLimits->end() ? limits::kParallelSize : it->second;
}

const char* kIgnoredHint =
    "meshtune reads the flags that shape the parallel plan and skips common "
    "ones that do not (docs/export.md lists both)";

bool IsFlag(const std::string& token) {
  return token.size() > 2 && token[0] == '-' && token[1] == '-';
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// One flag as written: its name and the words that followed it.
struct Entry {
  std::string flag;
  std::vector<std::string> values;
  bool had_equals = false;  // "--flag=value"
};

std::string ClosestFlagHint(const std::string& flag) {
  // Edit distance is quadratic; a flag longer than any known one by far is
  // no typo of one (and a megabyte-long word must not cost seconds).
  if (flag.size() > 64) {
    return std::string(kIgnoredHint) + "; remove '" + Printable(flag) + "'";
  }
  std::vector<std::string> known;
  for (const auto& [name, kind] : PlanFlags()) known.push_back(name);
  for (const std::string& name : IgnoredMegatronFlags()) known.push_back(name);
  const std::string best =
      search_spaces::yaml_util::Closest(flag, known, 1).front();
  if (search_spaces::yaml_util::EditDistance(flag, best) <= 3) {
    return "did you mean '" + best + "'? " + kIgnoredHint;
  }
  return std::string(kIgnoredHint) + "; remove '" + Printable(flag) + "'";
}

// Megatron-FSDP's sharding strategy as meshtune models it: no_shard is
// plain DDP, optim the distributed optimizer, optim_grads_params
// TrainingSpec::megatron_fsdp; optim_grads (ZeRO-2) is not modelled.
// Megatron's default strategy is no_shard.
Status ApplyFsdpStrategy(const std::string& strategy,
                         search_spaces::TrainingSpec* training,
                         search_spaces::ParallelConfig* config) {
  if (strategy.empty() || strategy == "no_shard") return Status::Ok();
  if (strategy == "optim") {
    config->dist_opt = true;
    return Status::Ok();
  }
  if (strategy == "optim_grads_params") {
    training->megatron_fsdp = true;
    return Status::Ok();
  }
  return Status::InvalidArgument(
      "--data-parallel-sharding-strategy '" + Printable(strategy) +
          "' is not modelled (no_shard, optim and optim_grads_params are)",
      "use --data-parallel-sharding-strategy optim_grads_params or optim");
}

// --cuda-graph-impl and --cuda-graph-scope (its values joined by commas;
// "" = absent) into training->cuda_graphs.
Status ReadCudaGraphs(const std::string& impl, const std::string& scope,
                      search_spaces::TrainingSpec* training) {
  auto graphs = search_spaces::ParseCudaGraphs(impl, scope);
  if (!graphs.ok()) return graphs.status();
  training->cuda_graphs = graphs.value();
  return Status::Ok();
}

class ArgReader {
 public:
  // Groups `words` into entries and checks each flag's arity.
  Status Read(const std::vector<std::string>& words, ParsedMegatronArgs* out) {
    size_t i = 0;
    while (i < words.size()) {
      const std::string& word = words[i];
      if (!IsFlag(word)) {
        return Status::InvalidArgument(
            "unexpected '" + Printable(word) +
                "' where a Megatron argument (--flag) was expected",
            "each argument is --flag or --flag VALUE; quote values that "
            "contain spaces");
      }
      Entry e;
      const size_t eq = word.find('=');
      e.flag = word.substr(0, eq);
      if (eq != std::string::npos) {
        e.values.push_back(word.substr(eq + 1));
        e.had_equals = true;
      }
      ++i;
      while (i < words.size() && !IsFlag(words[i])) {
        e.values.push_back(words[i++]);
      }
      if (std::binary_search(IgnoredMegatronFlags().begin(),
                             IgnoredMegatronFlags().end(), e.flag)) {
        out->ignored.push_back(e.flag);
        out->ignored_values[e.flag] =
            search_spaces::yaml_util::Join(e.values, " ");
        continue;
      }
      const auto known = PlanFlags().find(e.flag);
      if (known == PlanFlags().end()) {
        return Status::InvalidArgument(
            "unknown Megatron argument '" + Printable(e.flag) + "'",
            ClosestFlagHint(e.flag));
      }
      MESHTUNE_RETURN_IF_ERROR(CheckArity(e, known->second));
      if (!entries_.emplace(e.flag, e).second) {
        return Status::InvalidArgument(
            e.flag + " given twice",
            "keep one of them (Megatron silently uses the last)");
      }
    }
    return Status::Ok();
  }

  bool Has(const std::string& flag) const { return entries_.count(flag) > 0; }
  // A list flag's values joined by commas ("" when absent).
  std::string List(const std::string& flag) const {
    const auto it = entries_.find(flag);
    return it == entries_.end()
               ? ""
               : search_spaces::yaml_util::Join(it->second.values, ",");
  }
  // The flag's value as written ("" when absent).
  std::string Text(const std::string& flag) const {
    const auto it = entries_.find(flag);
    return it == entries_.end() || it->second.values.empty()
               ? std::string()
               : it->second.values.front();
  }

  // The flag's value as a positive integer; `*out` untouched when absent.
  Status Int(const std::string& flag, int64_t* out) const {
    const auto it = entries_.find(flag);
    if (it == entries_.end()) return Status::Ok();
    const std::string& s = it->second.values.front();
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || end != s.c_str() + s.size() ||
        (errno == ERANGE && v != LLONG_MAX) || v < 1) {
      return Status::InvalidArgument(
          flag + ": expected a positive integer, got '" + Printable(s) + "'",
          "e.g. " + flag + " 8");
    }
    if (errno == ERANGE) {  // a whole number above INT64_MAX
      return search_spaces::AboveLimit(Printable(s), FlagLimit(flag), flag);
    }
    MESHTUNE_RETURN_IF_ERROR(
        search_spaces::CheckLimit(v, FlagLimit(flag), flag));
    *out = v;
    return Status::Ok();
  }

  Status Required(const std::string& flag, int64_t* out) const {
    if (!Has(flag)) {
      return Status::InvalidArgument(
          "missing " + flag,
          "the arguments must give the model shape and the batch: "
          "--num-layers, --hidden-size, --num-attention-heads, --seq-length, "
          "--global-batch-size");
    }
    return Int(flag, out);
  }

  // The flag's value, one of `allowed` (exact spelling, as argparse's
  // choices); "" when absent.
  StatusOr<std::string> Choice(const std::string& flag,
                               const std::vector<std::string>& allowed) const {
    const auto it = entries_.find(flag);
    if (it == entries_.end()) return std::string();
    const std::string& s = it->second.values.front();
    if (std::find(allowed.begin(), allowed.end(), s) == allowed.end()) {
      return Status::InvalidArgument(
          flag + ": expected one of " +
              search_spaces::yaml_util::Join(allowed) + ", got '" +
              Printable(s) + "'",
          "e.g. " + flag + " " + allowed.front());
    }
    return s;
  }

 private:
  static Status CheckArity(const Entry& e, Kind kind) {
    if (kind == Kind::kSwitch) {
      if (e.values.empty()) return Status::Ok();
      return Status::InvalidArgument(
          e.flag + " takes no value, got '" + Printable(e.values.front()) + "'",
          "write " + e.flag +
              " alone to turn it on; leave it out to turn it "
              "off");
    }
    if (e.values.empty() || (e.had_equals && e.values.front().empty())) {
      return Status::InvalidArgument(
          e.flag + ": missing value",
          kind == Kind::kInt
              ? "give it a positive integer, e.g. " + e.flag + " 8"
              : "give it a value, e.g. " + e.flag + " " + ExampleValue(e.flag));
    }
    if (e.values.size() > 1 && kind != Kind::kList) {
      return Status::InvalidArgument(
          "unexpected '" + Printable(e.values[1]) + "' after " + e.flag + " " +
              Printable(e.values[0]),
          e.flag + " takes one value; quote values that contain spaces");
    }
    return Status::Ok();
  }

  static std::string ExampleValue(const std::string& flag) {
    if (flag == "--normalization") return "RMSNorm";
    if (flag == "--position-embedding-type") return "rope";
    if (flag == "--recompute-granularity") return "selective";
    if (flag == "--recompute-method") return "uniform";
    if (flag == "--fp8-recipe") return "mxfp8";
    if (flag == "--fp4-format") return "e2m1";
    if (flag == "--fp4-recipe") return "nvfp4";
    if (flag == "--window-size") return "127,0";
    if (flag == "--rotary-base") return "10000";
    if (flag == "--attention-backend") return "flash";
    if (flag == "--cuda-graph-impl") return "transformer_engine";
    if (flag == "--cuda-graph-scope") return "attn moe_router";
    if (flag == "--moe-router-score-function") return "sigmoid";
    if (flag == "--moe-expert-capacity-factor") return "1.0";
    if (flag == "--moe-token-dispatcher-type") return "alltoall";
    if (flag == "--moe-layer-freq") return "'([0]*3+[1]*58)'";
    if (flag == "--hybrid-layer-pattern") return "'M*M*'";
    if (flag == "--pipeline-model-parallel-layout") return "'Et|(tt|)*30mL'";
    return "hybrid";  // --fp8-format
  }

  std::map<std::string, Entry> entries_;
};

// A flag's value as a positive finite number ("1.25", "1e6").
Status PositiveNumber(const ArgReader& r, const std::string& flag,
                      double* out) {
  if (!r.Has(flag)) return Status::Ok();
  const std::string s = r.Text(flag);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !(v > 0) ||
      !std::isfinite(v)) {
    return Status::InvalidArgument(
        flag + ": expected a positive number, got '" + Printable(s) + "'",
        "e.g. " + flag + " " + (flag == "--rotary-base" ? "10000" : "1.0"));
  }
  *out = v;
  return Status::Ok();
}

// --window-size "L,R" (Megatron's tuple; -1 = unlimited). A causal decoder
// attends to no later token, so R must be 0; "-1,-1" is full attention.
Status ReadWindowSize(const ArgReader& r, search_spaces::ModelSpec* m) {
  if (!r.Has("--window-size")) return Status::Ok();
  const std::string s = r.Text("--window-size");
  const size_t comma = s.find(',');
  auto whole = [](const std::string& text, int64_t* v) {
    errno = 0;
    char* end = nullptr;
    const long long x = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE ||
        x < -1 || x > limits::kSeqLength.max) {
      return false;
    }
    *v = x;
    return true;
  };
  int64_t left = 0, right = 0;
  if (comma == std::string::npos || !whole(s.substr(0, comma), &left) ||
      !whole(s.substr(comma + 1), &right)) {
    return Status::InvalidArgument(
        "--window-size: expected Megatron's 'LEFT,RIGHT' window in tokens, "
        "got '" +
            Printable(s) + "'",
        "e.g. --window-size 127,0 (GPT-OSS), -1,-1 for full attention");
  }
  if (left == -1 && right == -1) return Status::Ok();
  if (right != 0 || left < 0) {
    return Status::InvalidArgument(
        "--window-size " + Printable(s) +
            ": a causal decoder needs a left window >= 0 and a right window "
            "of 0",
        "e.g. --window-size 127,0");
  }
  m->window_size = left;
  return Status::Ok();
}

// Megatron's --ffn-hidden-size default (arguments.py validate_args).
int64_t DefaultFfnHiddenSize(int64_t hidden_size, bool swiglu) {
  if (swiglu) return (4 * hidden_size * 2 / 3) / 64 * 64;
  return 4 * hidden_size;
}

// The router: score function, pre-softmax, group-limited routing and the
// expert bias, with Megatron's checks (transformer_config.py).
Status ReadRouter(const ArgReader& r, search_spaces::ModelSpec* m) {
  using search_spaces::RouterScore;
  auto score = r.Choice("--moe-router-score-function",
                        {"softmax", "sigmoid", "sqrtsoftplus"});
  if (!score.ok()) return score.status();
  m->moe_router_score_function = *score == "sigmoid" ? RouterScore::kSigmoid
                                 : *score == "sqrtsoftplus"
                                     ? RouterScore::kSqrtSoftplus
                                     : RouterScore::kSoftmax;
  m->moe_router_pre_softmax = r.Has("--moe-router-pre-softmax");
  if (r.Has("--moe-router-num-groups") != r.Has("--moe-router-group-topk")) {
    return Status::InvalidArgument(
        "--moe-router-num-groups and --moe-router-group-topk go together",
        "give both (DeepSeek-V3: 8 and 4) or neither");
  }
  MESHTUNE_RETURN_IF_ERROR(
      r.Int("--moe-router-num-groups", &m->moe_router_num_groups));
  MESHTUNE_RETURN_IF_ERROR(
      r.Int("--moe-router-group-topk", &m->moe_router_group_topk));
  if (m->moe_router_num_groups > 0 &&
      (m->num_experts % m->moe_router_num_groups != 0 ||
       m->moe_router_group_topk > m->moe_router_num_groups)) {
    return Status::InvalidArgument(
        "--moe-router-num-groups " + std::to_string(m->moe_router_num_groups) +
            " with --moe-router-group-topk " +
            std::to_string(m->moe_router_group_topk) + " for " +
            std::to_string(m->num_experts) + " experts",
        "use a group count that divides the experts and a group top-k of at "
        "most the group count");
  }
  m->moe_router_enable_expert_bias = r.Has("--moe-router-enable-expert-bias");
  m->moe_router_force_load_balancing =
      r.Has("--moe-router-force-load-balancing");
  if (m->moe_router_enable_expert_bias &&
      m->moe_router_score_function == RouterScore::kSoftmax) {
    return Status::InvalidArgument(
        "--moe-router-enable-expert-bias needs --moe-router-score-function "
        "sigmoid or sqrtsoftplus",
        "add --moe-router-score-function sigmoid (DeepSeek-V3) or remove "
        "the expert bias");
  }
  return Status::Ok();
}

Status ReadModel(const ArgReader& r, ParsedMegatronArgs* out) {
  search_spaces::ModelSpec& m = out->model;
  MESHTUNE_RETURN_IF_ERROR(r.Required("--num-layers", &m.num_layers));
  MESHTUNE_RETURN_IF_ERROR(r.Required("--hidden-size", &m.hidden_size));
  MESHTUNE_RETURN_IF_ERROR(
      r.Required("--num-attention-heads", &m.num_attention_heads));
  m.num_query_groups = m.num_attention_heads;
  if (r.Has("--group-query-attention")) {
    if (!r.Has("--num-query-groups")) {
      return Status::InvalidArgument(
          "--group-query-attention needs --num-query-groups",
          "add --num-query-groups G (key/value heads, e.g. 8)");
    }
    MESHTUNE_RETURN_IF_ERROR(r.Int("--num-query-groups", &m.num_query_groups));
  } else if (r.Has("--num-query-groups")) {
    return Status::InvalidArgument(
        "--num-query-groups without --group-query-attention",
        "add --group-query-attention (Megatron ignores --num-query-groups "
        "without it)");
  }
  if (m.num_attention_heads % m.num_query_groups != 0) {
    return Status::InvalidArgument(
        "--num-query-groups " + std::to_string(m.num_query_groups) +
            " does not divide --num-attention-heads " +
            std::to_string(m.num_attention_heads),
        "use a divisor of the number of heads");
  }
  if (r.Has("--kv-channels")) {
    MESHTUNE_RETURN_IF_ERROR(r.Int("--kv-channels", &m.kv_channels));
  } else if (m.hidden_size % m.num_attention_heads != 0) {
    return Status::InvalidArgument(
        "--hidden-size " + std::to_string(m.hidden_size) +
            " is not divisible by --num-attention-heads " +
            std::to_string(m.num_attention_heads),
        "give the head dimension with --kv-channels");
  } else {
    m.kv_channels = m.hidden_size / m.num_attention_heads;
  }
  // Given only with Megatron's NullTokenizer; otherwise the tokenizer has it.
  MESHTUNE_RETURN_IF_ERROR(r.Int("--vocab-size", &m.vocab_size));
  if (r.Has("--swiglu")) m.activation = Activation::kSwiglu;
  if (r.Has("--squared-relu")) m.activation = Activation::kSquaredRelu;
  if (r.Has("--quick-geglu")) m.activation = Activation::kQuickGeglu;
  m.ffn_hidden_size =
      DefaultFfnHiddenSize(m.hidden_size, m.activation == Activation::kSwiglu);
  MESHTUNE_RETURN_IF_ERROR(r.Int("--ffn-hidden-size", &m.ffn_hidden_size));

  auto norm = r.Choice("--normalization", {"LayerNorm", "RMSNorm"});
  if (!norm.ok()) return norm.status();
  if (*norm == "RMSNorm") m.normalization = Normalization::kRMSNorm;
  auto pos = r.Choice("--position-embedding-type",
                      {"learned_absolute", "rope", "none"});
  if (!pos.ok()) return pos.status();
  if (*pos == "rope") m.position_embedding_type = PositionEmbedding::kRope;
  if (*pos == "none") m.position_embedding_type = PositionEmbedding::kNone;
  if (r.Has("--hybrid-layer-pattern")) {
    // Hybrid Mamba models (docs/sources.md §1.4): the pattern sets the layer
    // kinds and the MTP depths.
    m.hybrid_layer_pattern = r.Text("--hybrid-layer-pattern");
    auto parsed = search_spaces::ParseHybridPattern(m.hybrid_layer_pattern);
    if (!parsed.ok()) return parsed.status();
    m.mtp_num_layers = parsed->mtp_depths;
    MESHTUNE_RETURN_IF_ERROR(r.Int("--mamba-state-dim", &m.mamba_state_dim));
    MESHTUNE_RETURN_IF_ERROR(r.Int("--mamba-head-dim", &m.mamba_head_dim));
    MESHTUNE_RETURN_IF_ERROR(r.Int("--mamba-num-groups", &m.mamba_num_groups));
    MESHTUNE_RETURN_IF_ERROR(r.Int("--mamba-num-heads", &m.mamba_num_heads));
  }
  m.untie_embeddings_and_output_weights =
      r.Has("--untie-embeddings-and-output-weights");
  // Megatron's add_bias_linear defaults to true.
  m.add_bias_linear = !r.Has("--disable-bias-linear");
  MESHTUNE_RETURN_IF_ERROR(PositiveNumber(r, "--rotary-base", &m.rotary_base));
  m.qk_layernorm = r.Has("--qk-layernorm");
  MESHTUNE_RETURN_IF_ERROR(ReadWindowSize(r, &m));
  if (r.Has("--window-attn-skip-freq")) {
    if (m.window_size < 0) {
      return Status::InvalidArgument(
          "--window-attn-skip-freq without a sliding window",
          "add --window-size L,0 or remove --window-attn-skip-freq");
    }
    MESHTUNE_RETURN_IF_ERROR(
        r.Int("--window-attn-skip-freq", &m.window_attn_skip_freq));
  }
  m.multi_latent_attention = r.Has("--multi-latent-attention");
  if (m.multi_latent_attention) {
    // Megatron's CLI defaults (arguments.py _add_mla_args): no q latent,
    // kv_lora_rank 32, qk 128 + 64, v 128 (docs/sources.md §2.4).
    m.q_lora_rank = 0;
    m.kv_lora_rank = 32;
    m.qk_head_dim = 128;
    m.qk_pos_emb_head_dim = 64;
    m.v_head_dim = 128;
    MESHTUNE_RETURN_IF_ERROR(r.Int("--q-lora-rank", &m.q_lora_rank));
    MESHTUNE_RETURN_IF_ERROR(r.Int("--kv-lora-rank", &m.kv_lora_rank));
    MESHTUNE_RETURN_IF_ERROR(r.Int("--qk-head-dim", &m.qk_head_dim));
    MESHTUNE_RETURN_IF_ERROR(
        r.Int("--qk-pos-emb-head-dim", &m.qk_pos_emb_head_dim));
    MESHTUNE_RETURN_IF_ERROR(r.Int("--v-head-dim", &m.v_head_dim));
  } else {
    for (const char* flag : {"--q-lora-rank", "--kv-lora-rank", "--qk-head-dim",
                             "--qk-pos-emb-head-dim", "--v-head-dim"}) {
      if (r.Has(flag)) {
        return Status::InvalidArgument(
            std::string(flag) + " needs --multi-latent-attention",
            "add --multi-latent-attention for an MLA model, or remove " +
                std::string(flag));
      }
    }
  }
  if (r.Has("--mtp-num-layers")) {
    int64_t depths = 0;
    MESHTUNE_RETURN_IF_ERROR(r.Int("--mtp-num-layers", &depths));
    MESHTUNE_RETURN_IF_ERROR(
        CheckHybridMtpDepths(depths, m, "--hybrid-layer-pattern"));
    m.mtp_num_layers = depths;
  }
  m.mtp_use_repeated_layer = r.Has("--mtp-use-repeated-layer");

  MESHTUNE_RETURN_IF_ERROR(r.Int("--num-experts", &m.num_experts));
  if (m.is_moe()) {
    m.moe_router_topk = 2;  // Megatron's default
    MESHTUNE_RETURN_IF_ERROR(r.Int("--moe-router-topk", &m.moe_router_topk));
    MESHTUNE_RETURN_IF_ERROR(
        r.Int("--moe-ffn-hidden-size", &m.moe_ffn_hidden_size));
    if (r.Has("--moe-layer-freq")) {
      // An integer, or Megatron's list expression ("([0]*3+[1]*58)").
      const std::string v = r.Text("--moe-layer-freq");
      if (!v.empty() &&
          v.find_first_not_of("0123456789") == std::string::npos) {
        MESHTUNE_RETURN_IF_ERROR(r.Int("--moe-layer-freq", &m.moe_layer_freq));
      } else {
        auto pattern = search_spaces::ParseMoeLayerFreq(v);
        if (!pattern.ok()) return pattern.status();
        m.moe_layer_pattern = pattern.value();
      }
    }
    MESHTUNE_RETURN_IF_ERROR(r.Int("--moe-shared-expert-intermediate-size",
                                   &m.moe_shared_expert_intermediate_size));
    MESHTUNE_RETURN_IF_ERROR(r.Int("--moe-latent-size", &m.moe_latent_size));
    MESHTUNE_RETURN_IF_ERROR(ReadRouter(r, &m));
    MESHTUNE_RETURN_IF_ERROR(PositiveNumber(r, "--moe-expert-capacity-factor",
                                            &m.moe_expert_capacity_factor));
    m.moe_pad_expert_input_to_capacity =
        r.Has("--moe-pad-expert-input-to-capacity");
    if (m.moe_pad_expert_input_to_capacity &&
        !(m.moe_expert_capacity_factor > 0)) {
      // Megatron asserts a capacity factor for padding (arguments.py).
      return Status::InvalidArgument(
          "--moe-pad-expert-input-to-capacity needs "
          "--moe-expert-capacity-factor",
          "add --moe-expert-capacity-factor 1.0 or remove the padding flag");
    }
    auto dispatcher = r.Choice("--moe-token-dispatcher-type",
                               {"allgather", "alltoall", "flex"});
    if (!dispatcher.ok()) return dispatcher.status();
    // Megatron's default is allgather (not meshtune's alltoall).
    m.moe_token_dispatcher_type =
        *dispatcher == "alltoall" ? search_spaces::TokenDispatcher::kAlltoall
        : *dispatcher == "flex"   ? search_spaces::TokenDispatcher::kFlex
                                  : search_spaces::TokenDispatcher::kAllgather;
    // Megatron's default is off (meshtune's model default is on).
    m.moe_grouped_gemm = r.Has("--moe-grouped-gemm");
  } else {
    for (const char* flag :
         {"--moe-router-topk", "--moe-ffn-hidden-size", "--moe-layer-freq",
          "--expert-model-parallel-size",
          "--moe-shared-expert-intermediate-size", "--moe-latent-size",
          "--moe-router-score-function", "--moe-router-pre-softmax",
          "--moe-router-num-groups", "--moe-router-group-topk",
          "--moe-router-enable-expert-bias",
          "--moe-router-force-load-balancing", "--moe-expert-capacity-factor",
          "--moe-pad-expert-input-to-capacity", "--moe-token-dispatcher-type",
          "--moe-grouped-gemm"}) {
      if (r.Has(flag)) {
        return Status::InvalidArgument(
            std::string(flag) + " needs --num-experts",
            "add --num-experts E for a mixture-of-experts model, or remove " +
                std::string(flag));
      }
    }
  }
  // Transformer Engine's op fuser applies to dense MLPs too; the cost model
  // prices it on routed experts (the fused grouped MLP).
  m.use_transformer_engine_op_fuser =
      r.Has("--use-transformer-engine-op-fuser");
  return Status::Ok();
}

Status ReadPipeline(const ArgReader& r, ParsedMegatronArgs* out) {
  const int64_t layers = out->model.num_layers;
  search_spaces::ParallelConfig& c = out->config;
  const bool embedding = r.Has("--account-for-embedding-in-pipeline-split");
  const bool loss = r.Has("--account-for-loss-in-pipeline-split");
  if (embedding != loss) {
    return Status::InvalidArgument(
        std::string("--account-for-") + (embedding ? "embedding" : "loss") +
            "-in-pipeline-split without --account-for-" +
            (embedding ? "loss" : "embedding") + "-in-pipeline-split",
        "give both (meshtune's layout counts the embedding and the loss as "
        "one layer each) or neither");
  }
  if (r.Has("--pipeline-model-parallel-layout")) {
    // The layout sets the virtual stages and the layers of each
    // (search_spaces/pipeline_layout.h); Megatron allows no other
    // interleaving flag with it.
    if (embedding || r.Has("--virtual-pipeline-model-parallel-size") ||
        r.Has("--num-layers-per-virtual-pipeline-stage")) {
      return Status::InvalidArgument(
          "--pipeline-model-parallel-layout with another pipeline split flag",
          "keep the layout alone; it sets the virtual stages");
    }
    auto parsed = search_spaces::ParsePipelineLayout(
        r.Text("--pipeline-model-parallel-layout"), layers, c.pp,
        out->model.mtp_num_layers);
    if (!parsed.ok()) return parsed.status();
    c.vpp = parsed->vpp;
    if (!parsed->even) {
      c.layout_first_layers = parsed->first_layers;
      c.layout_last_layers = parsed->last_layers;
    }
    return Status::Ok();
  }
  const bool has_vpp = r.Has("--virtual-pipeline-model-parallel-size");
  const bool has_per_stage = r.Has("--num-layers-per-virtual-pipeline-stage");
  if (has_vpp && has_per_stage) {
    return Status::InvalidArgument(
        "--virtual-pipeline-model-parallel-size and "
        "--num-layers-per-virtual-pipeline-stage both set the interleaving",
        "keep one of them");
  }
  if (has_vpp) {
    MESHTUNE_RETURN_IF_ERROR(
        r.Int("--virtual-pipeline-model-parallel-size", &c.vpp));
  } else if (has_per_stage) {
    int64_t per_stage = 0;
    MESHTUNE_RETURN_IF_ERROR(
        r.Int("--num-layers-per-virtual-pipeline-stage", &per_stage));
    // Megatron: vpp = (num_layers / pp) / layers per virtual stage, with the
    // embedding and loss counted as layers when the split accounts for them.
    const int64_t units = layers + (embedding ? 2 : 0);
    if (units % (c.pp * per_stage) != 0) {
      return Status::InvalidArgument(
          "--num-layers-per-virtual-pipeline-stage " +
              std::to_string(per_stage) + " does not divide the " +
              std::to_string(units) + " layers per " + std::to_string(c.pp) +
              " pipeline stages evenly",
          "use a divisor of num_layers / pipeline-model-parallel-size");
    }
    c.vpp = units / (c.pp * per_stage);
  }
  if (c.vpp > 1 && c.pp < 2) {
    return Status::InvalidArgument(
        "interleaving (vpp " + std::to_string(c.vpp) +
            ") needs --pipeline-model-parallel-size 2 or more",
        "raise --pipeline-model-parallel-size or drop the virtual pipeline "
        "flag");
  }
  const std::string split = "--num-layers " + std::to_string(layers) +
                            " over pp " + std::to_string(c.pp) + " x vpp " +
                            std::to_string(c.vpp);
  if (!search_spaces::PipelineLayout::Valid(layers, c.pp, c.vpp)) {
    return Status::InvalidArgument(
        split + " virtual stages has no even layer split",
        "choose pp·vpp dividing num_layers (or num_layers + 2)");
  }
  const bool needs_accounting =
      search_spaces::PipelineLayout::AccountsEmbeddingAndLoss(layers, c.pp,
                                                              c.vpp);
  if (needs_accounting && !embedding) {
    return Status::InvalidArgument(
        split +
            " splits evenly only when the embedding and loss count as "
            "layers",
        "add --account-for-embedding-in-pipeline-split and "
        "--account-for-loss-in-pipeline-split");
  }
  if (!needs_accounting && embedding) {
    return Status::InvalidArgument(
        split +
            " splits evenly without the --account-for-*-in-pipeline-split "
            "flags, which would make the split uneven",
        "remove --account-for-embedding-in-pipeline-split and "
        "--account-for-loss-in-pipeline-split");
  }
  return Status::Ok();
}

Status ReadParallel(const ArgReader& r, ParsedMegatronArgs* out) {
  search_spaces::ParallelConfig& c = out->config;
  MESHTUNE_RETURN_IF_ERROR(r.Int("--tensor-model-parallel-size", &c.tp));
  MESHTUNE_RETURN_IF_ERROR(r.Int("--pipeline-model-parallel-size", &c.pp));
  MESHTUNE_RETURN_IF_ERROR(r.Int("--context-parallel-size", &c.cp));
  MESHTUNE_RETURN_IF_ERROR(r.Int("--expert-model-parallel-size", &c.ep));
  if (r.Has("--expert-tensor-parallel-size")) {
    MESHTUNE_RETURN_IF_ERROR(r.Int("--expert-tensor-parallel-size", &c.etp));
  }
  MESHTUNE_RETURN_IF_ERROR(ReadPipeline(r, out));
  c.sp = r.Has("--sequence-parallel");
  if (c.sp && c.tp == 1) {
    // Megatron turns sequence parallelism off without tensor parallelism.
    c.sp = false;
    out->notes.push_back(
        "--sequence-parallel is off with --tensor-model-parallel-size 1");
  }
  c.dist_opt = r.Has("--use-distributed-optimizer");
  out->overlap_grad_reduce = r.Has("--overlap-grad-reduce");
  out->overlap_param_gather = r.Has("--overlap-param-gather");
  if (out->overlap_param_gather && !c.dist_opt) {
    return Status::InvalidArgument(
        "--overlap-param-gather needs --use-distributed-optimizer",
        "add --use-distributed-optimizer or remove --overlap-param-gather");
  }
  MESHTUNE_RETURN_IF_ERROR(r.Int("--micro-batch-size", &c.mbs));

  auto granularity_or =
      r.Choice("--recompute-granularity", {"full", "selective"});
  if (!granularity_or.ok()) return granularity_or.status();
  std::string granularity = granularity_or.value();
  if (r.Has("--recompute-activations")) {
    if (!granularity.empty()) {
      return Status::InvalidArgument(
          "--recompute-activations and --recompute-granularity both set "
          "recomputation",
          "keep --recompute-granularity (--recompute-activations is its old "
          "spelling of selective)");
    }
    granularity = "selective";
  }
  auto method = r.Choice("--recompute-method", {"uniform", "block"});
  if (!method.ok()) return method.status();
  if (granularity == "full") {
    if (method->empty()) {
      return Status::InvalidArgument(
          "--recompute-granularity full needs --recompute-method",
          "add --recompute-method uniform (or block) and "
          "--recompute-num-layers N");
    }
    c.recompute.granularity = RecomputeGranularity::kFull;
    c.recompute.method = *method == "block" ? RecomputeMethod::kBlock
                                            : RecomputeMethod::kUniform;
    c.recompute.num_layers = 1;  // Megatron's default
    MESHTUNE_RETURN_IF_ERROR(
        r.Int("--recompute-num-layers", &c.recompute.num_layers));
  } else {
    for (const char* flag : {"--recompute-method", "--recompute-num-layers"}) {
      if (r.Has(flag)) {
        return Status::InvalidArgument(
            std::string(flag) + " applies only to --recompute-granularity full",
            "remove " + std::string(flag) +
                " or add --recompute-granularity full");
      }
    }
    if (granularity == "selective") {
      c.recompute.granularity = RecomputeGranularity::kSelective;
    }
  }
  return Status::Ok();
}

Status ReadTraining(const ArgReader& r, ParsedMegatronArgs* out) {
  search_spaces::TrainingSpec& t = out->training;
  MESHTUNE_RETURN_IF_ERROR(r.Required("--seq-length", &t.seq_length));
  MESHTUNE_RETURN_IF_ERROR(
      r.Required("--global-batch-size", &t.global_batch_size));
  out->model.seq_length = t.seq_length;
  MESHTUNE_RETURN_IF_ERROR(
      r.Int("--max-position-embeddings", &out->model.seq_length));

  const bool bf16 = r.Has("--bf16");
  const bool fp16 = r.Has("--fp16");
  auto fp8 = r.Choice("--fp8-format", {"hybrid", "e4m3"});
  if (!fp8.ok()) return fp8.status();
  auto fp8_recipe =
      r.Choice("--fp8-recipe", {"delayed", "tensorwise", "blockwise", "mxfp8"});
  if (!fp8_recipe.ok()) return fp8_recipe.status();
  auto fp4 = r.Choice("--fp4-format", {"e2m1"});
  if (!fp4.ok()) return fp4.status();
  auto fp4_recipe = r.Choice("--fp4-recipe", {"nvfp4"});
  if (!fp4_recipe.ok()) return fp4_recipe.status();
  if (!fp4->empty() && !fp8->empty()) {
    return Status::InvalidArgument(
        "--fp4-format and --fp8-format are exclusive in Megatron",
        "keep one of them");
  }
  if (bf16 && fp16) {
    return Status::InvalidArgument("--bf16 and --fp16 contradict each other",
                                   "keep one of them");
  }
  if (!bf16 && !fp16) {
    return Status::InvalidArgument(
        "no precision flag: neither --bf16 nor --fp16",
        "add --bf16 (meshtune plans 16-bit and fp8 training, not fp32)");
  }
  if (!fp8->empty()) {
    if (fp16) {
      return Status::InvalidArgument(
          "--fp8-format with --fp16: meshtune models fp8 GEMMs inside a bf16 "
          "model",
          "use --bf16 with --fp8-format");
    }
    t.precision = Precision::kFp8;
    if (*fp8_recipe == "tensorwise") t.precision = Precision::kFp8Tensorwise;
    if (*fp8_recipe == "blockwise") t.precision = Precision::kFp8Blockwise;
    if (*fp8_recipe == "mxfp8") t.precision = Precision::kMxfp8;
  } else if (!fp4->empty()) {
    if (fp16) {
      return Status::InvalidArgument(
          "--fp4-format with --fp16: NVFP4 GEMMs run inside a bf16 model",
          "use --bf16 with --fp4-format");
    }
    t.precision = Precision::kNvfp4;
  } else {
    t.precision = fp16 ? Precision::kFp16 : Precision::kBf16;
  }
  t.fp8_param_gather = r.Has("--fp8-param-gather");
  if (t.fp8_param_gather && !search_spaces::IsFp8(t.precision)) {
    return Status::InvalidArgument("--fp8-param-gather needs --fp8-format",
                                   "add --fp8-format hybrid or remove "
                                   "--fp8-param-gather");
  }
  t.fp8_dot_product_attention = r.Has("--fp8-dot-product-attention");
  if (t.fp8_dot_product_attention && !search_spaces::IsFp8(t.precision)) {
    return Status::InvalidArgument(
        "--fp8-dot-product-attention needs --fp8-format",
        "add --fp8-format hybrid or remove --fp8-dot-product-attention");
  }
  t.grad_reduce_in_bf16 = r.Has("--grad-reduce-in-bf16");
  if (r.Has("--use-megatron-fsdp")) {
    auto strategy =
        r.Choice("--data-parallel-sharding-strategy",
                 {"no_shard", "optim", "optim_grads", "optim_grads_params"});
    if (!strategy.ok()) return strategy.status();
    MESHTUNE_RETURN_IF_ERROR(ApplyFsdpStrategy(*strategy, &t, &out->config));
  }
  MESHTUNE_RETURN_IF_ERROR(
      r.Int("--cpu-offloading-num-layers", &t.cpu_offloading_num_layers));
  auto backend = r.Choice("--attention-backend",
                          {"flash", "fused", "unfused", "local", "auto"});
  if (!backend.ok()) return backend.status();
  out->attention_backend = *backend;
  t.moe_ep_overlap = r.Has("--overlap-moe-expert-parallel-comm");
  MESHTUNE_RETURN_IF_ERROR(
      CheckDelayWgrad(r.Has("--delay-wgrad-compute"), t.moe_ep_overlap));
  MESHTUNE_RETURN_IF_ERROR(ReadCudaGraphs(r.Text("--cuda-graph-impl"),
                                          r.List("--cuda-graph-scope"), &t));
  t.tp_comm_overlap = r.Has("--tp-comm-overlap");
  if (t.tp_comm_overlap && !out->config.sp) {
    // Megatron asserts sequence parallelism for --tp-comm-overlap.
    return Status::InvalidArgument(
        "--tp-comm-overlap needs --sequence-parallel with "
        "--tensor-model-parallel-size 2 or more",
        "add --sequence-parallel or remove --tp-comm-overlap");
  }
  return Status::Ok();
}

}  // namespace

// The allow-list, by topic ('#' lines are headings, not flags).
constexpr const char* kIgnoredFlags = R"(
# Optimizer and schedule.
--lr --min-lr --lr-decay-style --lr-decay-iters --lr-decay-samples
--lr-warmup-iters --lr-warmup-samples --lr-warmup-fraction --weight-decay
--adam-beta1 --adam-beta2 --adam-eps --clip-grad --optimizer
--init-method-std --loss-scale --initial-loss-scale --train-iters
--train-samples --exit-interval --exit-duration-in-mins --seed
# Regularisation (same work with or without).
--hidden-dropout --attention-dropout
# Data and tokenizer.
--data-path --train-data-path --valid-data-path --test-data-path
--data-cache-path --split --vocab-file --merge-file --tokenizer-type
--tokenizer-model --make-vocab-size-divisible-by --num-workers --mock-data
# Checkpoints, evaluation and logging.
--save --load --save-interval --no-load-optim --no-load-rng --ckpt-format
--eval-interval --eval-iters --log-interval --log-throughput
--log-timers-to-tensorboard --tensorboard-dir --wandb-project
--wandb-exp-name --timing-log-level
# Kernels and implementation choices that keep the plan.
--use-mcore-models --transformer-impl --use-flash-attn
--distributed-backend --attention-softmax-in-fp32
--no-masked-softmax-fusion --no-bias-gelu-fusion --no-bias-dropout-fusion
--norm-epsilon --rotary-percent
--use-rotary-position-embeddings --manual-gc --manual-gc-interval
--bucket-size --ddp-bucket-size --cross-entropy-loss-fusion
--cross-entropy-fusion-impl
--moe-router-load-balancing-type --moe-aux-loss-coeff
# Which tokens a full expert drops (probs or position): the same work.
--moe-token-drop-policy
# The GLU weights' row layout the fused grouped MLP reads: the same work.
--moe-mlp-glu-interleave-size
)";

const std::vector<std::string>& IgnoredMegatronFlags() {
  static const auto* flags = [] {
    auto* v = new std::vector<std::string>;
    std::istringstream lines(kIgnoredFlags);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream words(line);
      std::string word;
      while (words >> word) v->push_back(word);
    }
    std::sort(v->begin(), v->end());
    return v;
  }();
  return *flags;
}

namespace {

// The flags ApplyMegatronFlags reads (see the header), with their kinds;
// kString covers the numbers, which are parsed where they are read.
const std::map<std::string, Kind>& RunFlags() {
  static const auto* flags = new std::map<std::string, Kind>{
      {"--use-distributed-optimizer", Kind::kSwitch},
      {"--tp-comm-overlap", Kind::kSwitch},
      {"--cuda-graph-impl", Kind::kString},
      {"--cuda-graph-scope", Kind::kList},
      {"--overlap-moe-expert-parallel-comm", Kind::kSwitch},
      {"--delay-wgrad-compute", Kind::kSwitch},
      {"--grad-reduce-in-bf16", Kind::kSwitch},
      {"--fp8-param-gather", Kind::kSwitch},
      {"--fp8-dot-product-attention", Kind::kSwitch},
      {"--use-megatron-fsdp", Kind::kSwitch},
      {"--data-parallel-sharding-strategy", Kind::kString},
      {"--cpu-offloading", Kind::kSwitch},
      {"--cpu-offloading-num-layers", Kind::kString},
      {"--overlap-grad-reduce", Kind::kSwitch},
      {"--overlap-param-gather", Kind::kSwitch},
      {"--cross-entropy-loss-fusion", Kind::kSwitch},
      {"--cross-entropy-fusion-impl", Kind::kString},
      {"--cp-comm-type", Kind::kString},
      {"--transformer-impl", Kind::kString},
      {"--moe-layer-freq", Kind::kString},
      {"--moe-token-dispatcher-type", Kind::kString},
      {"--moe-expert-capacity-factor", Kind::kString},
      {"--moe-pad-expert-input-to-capacity", Kind::kSwitch},
      {"--moe-grouped-gemm", Kind::kSwitch},
      {"--use-transformer-engine-op-fuser", Kind::kSwitch},
      {"--moe-permute-fusion", Kind::kSwitch},
      {"--moe-router-pre-softmax", Kind::kSwitch},
      {"--moe-router-force-load-balancing", Kind::kSwitch},
      {"--moe-router-topk-scaling-factor", Kind::kString},
      {"--moe-router-num-groups", Kind::kInt},
      {"--moe-router-group-topk", Kind::kInt},
      {"--qk-layernorm", Kind::kSwitch},
      {"--mtp-num-layers", Kind::kString},
      {"--mtp-use-repeated-layer", Kind::kSwitch},
      {"--disable-bias-linear", Kind::kSwitch},
      {"--rotary-base", Kind::kString},
      {"--attention-backend", Kind::kString},
  };
  return *flags;
}

// Accepted flags that do not change the cost model's inputs. The attention
// kernel a row is priced with follows its software generation
// (tuner/accuracy/rules.h), not this flag.
bool WithoutEffect(const std::string& flag) {
  return flag == "--transformer-impl" || flag == "--moe-permute-fusion" ||
         flag == "--moe-router-topk-scaling-factor" ||
         flag == "--attention-backend";
}

const char* kRunFlagsHint =
    "the megatron_args column takes the run's flags beyond the CSV's columns "
    "(tuner/interop/megatron_args_parser.h lists them)";

StatusOr<int64_t> PositiveInt(const std::string& flag, const std::string& s,
                              const SizeLimit& limit) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE || v < 1) {
    return Status::InvalidArgument(
        flag + ": expected a positive integer, got '" + Printable(s) + "'",
        "e.g. " + flag + " 4");
  }
  MESHTUNE_RETURN_IF_ERROR(search_spaces::CheckLimit(v, limit, flag));
  return static_cast<int64_t>(v);
}

StatusOr<double> PositiveReal(const std::string& flag, const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !(v > 0) ||
      !std::isfinite(v)) {
    return Status::InvalidArgument(
        flag + ": expected a positive number, got '" + Printable(s) + "'",
        "e.g. " + flag + " 1.0");
  }
  return v;
}

}  // namespace

StatusOr<AppliedMegatronFlags> ApplyMegatronFlags(
    const std::string& text, search_spaces::ModelSpec* model,
    search_spaces::TrainingSpec* training,
    search_spaces::ParallelConfig* config) {
  auto words = SplitShellWords(text, "the Megatron arguments");
  if (!words.ok()) return words.status();
  AppliedMegatronFlags out;
  std::map<std::string, std::string> values;  // flag -> value ("" switches)
  const std::vector<std::string>& args = words.value();
  size_t i = 0;
  while (i < args.size()) {
    const std::string& word = args[i];
    if (!IsFlag(word)) {
      return Status::InvalidArgument(
          "unexpected '" + Printable(word) +
              "' where a Megatron argument (--flag) was expected",
          "each argument is --flag or --flag VALUE; quote values that "
          "contain spaces");
    }
    const size_t eq = word.find('=');
    const std::string flag = word.substr(0, eq);
    std::vector<std::string> flag_values;
    if (eq != std::string::npos) flag_values.push_back(word.substr(eq + 1));
    ++i;
    while (i < args.size() && !IsFlag(args[i]))
      flag_values.push_back(args[i++]);
    // The flags read here first: the full parser skips some of them
    // (--moe-grouped-gemm, --moe-token-dispatcher-type) as plan-neutral.
    const auto known = RunFlags().find(flag);
    if (known == RunFlags().end()) {
      if (std::binary_search(IgnoredMegatronFlags().begin(),
                             IgnoredMegatronFlags().end(), flag)) {
        out.without_effect.push_back(flag);
        continue;
      }
      return Status::InvalidArgument(
          "unknown Megatron argument '" + Printable(flag) + "'", kRunFlagsHint);
    }
    if (known->second == Kind::kSwitch && !flag_values.empty()) {
      return Status::InvalidArgument(flag + " takes no value, got '" +
                                         Printable(flag_values.front()) + "'",
                                     "write " + flag + " alone to turn it on");
    }
    if (known->second == Kind::kList && !flag_values.empty()) {
      // One value, its words joined by commas.
      flag_values = {search_spaces::yaml_util::Join(flag_values, ",")};
    }
    if (known->second != Kind::kSwitch &&
        (flag_values.size() != 1 || flag_values.front().empty())) {
      return Status::InvalidArgument(
          flag + (flag_values.empty() ? ": missing value"
                                      : " takes one value, got " +
                                            std::to_string(flag_values.size())),
          "give it one value; quote values that contain spaces");
    }
    if (!values.emplace(flag, flag_values.empty() ? "" : flag_values.front())
             .second) {
      return Status::InvalidArgument(
          flag + " given twice",
          "keep one of them (Megatron silently uses the last)");
    }
    if (WithoutEffect(flag)) out.without_effect.push_back(flag);
  }
  auto has = [&](const char* flag) { return values.count(flag) > 0; };

  if (has("--transformer-impl") &&
      values["--transformer-impl"] != "transformer_engine" &&
      values["--transformer-impl"] != "local") {
    return Status::InvalidArgument(
        "--transformer-impl: expected one of transformer_engine, local, got '" +
            Printable(values["--transformer-impl"]) + "'",
        "e.g. --transformer-impl transformer_engine");
  }
  if (has("--attention-backend")) {
    const std::string& v = values["--attention-backend"];
    if (v != "flash" && v != "fused" && v != "unfused" && v != "local" &&
        v != "auto") {
      return Status::InvalidArgument(
          "--attention-backend: expected one of flash, fused, unfused, local, "
          "auto, got '" +
              Printable(v) + "'",
          "e.g. --attention-backend fused");
    }
  }
  if (has("--rotary-base")) {
    auto v = PositiveReal("--rotary-base", values["--rotary-base"]);
    if (!v.ok()) return v.status();
    model->rotary_base = v.value();
  }
  if (has("--disable-bias-linear")) model->add_bias_linear = false;
  if (has("--moe-router-topk-scaling-factor")) {
    auto v = PositiveReal("--moe-router-topk-scaling-factor",
                          values["--moe-router-topk-scaling-factor"]);
    if (!v.ok()) return v.status();
  }
  // MoE flags need experts (Megatron ignores or rejects them otherwise).
  for (const auto& [flag, value] : values) {
    if (flag.rfind("--moe-", 0) == 0 && !model->is_moe()) {
      return Status::InvalidArgument(
          flag + " needs a mixture-of-experts model, and '" +
              Printable(model->name.empty() ? model->display_name
                                            : model->name) +
              "' has no experts",
          "name an MoE preset in the model column, or remove " + flag);
    }
  }
  if (has("--moe-layer-freq")) {
    const std::string& v = values["--moe-layer-freq"];
    const bool integer =
        !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
    if (integer) {
      auto freq = PositiveInt("--moe-layer-freq", v, limits::kLayerCount);
      if (!freq.ok()) return freq.status();
      model->moe_layer_freq = freq.value();
      model->moe_layer_pattern.clear();
    } else {
      auto pattern = search_spaces::ParseMoeLayerFreq(v);
      if (!pattern.ok()) return pattern.status();
      if (static_cast<int64_t>(pattern.value().size()) != model->num_layers) {
        return Status::InvalidArgument(
            "--moe-layer-freq " + Printable(v) + " has " +
                std::to_string(pattern.value().size()) + " entries for " +
                std::to_string(model->num_layers) + " layers",
            "give one 0/1 entry per decoder layer");
      }
      model->moe_layer_pattern = std::move(pattern).value();
    }
  }
  if (has("--moe-token-dispatcher-type")) {
    const std::string& v = values["--moe-token-dispatcher-type"];
    if (v == "allgather") {
      model->moe_token_dispatcher_type =
          search_spaces::TokenDispatcher::kAllgather;
    } else if (v == "alltoall") {
      model->moe_token_dispatcher_type =
          search_spaces::TokenDispatcher::kAlltoall;
    } else if (v == "flex") {
      model->moe_token_dispatcher_type = search_spaces::TokenDispatcher::kFlex;
    } else {
      return Status::InvalidArgument(
          "--moe-token-dispatcher-type: expected one of allgather, alltoall, "
          "flex, got '" +
              Printable(v) + "'",
          "e.g. --moe-token-dispatcher-type alltoall");
    }
  }
  if (has("--moe-expert-capacity-factor")) {
    auto v = PositiveReal("--moe-expert-capacity-factor",
                          values["--moe-expert-capacity-factor"]);
    if (!v.ok()) return v.status();
    model->moe_expert_capacity_factor = v.value();
  }
  if (has("--moe-pad-expert-input-to-capacity")) {
    if (!(model->moe_expert_capacity_factor > 0)) {
      // Megatron asserts a capacity factor for padding (arguments.py).
      return Status::InvalidArgument(
          "--moe-pad-expert-input-to-capacity needs "
          "--moe-expert-capacity-factor",
          "add --moe-expert-capacity-factor 1.0 or remove the padding flag");
    }
    model->moe_pad_expert_input_to_capacity = true;
  }
  if (has("--moe-grouped-gemm")) model->moe_grouped_gemm = true;
  if (has("--use-transformer-engine-op-fuser")) {
    model->use_transformer_engine_op_fuser = true;
  }
  if (has("--moe-router-pre-softmax")) model->moe_router_pre_softmax = true;
  if (has("--moe-router-force-load-balancing")) {
    model->moe_router_force_load_balancing = true;
  }
  if (has("--moe-router-num-groups")) {
    auto v =
        PositiveInt("--moe-router-num-groups",
                    values["--moe-router-num-groups"], limits::kNumExperts);
    if (!v.ok()) return v.status();
    if (model->num_experts % v.value() != 0) {
      return Status::InvalidArgument(
          "--moe-router-num-groups " + std::to_string(v.value()) +
              " does not divide the " + std::to_string(model->num_experts) +
              " experts",
          "use a divisor of the number of experts");
    }
    model->moe_router_num_groups = v.value();
  }
  if (has("--moe-router-group-topk")) {
    auto v =
        PositiveInt("--moe-router-group-topk",
                    values["--moe-router-group-topk"], limits::kNumExperts);
    if (!v.ok()) return v.status();
    if (model->moe_router_num_groups == 0 ||
        v.value() > model->moe_router_num_groups) {
      return Status::InvalidArgument(
          "--moe-router-group-topk " + std::to_string(v.value()) +
              " needs --moe-router-num-groups of at least that many groups",
          "add --moe-router-num-groups G with G >= " +
              std::to_string(v.value()));
    }
    model->moe_router_group_topk = v.value();
  }
  if (has("--qk-layernorm")) model->qk_layernorm = true;
  if (has("--mtp-num-layers")) {
    auto depths = PositiveInt("--mtp-num-layers", values["--mtp-num-layers"],
                              limits::kLayerCount);
    if (!depths.ok()) return depths.status();
    MESHTUNE_RETURN_IF_ERROR(CheckHybridMtpDepths(depths.value(), *model,
                                                  "the hybrid layer pattern"));
    model->mtp_num_layers = depths.value();
  }
  if (has("--mtp-use-repeated-layer")) model->mtp_use_repeated_layer = true;

  if (has("--use-distributed-optimizer")) config->dist_opt = true;
  if (has("--grad-reduce-in-bf16")) training->grad_reduce_in_bf16 = true;
  if (has("--use-megatron-fsdp")) {
    MESHTUNE_RETURN_IF_ERROR(ApplyFsdpStrategy(
        values["--data-parallel-sharding-strategy"], training, config));
  }
  if (has("--cpu-offloading-num-layers")) {
    auto n =
        PositiveInt("--cpu-offloading-num-layers",
                    values["--cpu-offloading-num-layers"], limits::kNumLayers);
    if (!n.ok()) return n.status();
    training->cpu_offloading_num_layers = n.value();
  }
  // Megatron's defaults: no DP overlap, no fused cross-entropy, p2p CP.
  training->overlap_grad_reduce = has("--overlap-grad-reduce");
  training->overlap_param_gather = has("--overlap-param-gather");
  training->cross_entropy_loss_fusion = has("--cross-entropy-loss-fusion");
  if (has("--cross-entropy-fusion-impl")) {
    const std::string& v = values["--cross-entropy-fusion-impl"];
    if (v != "native" && v != "te") {
      return Status::InvalidArgument(
          "--cross-entropy-fusion-impl: expected native or te, got '" +
              Printable(v) + "'",
          "e.g. --cross-entropy-fusion-impl te");
    }
    training->cross_entropy_fusion_impl =
        v == "te" ? search_spaces::CrossEntropyFusionImpl::kTe
                  : search_spaces::CrossEntropyFusionImpl::kNative;
  }
  if (has("--cp-comm-type")) {
    const std::string& v = values["--cp-comm-type"];
    if (v != "p2p" && v != "a2a") {
      return Status::InvalidArgument(
          "--cp-comm-type: expected p2p or a2a, got '" + Printable(v) + "'",
          "e.g. --cp-comm-type a2a");
    }
    training->cp_comm_a2a = v == "a2a";
  }
  if (has("--tp-comm-overlap")) {
    if (!config->sp || config->tp < 2) {
      return Status::InvalidArgument(
          "--tp-comm-overlap needs sequence parallelism with tp 2 or more",
          "set sp 1 and tp > 1 in the row, or remove --tp-comm-overlap");
    }
    training->tp_comm_overlap = true;
  }
  MESHTUNE_RETURN_IF_ERROR(CheckDelayWgrad(
      has("--delay-wgrad-compute"), has("--overlap-moe-expert-parallel-comm")));
  MESHTUNE_RETURN_IF_ERROR(ReadCudaGraphs(
      values["--cuda-graph-impl"], values["--cuda-graph-scope"], training));
  if (has("--overlap-moe-expert-parallel-comm")) {
    training->moe_ep_overlap = true;
  }
  if (has("--fp8-param-gather")) {
    if (!search_spaces::IsQuantized(training->precision) || !config->dist_opt) {
      return Status::InvalidArgument(
          "--fp8-param-gather needs an fp8/fp4 precision and "
          "--use-distributed-optimizer",
          "remove --fp8-param-gather or fix the row's precision");
    }
    training->fp8_param_gather = true;
  }
  if (has("--fp8-dot-product-attention")) {
    if (!search_spaces::IsFp8(training->precision)) {
      return Status::InvalidArgument(
          "--fp8-dot-product-attention needs an fp8 precision",
          "remove --fp8-dot-product-attention or fix the row's precision");
    }
    training->fp8_dot_product_attention = true;
  }
  return out;
}

StatusOr<ParsedMegatronArgs> ParseMegatronArgs(const std::string& text,
                                               int64_t num_gpus) {
  auto words = SplitShellWords(text, "the Megatron arguments");
  if (!words.ok()) return words.status();
  std::vector<std::string> args = std::move(words).value();
  // Drop a launcher prefix ("torchrun ... pretrain_gpt.py").
  for (size_t i = args.size(); i > 0; --i) {
    if (!IsFlag(args[i - 1]) && EndsWith(args[i - 1], ".py")) {
      args.erase(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  if (args.empty()) {
    return Status::InvalidArgument(
        "no Megatron arguments given",
        "paste the pretrain_gpt.py arguments, e.g. the output of 'tune export "
        "--format megatron'");
  }
  ParsedMegatronArgs out;
  ArgReader reader;
  MESHTUNE_RETURN_IF_ERROR(reader.Read(args, &out));
  MESHTUNE_RETURN_IF_ERROR(ReadModel(reader, &out));
  MESHTUNE_RETURN_IF_ERROR(ReadParallel(reader, &out));
  MESHTUNE_RETURN_IF_ERROR(ReadTraining(reader, &out));
  // Megatron's NullTokenizer has --vocab-size tokens plus its EOD token.
  const auto tokenizer = out.ignored_values.find("--tokenizer-type");
  if (tokenizer != out.ignored_values.end() &&
      tokenizer->second == "NullTokenizer" && out.model.vocab_size > 0) {
    out.model.vocab_size += 1;
  }

  search_spaces::ParallelConfig& c = out.config;
  c.dp = 0;
  out.training.num_gpus = num_gpus;
  if (num_gpus > 0) {
    const int64_t model_parallel = c.tp * c.pp * c.cp;
    if (num_gpus % model_parallel != 0) {
      return Status::InvalidArgument(
          std::to_string(num_gpus) + " GPUs is not a multiple of tp·pp·cp = " +
              std::to_string(model_parallel),
          "run on a multiple of " + std::to_string(model_parallel) + " GPUs");
    }
    c.dp = num_gpus / model_parallel;
  }
  return out;
}

}  // namespace meshtune::tuner
