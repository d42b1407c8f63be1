#include "search_spaces/serving_spec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

namespace meshtune::search_spaces {

const char* ToString(KvCacheDtype dtype) {
  switch (dtype) {
    case KvCacheDtype::kBf16:
      return "bf16";
    case KvCacheDtype::kFp8:
      return "fp8";
    case KvCacheDtype::kNvfp4:
      return "nvfp4";
  }
  return "?";
}

StatusOr<KvCacheDtype> ParseKvCacheDtype(const std::string& text) {
  if (text == "bf16" || text == "fp16" || text == "auto") {
    return KvCacheDtype::kBf16;
  }
  if (text == "fp8" || text == "fp8_e4m3") return KvCacheDtype::kFp8;
  if (text == "nvfp4") return KvCacheDtype::kNvfp4;
  return Status::InvalidArgument("unknown KV-cache dtype '" + text + "'",
                                 "use bf16, fp8 or nvfp4");
}

const char* ToString(Drafter drafter) {
  switch (drafter) {
    case Drafter::kMtp:
      return "mtp";
    case Drafter::kEagle3:
      return "eagle3";
  }
  return "?";
}

StatusOr<Drafter> ParseDrafter(const std::string& text) {
  if (text == "mtp") return Drafter::kMtp;
  if (text == "eagle3") return Drafter::kEagle3;
  return Status::InvalidArgument("unknown --spec-method '" + text + "'",
                                 "use mtp (the model's MTP layers) or eagle3 "
                                 "(an EAGLE-3 head, --draft-model)");
}

ModelSpec Eagle3HeadModel(const ModelSpec& t, const DraftHead& head) {
  ModelSpec m;
  m.name = t.name + "-eagle3";
  m.display_name = t.display_name + " EAGLE-3 head";
  m.num_layers = 1;
  m.hidden_size = t.hidden_size;
  m.num_attention_heads = t.num_attention_heads;
  m.num_query_groups = t.num_query_groups;
  m.kv_channels = t.kv_channels;
  m.ffn_hidden_size =
      head.intermediate_size > 0 ? head.intermediate_size : t.ffn_hidden_size;
  m.vocab_size = head.vocab_size;
  m.seq_length = t.seq_length;
  m.normalization = Normalization::kRMSNorm;
  m.activation = Activation::kSwiglu;
  m.position_embedding_type = t.position_embedding_type;
  m.rotary_base = t.rotary_base;
  m.untie_embeddings_and_output_weights = true;
  m.add_bias_linear = false;
  return m;
}

double BytesPerElement(KvCacheDtype dtype) {
  switch (dtype) {
    case KvCacheDtype::kBf16:
      return 2.0;
    case KvCacheDtype::kFp8:
      return 1.0;
    case KvCacheDtype::kNvfp4:
      return 0.5 + 1.0 / 16.0;
  }
  return 2.0;
}

double WeightBytesPerElement(Precision weights) {
  switch (weights) {
    case Precision::kBf16:
    case Precision::kFp16:
      return 2.0;
    case Precision::kFp8:
    case Precision::kFp8Tensorwise:
    case Precision::kFp8Blockwise:
      return 1.0;
    case Precision::kMxfp8:
      return 1.0 + 1.0 / 32.0;
    case Precision::kNvfp4:
      return 0.5 + 1.0 / 16.0;
  }
  return 2.0;
}

namespace {

Status Invalid(const std::string& where, const std::string& msg,
               const std::string& hint) {
  return Status::InvalidArgument((where.empty() ? "" : where + ": ") + msg,
                                 hint);
}

// A number as a user typed it: 1.5, 2, nan.
std::string Shortest(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

Status ValidateServingConfig(const ModelSpec& model, const GpuSpec& gpu,
                             const ServingConfig& c, const std::string& where) {
  if (c.tp < 1 || c.pp < 1 || c.attention_dp < 1 || c.ep < 1 ||
      c.max_batch < 0) {
    return Invalid(where,
                   "tp, pp, attention_dp and ep must be at least 1 and "
                   "max_batch at least 0",
                   "fix the serving layout");
  }
  if (!(c.kv_cache_memory_fraction > 0 && c.kv_cache_memory_fraction <= 1)) {
    return Invalid(where,
                   "the KV cache's memory fraction must be in (0, 1], got " +
                       std::to_string(c.kv_cache_memory_fraction),
                   "give a fraction such as 0.9");
  }
  if (model.num_attention_heads % c.tp != 0) {
    return Invalid(where,
                   "tp " + std::to_string(c.tp) + " does not divide the " +
                       std::to_string(model.num_attention_heads) +
                       " attention heads",
                   "pick a tp that divides the heads");
  }
  const int64_t groups = model.num_query_groups > 0 ? model.num_query_groups
                                                    : model.num_attention_heads;
  if (!model.multi_latent_attention && groups % c.tp != 0 &&
      c.tp % groups != 0) {
    return Invalid(where,
                   "tp " + std::to_string(c.tp) + " and the " +
                       std::to_string(groups) +
                       " query groups divide neither way",
                   "pick a tp that divides the query groups or is a multiple "
                   "of them");
  }
  if (c.pp > model.num_layers) {
    return Invalid(where,
                   "pp " + std::to_string(c.pp) + " exceeds the " +
                       std::to_string(model.num_layers) + " layers",
                   "use fewer pipeline stages");
  }
  if (!model.is_moe() && c.ep != 1) {
    return Invalid(where, "ep must be 1 for a dense model",
                   "drop ep or pick an MoE model");
  }
  if (model.is_moe() &&
      (model.num_experts % c.ep != 0 || (c.tp * c.attention_dp) % c.ep != 0)) {
    return Invalid(where,
                   "ep " + std::to_string(c.ep) + " must divide the " +
                       std::to_string(model.num_experts) +
                       " experts and tp·attention_dp = " +
                       std::to_string(c.tp * c.attention_dp),
                   "pick an ep that divides both");
  }
  if (IsQuantized(c.weights) && c.weights != Precision::kNvfp4 &&
      gpu.peak_fp8_tflops <= 0) {
    return Invalid(where, gpu.display_name + " has no FP8 tensor cores",
                   "serve in bf16");
  }
  if ((c.weights == Precision::kNvfp4 || c.kv_cache == KvCacheDtype::kNvfp4) &&
      gpu.peak_fp4_tflops <= 0) {
    return Invalid(where, gpu.display_name + " has no FP4 tensor cores",
                   "use fp8 or bf16");
  }
  if (c.kv_cache == KvCacheDtype::kFp8 && gpu.peak_fp8_tflops <= 0) {
    return Invalid(where,
                   gpu.display_name +
                       " has no FP8 support for the KV "
                       "cache",
                   "use --kv-cache-dtype bf16");
  }
  // nextn's range and the drafter (the model's MTP layers, or the head);
  // no acceptance yet.
  Status speculation = ValidateSpeculation(
      model, ServingWorkload{}, c.nextn,
      c.nextn > 0 ? c.drafter : Drafter::kMtp, c.draft_head);
  if (speculation.ok() && c.nextn > 0) {
    speculation = ValidateDraftTree(c.nextn, c.draft_topk, c.draft_tokens,
                                    /*searched_lengths=*/false);
  }
  if (!speculation.ok()) {
    return Invalid(where, speculation.message(), speculation.hint());
  }
  return Status::Ok();
}

Status ValidateServingWorkload(const ServingWorkload& w) {
  if (w.isl < 1 || w.osl < 1) {
    return Status::InvalidArgument(
        "--isl and --osl must be at least 1 token, got " +
            std::to_string(w.isl) + " and " + std::to_string(w.osl),
        "give the prompt and output lengths in tokens");
  }
  if (w.concurrency < 0) {
    return Status::InvalidArgument("--concurrency must be at least 0, got " +
                                       std::to_string(w.concurrency),
                                   "0 means offline maximum throughput");
  }
  if (w.isl > std::numeric_limits<int32_t>::max() - w.osl) {
    return Status::InvalidArgument("isl + osl exceeds 2^31 tokens",
                                   "use realistic sequence lengths");
  }
  if (w.prefix < 0 || w.prefix >= w.isl) {
    return Status::InvalidArgument(
        "--prefix must be in [0, " + std::to_string(w.isl - 1) +
            "] (below --isl " + std::to_string(w.isl) + "), got " +
            std::to_string(w.prefix),
        "give the cached prompt tokens; the prefill computes at least the "
        "last one");
  }
  if (w.prefix_pool < 1 || w.prefix_pool > (int64_t{1} << 20)) {
    return Status::InvalidArgument(
        "--prefix-pool must be in [1, 1048576], got " +
            std::to_string(w.prefix_pool),
        "give how many distinct prefixes the requests share (1: one system "
        "prompt for all)");
  }
  return Status::Ok();
}

namespace {

// Whether `text` is a checkpoint the commands can carry as written: a
// Hugging Face id or a path of letters, digits and . _ - / : @ + ~.
bool SafeCheckpoint(const std::string& text) {
  if (text.empty() || text.size() > 512) return false;
  for (char ch : text) {
    const bool ok = std::isalnum(static_cast<unsigned char>(ch)) ||
                    std::string("._-/:@+~").find(ch) != std::string::npos;
    if (!ok) return false;
  }
  return true;
}

// The EAGLE-3 form of ValidateSpeculation: the head against its target.
Status ValidateDraftHead(const ModelSpec& model, const DraftHead& head) {
  if (head.checkpoint.empty()) {
    return Status::InvalidArgument(
        "--spec-method eagle3 needs the head's checkpoint (--draft-model)",
        "give its Hugging Face id or path, such as "
        "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B");
  }
  if (!SafeCheckpoint(head.checkpoint)) {
    return Status::InvalidArgument(
        "--draft-model '" + head.checkpoint +
            "' has characters the commands cannot carry as written",
        "use letters, digits and . _ - / : @ + ~ (a Hugging Face id or a "
        "plain path)");
  }
  if (model.multi_latent_attention || model.is_hybrid()) {
    return Status::InvalidArgument(
        "--spec-method eagle3 prices a head of standard attention layers, "
        "and " +
            model.name + " has " +
            (model.multi_latent_attention ? "MLA" : "Mamba layers"),
        model.mtp_num_layers > 0
            ? "draft with its MTP layers: --spec-method mtp"
            : "leave speculative decoding out for this model");
  }
  if (model.is_moe() && head.intermediate_size == 0) {
    return Status::InvalidArgument(
        "--spec-method eagle3 on the MoE model " + model.name +
            " needs the head's MLP width (--draft-intermediate)",
        "give the intermediate_size of the head's config.json");
  }
  if (head.intermediate_size < 0 || head.intermediate_size > (1 << 20)) {
    return Status::InvalidArgument(
        "--draft-intermediate must be in [1, 1048576], got " +
            std::to_string(head.intermediate_size),
        "give the intermediate_size of the head's config.json");
  }
  if (head.vocab_size < 1 || head.vocab_size > model.vocab_size) {
    return Status::InvalidArgument(
        "--draft-vocab must be in [1, " + std::to_string(model.vocab_size) +
            "] (the target's vocabulary), got " +
            std::to_string(head.vocab_size),
        "give the draft_vocab_size of the head's config.json (32000 in "
        "most heads)");
  }
  return Status::Ok();
}

// The per-position form of ValidateSpeculation.
Status ValidateAcceptRates(const ServingWorkload& w) {
  const std::vector<double>& rates = w.nextn_accept_rates;
  if (w.nextn_accepted != 0) {
    return Status::InvalidArgument(
        "--nextn-accept-rates and --nextn-accepted cannot be combined",
        "give the mean accepted drafts or the rate of each position");
  }
  if (static_cast<int64_t>(rates.size()) > kMaxNextn) {
    return Status::InvalidArgument(
        "--nextn-accept-rates takes at most " + std::to_string(kMaxNextn) +
            " rates, got " + std::to_string(rates.size()),
        "give one rate per draft position, such as 0.85,0.6,0.4");
  }
  for (size_t k = 0; k < rates.size(); ++k) {
    if (!std::isfinite(rates[k]) || rates[k] < 0 || rates[k] > 1) {
      return Status::InvalidArgument(
          "--nextn-accept-rates must lie in [0, 1], got " + Shortest(rates[k]) +
              " at position " + std::to_string(k + 1),
          "give each position's acceptance as a share, such as 0.85");
    }
  }
  return Status::Ok();
}

}  // namespace

double DecodeProgress(const ServingWorkload& w, int64_t nextn) {
  if (nextn <= 0) return 1.0;
  if (w.nextn_accept_rates.empty()) return 1.0 + w.nextn_accepted;
  double progress = 1.0, all_accepted = 1.0;
  const size_t n =
      std::min(w.nextn_accept_rates.size(), static_cast<size_t>(nextn));
  for (size_t k = 0; k < n; ++k) {
    all_accepted *= w.nextn_accept_rates[k];
    progress += all_accepted;
  }
  return progress;
}

Status ValidateSpeculation(const ModelSpec& model, const ServingWorkload& w,
                           int64_t nextn, Drafter drafter,
                           const DraftHead& head) {
  if (nextn < 0 || nextn > kMaxNextn) {
    return Status::InvalidArgument(
        "--nextn must be in [0, " + std::to_string(kMaxNextn) + "], got " +
            std::to_string(nextn),
        "give the draft tokens per step, such as 1 to 3");
  }
  const bool rates = !w.nextn_accept_rates.empty();
  if (drafter == Drafter::kEagle3) {
    MESHTUNE_RETURN_IF_ERROR(ValidateDraftHead(model, head));
    if (nextn == 0 && !rates) {
      return Status::InvalidArgument(
          "--spec-method eagle3 needs --nextn or --nextn-accept-rates",
          "give the drafts per step and their acceptance, such as --nextn 3 "
          "--nextn-accepted 1.8");
    }
  } else if ((nextn > 0 || rates) && model.mtp_num_layers <= 0) {
    const std::string flag = nextn > 0 ? "--nextn" : "--nextn-accept-rates";
    return Status::InvalidArgument(
        flag + " drafts with the model's MTP layers, and " + model.name +
            " has none (mtp_num_layers 0)",
        "leave " + flag +
            " out, draft with an EAGLE-3 head (--spec-method eagle3 "
            "--draft-model ID), or pick a model with MTP layers such as "
            "deepseek-v3");
  }
  if (rates) return ValidateAcceptRates(w);
  const double a = w.nextn_accepted;
  if (nextn == 0 && a != 0) {
    return Status::InvalidArgument(
        "--nextn-accepted needs --nextn (speculative decoding is off)",
        "give --nextn N with it, or leave --nextn-accepted out");
  }
  if (!std::isfinite(a) || a < 0 || a > static_cast<double>(nextn)) {
    return Status::InvalidArgument(
        "--nextn-accepted must be in [0, " + std::to_string(nextn) +
            "] (at most --nextn " + std::to_string(nextn) + "), got " +
            Shortest(a),
        "give the mean accepted draft tokens per step (the engine's mean "
        "acceptance length minus 1)");
  }
  return Status::Ok();
}

Status ValidateDraftTree(int64_t nextn, int64_t topk, int64_t tokens,
                         bool searched_lengths) {
  if (topk < 1 || topk > kMaxDraftTopk) {
    return Status::InvalidArgument(
        "--draft-topk must be in [1, " + std::to_string(kMaxDraftTopk) +
            "], got " + std::to_string(topk),
        "give the candidates each draft pass expands per request (1: a "
        "chain)");
  }
  if (topk == 1) {
    if (tokens != 0 && tokens != nextn + 1) {
      return Status::InvalidArgument(
          "--draft-tokens " + std::to_string(tokens) +
              " with a chain of --nextn " + std::to_string(nextn) +
              " drafts: a chain verifies " + std::to_string(nextn + 1),
          "leave --draft-tokens out for a chain, or give --draft-topk above "
          "1 for a tree");
    }
    return Status::Ok();
  }
  if (nextn < 1 || searched_lengths) {
    return Status::InvalidArgument(
        "--draft-topk " + std::to_string(topk) +
            " needs --nextn (the tree's depth)",
        "give --nextn N and --nextn-accepted A with the tree");
  }
  const int64_t holds =
      std::min<int64_t>(kMaxDraftTokens, 1 + topk + (nextn - 1) * topk * topk);
  if (tokens < nextn + 1 || tokens > holds) {
    return Status::InvalidArgument(
        "--draft-tokens must be in [" + std::to_string(nextn + 1) + ", " +
            std::to_string(holds) + "] for a tree of depth " +
            std::to_string(nextn) + " and top-k " + std::to_string(topk) +
            ", got " + std::to_string(tokens),
        "give the tokens the verify checks per request (SGLang's "
        "--speculative-num-draft-tokens)");
  }
  return Status::Ok();
}

std::string ToString(const ServingConfig& c) {
  std::string s = "tp" + std::to_string(c.tp) + " pp" + std::to_string(c.pp) +
                  " adp" + std::to_string(c.attention_dp) + " ep" +
                  std::to_string(c.ep) + " " + ToString(c.weights) +
                  " kv:" + ToString(c.kv_cache);
  if (c.max_batch > 0) s += " batch:" + std::to_string(c.max_batch);
  if (c.nextn > 0) {
    s += (c.drafter == Drafter::kEagle3 ? " eagle3:" : " nextn:") +
         std::to_string(c.nextn);
    if (DraftsTree(c)) {
      s += " tree:" + std::to_string(c.draft_topk) + "x" +
           std::to_string(c.draft_tokens);
    }
  }
  return s;
}

}  // namespace meshtune::search_spaces
