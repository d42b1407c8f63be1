#include "tuner/inputs/inputs.h"

#include <CLI/CLI.hpp>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "search_spaces/limits.h"
#include "search_spaces/presets/presets.h"
#include "search_spaces/yaml_util.h"
#include "tuner/inputs/local_cluster.h"

namespace meshtune::tuner {
namespace {

namespace limits = search_spaces::limits;
using search_spaces::Precision;
using search_spaces::Recompute;
using search_spaces::RecomputeGranularity;
using search_spaces::RecomputeMethod;
using search_spaces::SizeLimit;
using search_spaces::yaml_util::Printable;

// Spellings --precision accepts besides each precision's canonical name
// (search_spaces::ToString over kAllPrecisions): Megatron's recipe name and
// Transformer Engine's names of current scaling.
struct PrecisionAlias {
  const char* text;
  Precision precision;
};
constexpr PrecisionAlias kPrecisionAliases[] = {
    {"fp8-delayed", Precision::kFp8},
    {"fp8-cs", Precision::kFp8Tensorwise},
    {"fp8-current", Precision::kFp8Tensorwise},
};

// The --precision help: every spelling ParsePrecision accepts, built from
// the same two lists.
std::string PrecisionHelp() {
  std::string names;
  for (Precision p : search_spaces::kAllPrecisions) {
    names +=
        std::string(names.empty() ? "" : " | ") + search_spaces::ToString(p);
  }
  std::string aliases;
  for (const PrecisionAlias& a : kPrecisionAliases) {
    aliases += std::string(aliases.empty() ? "" : ", ") + a.text;
  }
  return names + " (default bf16; also " + aliases + ")";
}

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t comma = s.find(',', start);
    out.push_back(Trim(s.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// Strict integer parse: the whole text must be an integer. `*too_large` (when
// given) is set for a whole number above INT64_MAX, which is not an integer
// we can hold but is still a number: callers report it against their limit.
bool ParseInt64(const std::string& text, int64_t* value,
                bool* too_large = nullptr) {
  if (too_large != nullptr) *too_large = false;
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (end != text.c_str() + text.size()) return false;
  if (errno == ERANGE && v > 0 && too_large != nullptr) *too_large = true;
  if (errno != 0) return false;
  *value = v;
  return true;
}

// The bound of each integer pin (search_spaces/limits.h).
const SizeLimit& PinLimit(const std::string& flag) {
  if (flag == "--vpp") return limits::kLayerCount;
  if (flag == "--mbs") return limits::kMicroBatchSize;
  return limits::kParallelSize;  // --tp --pp --cp --ep --etp --dp
}

// Integer pins: "--tp 8" or, for search, "--tp 4,8".
Status ParsePin(const std::string& text, const std::string& flag,
                std::vector<int64_t>* out) {
  if (text.empty()) return Status::Ok();
  auto list = ParseIntList(text, flag, PinLimit(flag));
  if (!list.ok()) return list.status();
  *out = list.value();
  return Status::Ok();
}

Status ParseSinglePin(const std::string& text, const std::string& flag,
                      int64_t* out) {
  if (text.empty()) return Status::Ok();
  if (text.find(',') != std::string::npos) {
    return Status::InvalidArgument(
        flag + " takes one value in 'tune estimate', got '" + text + "'",
        "use 'tune search " + flag + " " + text + "' to compare several");
  }
  auto v = ParseSize(text, flag, PinLimit(flag));
  if (!v.ok()) return v.status();
  *out = v.value();
  return Status::Ok();
}

}  // namespace

int64_t Inputs::num_nodes() const {
  const int64_t g = cluster.gpus_per_node;
  return (training.num_gpus + g - 1) / g;
}

void AddInputFlags(CLI::App* app, InputFlags* f, bool pins_are_lists) {
  app->add_option("--model", f->model,
                  "model preset (tune models) or a model YAML file")
      ->required()
      ->type_name("M");
  app->add_option("--gpus", f->gpus, "number of GPUs (world size)")
      ->required()
      ->type_name("N");
  app->add_option("--gpu", f->gpu,
                  std::string("GPU/cluster preset (tune gpus) or a cluster "
                              "YAML file; default ") +
                      kDefaultGpu)
      ->type_name("KIND");
  app->add_option("--gpus-per-node", f->gpus_per_node,
                  "override the preset's GPUs per node")
      ->type_name("G");
  app->add_option("--gbs", f->gbs,
                  "global batch size in sequences; default from the model")
      ->type_name("B");
  app->add_option("--seq-len", f->seq_len,
                  "sequence length in tokens; default from the model")
      ->type_name("S");
  app->add_option("--precision", f->precision, PrecisionHelp())->type_name("P");
  app->add_option("--tokens", f->tokens,
                  "token budget for days-to-train: 300e9, 300B, 1.4T "
                  "(default 300B)")
      ->type_name("T");
  app->add_option("--memory-headroom", f->memory_headroom,
                  "GPU memory every plan leaves free besides the reserve: GiB "
                  "(4, 4GiB) or a percent of the GPU's memory (5%)")
      ->type_name("H");

  const std::string what =
      pins_are_lists ? "sizes to try (comma list)" : "size";
  const std::string n = pins_are_lists ? "LIST" : "N";
  app->add_option("--tp", f->tp, "tensor parallel " + what)->type_name(n);
  app->add_option("--pp", f->pp, "pipeline parallel " + what)->type_name(n);
  app->add_option("--vpp", f->vpp, "virtual pipeline stages per rank " + what)
      ->type_name(n);
  app->add_option("--cp", f->cp, "context parallel " + what)->type_name(n);
  app->add_option("--ep", f->ep, "expert parallel " + what)->type_name(n);
  app->add_option("--etp", f->etp,
                  pins_are_lists
                      ? "expert tensor parallel sizes to try (comma list; MoE "
                        "models; default 1, 2, 4, 8 and tp)"
                      : "expert tensor parallel size (MoE models; default tp)")
      ->type_name(n);
  app->add_option("--dp", f->dp,
                  pins_are_lists ? "data parallel sizes to try (comma list)"
                                 : "data parallel size (default: derived)")
      ->type_name(n);
  app->add_option("--mbs", f->mbs, "micro batch " + what)->type_name(n);
  app->add_option("--recompute", f->recompute,
                  std::string("none | selective | full[:N] | full:block:N") +
                      (pins_are_lists ? " (comma list)" : ""))
      ->type_name("MODE");
  auto* sp = app->add_flag_callback(
      "--sp", [f] { f->sp = true; }, "sequence parallel on");
  auto* no_sp = app->add_flag_callback(
      "--no-sp", [f] { f->sp = false; }, "sequence parallel off");
  sp->excludes(no_sp);
  auto* dist = app->add_flag_callback(
      "--dist-opt", [f] { f->dist_opt = true; }, "distributed optimizer on");
  auto* no_dist = app->add_flag_callback(
      "--no-dist-opt", [f] { f->dist_opt = false; },
      "distributed optimizer off");
  dist->excludes(no_dist);
  app->add_flag("--grad-reduce-in-bf16", f->grad_reduce_in_bf16,
                "main gradients in bf16 (2 bytes per parameter, reduced in "
                "bf16) instead of fp32");
  app->add_flag("--tp-comm-overlap", f->tp_comm_overlap,
                "overlap TP all-gather/reduce-scatter with GEMMs (Transformer "
                "Engine userbuffers; configurations with --sp and tp > 1)");
  app->add_flag("--overlap-moe-expert-parallel-comm", f->moe_ep_overlap,
                "MoE: overlap the EP all-to-alls with another micro-batch's "
                "compute (Megatron's combined 1F1B; needs ep > 1, no full "
                "recompute and virtual stages when pp > 1)");
  app->add_option("--cuda-graph-impl", f->cuda_graph_impl,
                  "none | local | transformer_engine: how Megatron captures "
                  "CUDA graphs (default none: every kernel launched from "
                  "Python)")
      ->type_name("IMPL");
  app->add_option_function<std::vector<std::string>>(
         "--cuda-graph-scope",
         [f](const std::vector<std::string>& words) {
           f->cuda_graph_scope = search_spaces::yaml_util::Join(words, ",");
         },
         "modules in CUDA graphs: attn mlp moe moe_router moe_preprocess "
         "mamba, or full_iteration (with --cuda-graph-impl local); empty = "
         "whole layers")
      ->type_name("SCOPE")
      ->expected(1, CLI::detail::expected_max_vector_size);
  app->add_flag("--fp8-param-gather", f->fp8_param_gather,
                "keep weights in fp8 and all-gather them in fp8 (needs "
                "--precision fp8)");
  app->add_flag("--fp8-dot-product-attention", f->fp8_dot_product_attention,
                "run the core attention in FP8 (Transformer Engine's cuDNN "
                "fused attention; needs an fp8 --precision)");
}

StatusOr<int64_t> ParsePositiveInt(const std::string& text,
                                   const std::string& flag) {
  int64_t v = 0;
  if (!ParseInt64(Trim(text), &v)) {
    return Status::InvalidArgument(
        flag + " must be a positive integer, got '" + Printable(text) + "'",
        "write a whole number, e.g. " + flag + " 8");
  }
  if (v <= 0) {
    return Status::InvalidArgument(
        flag + " must be a positive integer, got " + std::to_string(v),
        "write a whole number greater than 0, e.g. " + flag + " 8");
  }
  return v;
}

StatusOr<int64_t> ParseSize(const std::string& text, const std::string& flag,
                            const SizeLimit& limit) {
  int64_t v = 0;
  bool too_large = false;
  if (!ParseInt64(Trim(text), &v, &too_large) && too_large) {
    return search_spaces::AboveLimit(Printable(Trim(text)), limit, flag);
  }
  auto positive = ParsePositiveInt(text, flag);
  if (!positive.ok()) return positive.status();
  MESHTUNE_RETURN_IF_ERROR(
      search_spaces::CheckLimit(positive.value(), limit, flag));
  return positive.value();
}

namespace {

// `limit` may be null: no bound but int64_t's.
StatusOr<std::vector<int64_t>> ParseIntListImpl(const std::string& text,
                                                const std::string& flag,
                                                const SizeLimit* limit) {
  std::vector<int64_t> out;
  for (const std::string& item : SplitComma(text)) {
    int64_t v = 0;
    bool too_large = false;
    const bool is_int = ParseInt64(item, &v, &too_large);
    if (too_large && limit != nullptr) {
      return search_spaces::AboveLimit(Printable(item), *limit, flag);
    }
    if (!is_int || v <= 0) {
      return Status::InvalidArgument(
          flag + " must be a comma list of positive integers, got '" +
              Printable(text) + "'",
          "e.g. " + flag + " 4,8");
    }
    if (limit != nullptr) {
      MESHTUNE_RETURN_IF_ERROR(search_spaces::CheckLimit(v, *limit, flag));
    }
    out.push_back(v);
  }
  return out;
}

}  // namespace

StatusOr<std::vector<int64_t>> ParseIntList(const std::string& text,
                                            const std::string& flag) {
  return ParseIntListImpl(text, flag, nullptr);
}

StatusOr<std::vector<int64_t>> ParseIntList(const std::string& text,
                                            const std::string& flag,
                                            const SizeLimit& limit) {
  return ParseIntListImpl(text, flag, &limit);
}

StatusOr<double> ParseTokenCount(const std::string& raw) {
  const std::string text = Trim(raw);
  const Status bad = Status::InvalidArgument(
      "--tokens must be a positive token count, got '" + Printable(raw) + "'",
      "write e.g. 300e9, 300B or 1.4T");
  if (text.empty()) return bad;
  double scale = 1;
  std::string number = text;
  switch (std::toupper(static_cast<unsigned char>(text.back()))) {
    case 'K':
      scale = 1e3;
      break;
    case 'M':
      scale = 1e6;
      break;
    case 'B':
    case 'G':
      scale = 1e9;
      break;
    case 'T':
      scale = 1e12;
      break;
    default:
      break;
  }
  if (scale != 1) number.pop_back();
  if (number.empty()) return bad;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(number.c_str(), &end);
  if (errno != 0 || end != number.c_str() + number.size() ||
      !std::isfinite(v) || v <= 0) {
    return bad;
  }
  // "1e300T" is finite before the suffix and infinite after it.
  if (!(v * scale <= limits::kMaxTrainTokens)) {
    return Status::InvalidArgument(
        "--tokens: " + Printable(text) + " is above the limit of 1e18 tokens",
        "the largest published runs use tens of trillions of tokens (e.g. "
        "15T); check the value");
  }
  return v * scale;
}

StatusOr<Recompute> ParseRecompute(const std::string& raw, bool any_full) {
  const std::string text = Trim(raw);
  const Status bad = Status::InvalidArgument(
      "--recompute: unknown mode '" + Printable(raw) + "'",
      "use none, selective, full, full:N (uniform, N layers per chunk) or "
      "full:block:N");
  Recompute r;
  if (text == "none") return r;
  if (text == "selective") {
    r.granularity = RecomputeGranularity::kSelective;
    return r;
  }
  if (text.rfind("full", 0) != 0) return bad;
  r.granularity = RecomputeGranularity::kFull;
  r.method = RecomputeMethod::kUniform;
  r.num_layers = any_full ? 0 : 1;
  if (text == "full") return r;
  std::string rest = text.substr(4);
  if (rest.empty() || rest[0] != ':') return bad;
  rest = rest.substr(1);
  if (rest.rfind("block:", 0) == 0) {
    r.method = RecomputeMethod::kBlock;
    rest = rest.substr(6);
  } else if (rest.rfind("uniform:", 0) == 0) {
    rest = rest.substr(8);
  }
  int64_t n = 0;
  bool too_large = false;
  if (!ParseInt64(rest, &n, &too_large) && too_large) {
    return search_spaces::AboveLimit(Printable(rest), limits::kLayerCount,
                                     "--recompute");
  }
  if (n <= 0) return bad;
  MESHTUNE_RETURN_IF_ERROR(
      search_spaces::CheckLimit(n, limits::kLayerCount, "--recompute"));
  r.num_layers = n;
  return r;
}

std::string FormatRecompute(const Recompute& r) {
  switch (r.granularity) {
    case RecomputeGranularity::kNone:
      return "none";
    case RecomputeGranularity::kSelective:
      return "selective";
    case RecomputeGranularity::kFull:
      break;
  }
  if (r.method == RecomputeMethod::kBlock) {
    return "full:block:" + std::to_string(r.num_layers);
  }
  return r.num_layers == 1 ? "full" : "full:" + std::to_string(r.num_layers);
}

StatusOr<search_spaces::CudaGraphs> CudaGraphsFromFlags(const InputFlags& f) {
  return search_spaces::ParseCudaGraphs(Trim(f.cuda_graph_impl),
                                        f.cuda_graph_scope);
}

StatusOr<Precision> ParsePrecision(const std::string& raw) {
  const std::string text = Trim(raw);
  if (text == "bf16") return Precision::kBf16;
  if (text == "fp16") return Precision::kFp16;
  for (Precision p : search_spaces::kAllPrecisions) {
    if (text == search_spaces::ToString(p)) return p;
  }
  for (const PrecisionAlias& a : kPrecisionAliases) {
    if (text == a.text) return a.precision;
  }
  return Status::InvalidArgument(
      "--precision: unknown precision '" + raw + "'",
      "use bf16, fp16, fp8 (delayed scaling), fp8-tensorwise, fp8-blockwise, "
      "mxfp8 or nvfp4");
}

StatusOr<double> ParseMemoryHeadroom(const std::string& raw,
                                     double capacity_gib) {
  const std::string text = Trim(raw);
  const Status bad = Status::InvalidArgument(
      "--memory-headroom must be GiB per GPU (4, 4GiB) or a percent of the "
      "GPU's memory (5%), got '" +
          Printable(raw) + "'",
      "write e.g. --memory-headroom 4GiB or --memory-headroom 5%");
  std::string number = text;
  bool percent = false;
  auto ends_with_gib = [](const std::string& s) {
    if (s.size() < 3) return false;
    std::string tail = s.substr(s.size() - 3);
    for (char& ch : tail) {
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    return tail == "gib";
  };
  if (!number.empty() && number.back() == '%') {
    percent = true;
    number.pop_back();
  } else if (ends_with_gib(number)) {
    number.resize(number.size() - 3);
  }
  number = Trim(number);
  // Plain decimal notation only: strtod alone would also take "inf", "nan"
  // and hexadecimal.
  if (number.empty() ||
      number.find_first_not_of("0123456789.+-eE") != std::string::npos) {
    return bad;
  }
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(number.c_str(), &end);
  if (errno != 0 || end != number.c_str() + number.size() ||
      !std::isfinite(v)) {
    return bad;
  }
  if (v < 0) {
    return Status::InvalidArgument(
        "--memory-headroom must not be negative, got '" + Printable(raw) + "'",
        "write 0 for no headroom, or a margin such as --memory-headroom 4GiB");
  }
  const double gib = percent ? v / 100.0 * capacity_gib : v;
  if (!(gib < capacity_gib)) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "is not below the GPU's memory of %.2f GiB",
                  capacity_gib);
    return Status::InvalidArgument(
        "--memory-headroom " + Printable(text) + " " + buf,
        "keep a margin of a few GiB or percent, e.g. --memory-headroom 5%");
  }
  return gib;
}

namespace {

// The search space described by the pin flags alone.
StatusOr<search_spaces::SearchSpace> SpaceFromFlags(const InputFlags& f) {
  search_spaces::SearchSpace s;
  MESHTUNE_RETURN_IF_ERROR(ParsePin(f.tp, "--tp", &s.tp));
  MESHTUNE_RETURN_IF_ERROR(ParsePin(f.pp, "--pp", &s.pp));
  MESHTUNE_RETURN_IF_ERROR(ParsePin(f.vpp, "--vpp", &s.vpp));
  MESHTUNE_RETURN_IF_ERROR(ParsePin(f.cp, "--cp", &s.cp));
  MESHTUNE_RETURN_IF_ERROR(ParsePin(f.ep, "--ep", &s.ep));
  MESHTUNE_RETURN_IF_ERROR(ParsePin(f.etp, "--etp", &s.etp));
  MESHTUNE_RETURN_IF_ERROR(ParsePin(f.dp, "--dp", &s.dp));
  MESHTUNE_RETURN_IF_ERROR(ParsePin(f.mbs, "--mbs", &s.mbs));
  if (!f.recompute.empty()) {
    for (const std::string& item : SplitComma(f.recompute)) {
      auto r = ParseRecompute(item, /*any_full=*/true);
      if (!r.ok()) return r.status();
      s.recompute.push_back(r.value());
    }
  }
  if (f.sp.has_value()) s.sp = {*f.sp};
  if (f.dist_opt.has_value()) s.dist_opt = {*f.dist_opt};
  return s;
}

}  // namespace

StatusOr<Inputs> ResolveInputs(const InputFlags& f) {
  Inputs in;
  auto model = search_spaces::ResolveModel(f.model);
  if (!model.ok()) return model.status();
  in.model = model.value();

  in.gpu_defaulted = f.gpu.empty();
  if (f.gpu == kLocalCluster) {
    // This machine, described from /proc (tuner/machine/calibration_source.h).
    in.cluster = LocalCluster(profiler::ReadCpuInfo());
    // The plans run on meshtune's CPU engine, not under PyTorch.
    in.training.python_launches = false;
  } else {
    auto cluster =
        search_spaces::ResolveCluster(in.gpu_defaulted ? kDefaultGpu : f.gpu);
    if (!cluster.ok()) return cluster.status();
    in.cluster = cluster.value();
  }

  auto gpus = ParseSize(f.gpus, "--gpus", limits::kNumGpus);
  if (!gpus.ok()) return gpus.status();
  in.training.num_gpus = gpus.value();
  if (f.gpu == kLocalCluster && f.gpus_per_node.empty()) {
    LocalNodeForRanks(in.training.num_gpus, &in.cluster);
  }

  if (!f.gpus_per_node.empty()) {
    auto g =
        ParseSize(f.gpus_per_node, "--gpus-per-node", limits::kGpusPerNode);
    if (!g.ok()) return g.status();
    // A node-sized NVLink domain shrinks or grows with the node; a larger
    // (multi-node, NVL72-style) domain is a property of the fabric and stays.
    if (in.cluster.nvlink_domain_gpus <= in.cluster.gpus_per_node) {
      in.cluster.nvlink_domain_gpus = g.value();
    }
    in.cluster.gpus_per_node = static_cast<int>(g.value());
  }
  const int64_t per_node = in.cluster.gpus_per_node;
  if (in.training.num_gpus > per_node && in.training.num_gpus % per_node != 0) {
    return Status::InvalidArgument(
        "--gpus " + std::to_string(in.training.num_gpus) +
            " is not a whole number of " + in.cluster.name + " nodes (" +
            std::to_string(per_node) + " GPUs per node)",
        "use a multiple of " + std::to_string(per_node) +
            ", or set --gpus-per-node");
  }
  if (!f.memory_headroom.empty()) {
    // The flag replaces a cluster file's memory_headroom_gib (flags over
    // files, as for the pins).
    const double capacity_gib = in.cluster.CapacityGib();
    auto headroom = ParseMemoryHeadroom(f.memory_headroom, capacity_gib);
    if (!headroom.ok()) return headroom.status();
    in.cluster.memory_headroom_gib = headroom.value();
    if (in.cluster.UsableMemoryGib() <= 0) {
      char buf[160];
      std::snprintf(buf, sizeof(buf),
                    " leaves no usable memory: %s has %.2f GiB per GPU and "
                    "reserves %.2f GiB of it",
                    in.cluster.name.c_str(), capacity_gib,
                    in.cluster.memory_reserve_gib);
      char hint[96];
      std::snprintf(hint, sizeof(hint), "keep the headroom below %.2f GiB",
                    capacity_gib - in.cluster.memory_reserve_gib);
      return Status::InvalidArgument(
          "--memory-headroom " + Printable(Trim(f.memory_headroom)) + buf,
          hint);
    }
  }

  if (f.gbs.empty()) {
    if (in.model.global_batch_size <= 0) {
      return Status::InvalidArgument(
          "model " + in.model.name + " has no default global batch size",
          "pass --gbs B (sequences per step)");
    }
    in.training.global_batch_size = in.model.global_batch_size;
  } else {
    auto gbs = ParseSize(f.gbs, "--gbs", limits::kGlobalBatchSize);
    if (!gbs.ok()) return gbs.status();
    in.training.global_batch_size = gbs.value();
  }
  if (f.seq_len.empty()) {
    in.training.seq_length = in.model.seq_length;
  } else {
    auto seq = ParseSize(f.seq_len, "--seq-len", limits::kSeqLength);
    if (!seq.ok()) return seq.status();
    in.training.seq_length = seq.value();
  }

  auto precision = ParsePrecision(f.precision);
  if (!precision.ok()) return precision.status();
  in.training.precision = precision.value();
  const Precision prec = in.training.precision;
  if (search_spaces::IsQuantized(prec) &&
      in.cluster.gpu.PeakTflops(prec) <= 0) {
    return Status::InvalidArgument(
        std::string("--precision ") + search_spaces::ToString(prec) + ": " +
            in.cluster.name + " (" + in.cluster.gpu.display_name + ") has no " +
            (prec == Precision::kNvfp4 ? "FP4" : "FP8") + " tensor cores",
        "use --precision bf16, or a GPU that has them (tune gpus lists the "
        "peaks)");
  }
  if (search_spaces::NeedsBlackwell(prec) &&
      in.cluster.gpu.peak_fp4_tflops <= 0) {
    return Status::InvalidArgument(
        std::string("--precision ") + search_spaces::ToString(prec) +
            " needs Blackwell's block-scaled tensor cores, which " +
            in.cluster.name + " does not have",
        "use --precision fp8-tensorwise or fp8-blockwise on Hopper");
  }
  if (f.fp8_param_gather && !search_spaces::IsQuantized(prec)) {
    return Status::InvalidArgument(
        "--fp8-param-gather needs an fp8 or fp4 --precision, got --precision " +
            std::string(search_spaces::ToString(prec)),
        "add --precision fp8 or drop --fp8-param-gather");
  }
  if (f.fp8_dot_product_attention && !search_spaces::IsFp8(prec)) {
    return Status::InvalidArgument(
        "--fp8-dot-product-attention needs an fp8 --precision, got "
        "--precision " +
            std::string(search_spaces::ToString(prec)),
        "add --precision fp8 or drop --fp8-dot-product-attention");
  }
  in.training.fp8_param_gather = f.fp8_param_gather;
  in.training.fp8_dot_product_attention = f.fp8_dot_product_attention;
  in.training.grad_reduce_in_bf16 = f.grad_reduce_in_bf16;
  in.training.tp_comm_overlap = f.tp_comm_overlap;
  in.training.moe_ep_overlap = f.moe_ep_overlap;
  auto graphs = CudaGraphsFromFlags(f);
  if (!graphs.ok()) return graphs.status();
  in.training.cuda_graphs = graphs.value();
  auto tokens = ParseTokenCount(f.tokens);
  if (!tokens.ok()) return tokens.status();
  in.training.train_tokens = tokens.value();

  auto flag_space = SpaceFromFlags(f);
  if (!flag_space.ok()) return flag_space.status();
  if (!f.etp.empty() && !in.model.is_moe()) {
    return Status::InvalidArgument(
        "--etp " + Printable(Trim(f.etp)) + ": model " + in.model.name +
            " has no experts; expert tensor parallelism applies to MoE models "
            "only",
        "drop --etp (--tp splits the dense layers)");
  }
  if (f.space_file.empty()) {
    in.space = flag_space.value();
  } else {
    auto file_space = search_spaces::ResolveSearchSpace(f.space_file);
    if (!file_space.ok()) return file_space.status();
    auto merged = search_spaces::SearchSpace::Merge(file_space.value(),
                                                    flag_space.value());
    if (!merged.ok()) return merged.status();
    in.space = merged.value();
  }
  return in;
}

StatusOr<search_spaces::ParallelConfig> SingleConfigFromFlags(
    const InputFlags& f, int64_t num_gpus) {
  search_spaces::ParallelConfig c;
  MESHTUNE_RETURN_IF_ERROR(ParseSinglePin(f.tp, "--tp", &c.tp));
  MESHTUNE_RETURN_IF_ERROR(ParseSinglePin(f.pp, "--pp", &c.pp));
  MESHTUNE_RETURN_IF_ERROR(ParseSinglePin(f.vpp, "--vpp", &c.vpp));
  MESHTUNE_RETURN_IF_ERROR(ParseSinglePin(f.cp, "--cp", &c.cp));
  MESHTUNE_RETURN_IF_ERROR(ParseSinglePin(f.ep, "--ep", &c.ep));
  // Unset: etp 0, which means etp = tp (Megatron's default).
  MESHTUNE_RETURN_IF_ERROR(ParseSinglePin(f.etp, "--etp", &c.etp));
  MESHTUNE_RETURN_IF_ERROR(ParseSinglePin(f.mbs, "--mbs", &c.mbs));
  const int64_t model_parallel = c.tp * c.pp * c.cp;
  if (num_gpus % model_parallel != 0) {
    return Status::InvalidArgument(
        "tp " + std::to_string(c.tp) + " x pp " + std::to_string(c.pp) +
            " x cp " + std::to_string(c.cp) + " = " +
            std::to_string(model_parallel) + " does not divide --gpus " +
            std::to_string(num_gpus),
        "choose tp, pp and cp whose product divides the GPU count");
  }
  c.dp = num_gpus / model_parallel;
  if (!f.dp.empty()) {
    int64_t dp = 0;
    MESHTUNE_RETURN_IF_ERROR(ParseSinglePin(f.dp, "--dp", &dp));
    if (dp != c.dp) {
      return Status::InvalidArgument(
          "--dp " + std::to_string(dp) + " contradicts --gpus " +
              std::to_string(num_gpus) + " / (tp·pp·cp " +
              std::to_string(model_parallel) + ") = " + std::to_string(c.dp),
          "leave --dp out; it is derived from the other sizes");
    }
  }
  if (!f.recompute.empty()) {
    if (f.recompute.find(',') != std::string::npos) {
      return Status::InvalidArgument(
          "--recompute takes one mode in 'tune estimate', got '" + f.recompute +
              "'",
          "use 'tune search --recompute " + f.recompute +
              "' to compare several");
    }
    auto r = ParseRecompute(f.recompute, /*any_full=*/false);
    if (!r.ok()) return r.status();
    c.recompute = r.value();
  }
  c.sp = f.sp.value_or(false);
  c.dist_opt = f.dist_opt.value_or(false);
  return c;
}

}  // namespace meshtune::tuner
