#include "tuner/accuracy/rules.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "costmodel/model_stats.h"
#include "search_spaces/presets/presets.h"
#include "search_spaces/space/enumerate.h"

namespace meshtune::tuner {
namespace {

using search_spaces::ClusterSpec;
using search_spaces::ModelSpec;
using search_spaces::Precision;
using search_spaces::RecomputeGranularity;

std::string Lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(ch));
  return s;
}
std::string Upper(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::toupper(ch));
  return s;
}
bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}
std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// "(12-layer)", "(4 layers)" -> 12, 4; nullopt for anything else.
std::optional<int64_t> LayerCountVariant(const std::string& v) {
  size_t i = 0;
  int64_t n = 0;
  while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i])) &&
         n < 1000000) {
    n = n * 10 + (v[i] - '0');
    ++i;
  }
  if (i == 0 || n < 1) return std::nullopt;
  const std::string rest = v.substr(i);
  if (rest == "-layer" || rest == " layer" || rest == " layers" ||
      rest == "-layers") {
    return n;
  }
  return std::nullopt;
}

// The release a source names after `prefix` (case-insensitive) as yymmpp:
// ("MegatronBridge_26.04.01_perf_summary", "megatronbridge_") -> 260401,
// ("NeMo_25.04_perf_summary", "nemo_") -> 250400; 0 when the source does
// not start with the prefix and a yy.mm version.
int SourceVersion(const std::string& source, const std::string& prefix) {
  const std::string s = Lower(source);
  if (!StartsWith(s, prefix)) return 0;
  int yy = 0, mm = 0, pp = 0;
  const int n =
      std::sscanf(s.c_str() + prefix.size(), "%d.%d.%d", &yy, &mm, &pp);
  if (n < 2) return 0;
  return yy * 10000 + mm * 100 + (n == 3 ? pp : 0);
}

// Megatron-Bridge performance tables from 25.09 on ("MegatronBridge_25.09_
// perf_summary", "MegatronBridge_26.04.01_perf_summary").
bool IsMegatronBridge2509OrLater(const std::string& source) {
  return SourceVersion(source, "megatronbridge_") >= 250900;
}

// The 26.06 MXFP8 recipes of the Megatron-Bridge tables (Megatron-Bridge 0.5.0
// = 26.06 and 0.5.1 = 26.06.01): full-iteration CUDA graphs, the fused
// grouped MLP and the EP overlap together, from 26.06 on the GPUs that got
// them first and from 26.06.01 on the rest. `name` is NormalizeModelName's,
// `version` SourceVersion's (yymmpp), `gpu` the cluster preset.
//   Qwen3-30B    GB200, GB300, B300 from 26.06; B200 from 26.06.01.
//   DeepSeek-V3  GB200, GB300 from 26.06; B300 from 26.06.01.
bool Mxfp8Recipe2606(const std::string& name, const std::string& gpu,
                     int version, Precision precision) {
  if (precision != Precision::kMxfp8) return false;
  const std::string& g = gpu;
  if (name == "qwen330ba3b") {
    return ((g == "gb200" || g == "gb300" || g == "b300") &&
            version >= 260600) ||
           (g == "b200" && version >= 260601);
  }
  if (name == "deepseekv3") {
    return ((g == "gb200" || g == "gb300") && version >= 260600) ||
           (g == "b300" && version >= 260601);
  }
  return false;
}

// The first 4-digit year (19xx/20xx, not part of a longer number) in `s`.
std::optional<int> YearIn(const std::string& s) {
  for (size_t i = 0; i + 4 <= s.size(); ++i) {
    bool digits = true;
    for (size_t k = i; k < i + 4; ++k) {
      digits = digits && std::isdigit(static_cast<unsigned char>(s[k]));
    }
    if (!digits) continue;
    const bool before =
        i > 0 && std::isdigit(static_cast<unsigned char>(s[i - 1]));
    const bool after =
        i + 4 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 4]));
    const int year = std::atoi(s.substr(i, 4).c_str());
    if (!before && !after && year >= 1990 && year <= 2099) return year;
  }
  return std::nullopt;
}

// Korthikanti et al. 2022 (arXiv:2205.05198) eq. 7 (model FLOPs) and eq. 8
// (hardware FLOPs with selective recompute); with full recompute the
// hardware FLOPs are 4 passes, SC21 eq. 3. V is the unpadded vocabulary.
double KorthikantiFlops(const search_spaces::ModelSpec& model,
                        const search_spaces::TrainingSpec& training,
                        const search_spaces::ParallelConfig& config,
                        bool hardware) {
  const double B = static_cast<double>(training.global_batch_size);
  const double s = static_cast<double>(training.seq_length);
  const double L = static_cast<double>(model.num_layers);
  const double h = static_cast<double>(model.hidden_size);
  const double V = static_cast<double>(model.vocab_size);
  const RecomputeGranularity g = config.recompute.granularity;
  if (hardware && g == RecomputeGranularity::kFull) {
    return 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
  }
  const double attention = hardware && g == RecomputeGranularity::kSelective
                               ? s / (3 * h)
                               : s / (6 * h);
  return 72 * B * L * s * h * h * (1 + attention + V / (12 * h * L));
}

// Our Megatron model FLOPs (costmodel::ModelFlopsPerStep, padded vocab) and
// hardware FLOPs (plus the recompute forward).
double OurFlops(const search_spaces::ModelSpec& model,
                const search_spaces::TrainingSpec& training,
                const search_spaces::ParallelConfig& config, bool hardware) {
  const int64_t B = training.global_batch_size;
  const int64_t s = training.seq_length;
  double flops = costmodel::ModelFlopsPerStep(
      model, B, s, costmodel::PaddedVocabSize(model.vocab_size, config.tp));
  if (!hardware) return flops;
  const RecomputeGranularity g = config.recompute.granularity;
  if (g == RecomputeGranularity::kSelective) {
    flops += costmodel::SelectiveRecomputeFlopsPerStep(model, B, s);
  } else if (g == RecomputeGranularity::kFull) {
    flops += costmodel::FullRecomputeFlopsPerStep(model, B, s, 1.0);
  }
  return flops;
}

}  // namespace

std::string NormalizeModelName(const std::string& name) {
  std::string out;
  for (const char ch : name) {
    if (ch == ' ' || ch == '.' || ch == '-' || ch == '_') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  return out;
}

std::optional<ModelSpec> FindModelPreset(const std::string& name) {
  const std::string wanted = NormalizeModelName(name);
  if (wanted.empty()) return std::nullopt;
  for (const ModelSpec& m : search_spaces::ModelPresets()) {
    if (NormalizeModelName(m.name) == wanted) return m;
    for (const std::string& alias : m.aliases) {
      if (NormalizeModelName(alias) == wanted) return m;
    }
  }
  return std::nullopt;
}

namespace {

// One variant as written between the parentheses (or between commas there).
void ApplyVariantTag(const std::string& written, ModelVariant* v) {
  const std::string tag = Lower(written);
  if (tag == "tokendrop" || tag == "token drop" || tag == "token-drop") {
    v->moe_expert_capacity_factor = 1.0;
    v->moe_pad_expert_input_to_capacity = true;
  } else if (tag == "dropless") {
    v->moe_expert_capacity_factor = 0.0;
    v->moe_pad_expert_input_to_capacity = false;
  } else if (tag == "w/o mtp" || tag == "without mtp" || tag == "no mtp") {
    v->mtp_num_layers = 0;
    v->mtp_stated = true;
  } else if (tag == "w/ mtp" || tag == "with mtp") {
    v->mtp_stated = true;  // the preset's MTP depths
  } else if (tag == "alt" || tag == "single transformer layer") {
    // An alternate recipe / per-layer timings of the same model.
  } else if (const auto layers = LayerCountVariant(tag)) {
    v->num_layers = *layers;
  } else if (v->unknown.empty()) {
    v->unknown = written;
  }
}

}  // namespace

ModelVariant ParseModelVariant(const std::string& model_column) {
  ModelVariant v;
  std::string base;
  size_t i = 0;
  while (i < model_column.size()) {
    const size_t open = model_column.find('(', i);
    const size_t close = open == std::string::npos
                             ? std::string::npos
                             : model_column.find(')', open);
    if (close == std::string::npos) {
      base += model_column.substr(i);
      break;
    }
    base += model_column.substr(i, open - i);
    i = close + 1;
    const std::string inside = model_column.substr(open + 1, close - open - 1);
    for (size_t b = 0; b <= inside.size();) {
      const size_t comma = std::min(inside.find(',', b), inside.size());
      ApplyVariantTag(Trim(inside.substr(b, comma - b)), &v);
      b = comma + 1;
    }
  }
  v.base_name = Trim(base);
  return v;
}

std::optional<Precision> PrecisionFromText(const std::string& text) {
  const std::string t = Lower(text);
  // The NeMo 25.07 GB200 table's parenthesised alternative values
  // (published_dev.csv rows "LLAMA3-8B (alt)", "LLAMA3-70B (alt)"): the
  // stored excerpt lacks the legend and the row's note reads "probably MXFP8
  // block scaling". The table's main values are already per-tensor current
  // scaling, and the only other fp8 recipe NeMo 25.07 runs on Blackwell is
  // MXFP8 (blockwise 128x128 is the Hopper recipe), so: mxfp8. The call
  // stays uncertain, as the CSV says.
  if (Contains(t, "fp8 alternative") && Contains(t, "mxfp8")) {
    return Precision::kMxfp8;
  }
  // Block-scaled recipes before the generic "fp8": "fp8 block-scaled MXFP8"
  // is MXFP8, "fp8 block-scaled: 128x128 ..." DeepSeek-style blockwise.
  if (Contains(t, "nvfp4") || Contains(t, "fp4")) return Precision::kNvfp4;
  if (Contains(t, "mxfp8") || Contains(t, "fp8-mx") || Contains(t, "fp8_mx")) {
    return Precision::kMxfp8;
  }
  if (Contains(t, "blockwise") || Contains(t, "128x128") ||
      Contains(t, "fp8-sc") || Contains(t, "fp8_sc") ||
      Contains(t, "subchannel")) {
    return Precision::kFp8Blockwise;
  }
  if (Contains(t, "current scaling") || Contains(t, "fp8-cs") ||
      Contains(t, "fp8_cs") || Contains(t, "tensorwise")) {
    return Precision::kFp8Tensorwise;
  }
  // "fp8", "FP8", "fp8 (hybrid format)" (the E4M3/E5M2 format, not a
  // recipe), "fp8 delayed": Megatron's default recipe, delayed scaling.
  if (Contains(t, "fp8")) return Precision::kFp8;
  if (Contains(t, "bf16")) return Precision::kBf16;
  if (Contains(t, "fp16")) return Precision::kFp16;  // "fp16 mixed (--fp16)"
  // "mixed (16-bit)": bf16 and fp16 run at the same tensor-core rate.
  if (Contains(t, "16-bit") || Contains(t, "16 bit")) return Precision::kBf16;
  return std::nullopt;
}

std::optional<Precision> PrecisionForRow(const std::string& text,
                                         const std::string& source) {
  const std::optional<Precision> p = PrecisionFromText(text);
  // Megatron-Bridge's tables print an unqualified "FP8" from 26.02 on
  // (published_dev.csv: LLaMA-3 70B on H100, GB200 and GB300; their notes
  // give only the container, VP/EP n/a and the FSDP size, nothing on the
  // scaling). The same tables labelled that column "FP8-CS" in 25.11 (and
  // 25.09's rows are FP8-CS by the 25.11 labels), and Megatron-Bridge's
  // performance scripts offer no delayed-scaling recipe at all
  // (scripts/performance: --compute_dtype bf16, fp8_cs, fp8_mx, fp8_sc,
  // nvfp4). So an unqualified FP8 from a Megatron-Bridge 25.09+ source is
  // current (tensorwise) scaling, on Blackwell and on the H100 rows of the
  // same tables alike.
  if (p == Precision::kFp8 && !Contains(Lower(text), "delayed") &&
      IsMegatronBridge2509OrLater(source)) {
    return Precision::kFp8Tensorwise;
  }
  return p;
}

costmodel::AttentionKernel AttentionKernelForSource(const std::string& source) {
  const std::optional<int> year = YearIn(source);
  return year && *year <= 2022 ? costmodel::AttentionKernel::kUnfused
                               : costmodel::AttentionKernel::kFlash;
}

int NemoContainerVersion(const std::string& source, const std::string& notes) {
  if (const int v = SourceVersion(source, "nemo_"); v > 0) return v;
  // "NeMo 24.03.01.framework", "container NeMo 26.04".
  const std::string n = Lower(notes);
  for (size_t at = n.find("nemo "); at != std::string::npos;
       at = n.find("nemo ", at + 1)) {
    int yy = 0, mm = 0;
    if (std::sscanf(n.c_str() + at + 5, "%2d.%2d", &yy, &mm) == 2 && yy > 0 &&
        mm >= 1 && mm <= 12) {
      return yy * 10000 + mm * 100;
    }
  }
  return 0;
}

costmodel::AttentionKernel AttentionKernelForRow(const std::string& source,
                                                 const std::string& notes) {
  const costmodel::AttentionKernel by_year = AttentionKernelForSource(source);
  if (by_year != costmodel::AttentionKernel::kFlash) return by_year;
  const int nemo = NemoContainerVersion(source, notes);
  return nemo > 0 && nemo <= 240300 ? costmodel::AttentionKernel::kFlash2
                                    : costmodel::AttentionKernel::kFlash;
}

bool IsNemoSource(const std::string& source) {
  return StartsWith(Lower(source), "nemo");
}

bool IsNvidiaRecipeSource(const std::string& source) {
  const std::string s = Lower(source);
  return StartsWith(s, "nemo") || StartsWith(s, "megatronbridge") ||
         StartsWith(s, "dgxc") || StartsWith(s, "megatronlm_examples_llama");
}

namespace {

// The number after "KEY=" in `notes` (case-insensitive), where KEY starts a
// word ("MEGATRON_FSDP=" is not "FSDP="); nullopt when there is none.
std::optional<int64_t> NumberAfterKey(const std::string& notes,
                                      const std::string& key) {
  const std::string t = Upper(notes);
  size_t at = t.find(key);
  while (at != std::string::npos) {
    const bool word_start =
        at == 0 || (!std::isalnum(static_cast<unsigned char>(t[at - 1])) &&
                    t[at - 1] != '_');
    size_t i = at + key.size();
    int64_t n = 0;
    bool digits = false;
    while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])) &&
           n < 1000000) {
      n = n * 10 + (t[i] - '0');
      digits = true;
      ++i;
    }
    if (word_start && digits) return n;
    at = t.find(key, at + 1);
  }
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> FsdpSizeFromNotes(const std::string& notes) {
  return NumberAfterKey(notes, "FSDP=");
}

std::optional<int64_t> GradientAccumulationFromNotes(const std::string& notes) {
  return NumberAfterKey(notes, "GA=");
}

int64_t MicroBatchFromAccumulation(int64_t gbs, int64_t dp, int64_t mbs,
                                   std::optional<int64_t> ga) {
  if (!ga || *ga <= 0 || dp <= 0 || gbs <= 0) return mbs;
  if (gbs % (dp * *ga) != 0) return mbs;
  return gbs / (dp * *ga);
}

bool ForceBalancedFromNotes(const std::string& notes) {
  return Lower(notes).find("force-balance") != std::string::npos;
}

void ApplyRecipeDefaults(const std::string& source, const ModelSpec& model,
                         const std::string& cluster_name,
                         search_spaces::TrainingSpec* training) {
  const std::string s = Lower(source);
  if (SourceVersion(source, "nemo_") >= 240900 ||
      SourceVersion(source, "dgxc_benchmarking_v") >= 241100) {
    training->cross_entropy_loss_fusion = true;  // NeMo 2.0 GPTConfig
    return;
  }
  if (StartsWith(s, "megatronlm_examples_llama")) {
    training->cross_entropy_loss_fusion = true;
    return;
  }
  if (!StartsWith(s, "megatronbridge")) return;
  training->cross_entropy_loss_fusion = true;
  // The performance scripts select Transformer Engine's kernel in every
  // table (cross_entropy_fusion_impl: "te" in 0.1.0rc3's YAML files = 25.09,
  // set_common_perf_overrides in scripts/performance/utils/helpers.py from
  // 0.2.0 = 25.11, utils/overrides.py from 0.3.0 = 26.02).
  training->cross_entropy_fusion_impl =
      search_spaces::CrossEntropyFusionImpl::kTe;
  if (!training->megatron_fsdp || !IsMegatronBridge2509OrLater(source)) return;
  // The recipes' activation offloading (see the header for the file): the
  // only Megatron-FSDP recipes of the performance tables are LLaMA-3 70B's.
  struct Offload {
    const char* gpu;
    Precision precision;
    int64_t layers;
  };
  static const Offload kLlama3_70b[] = {
      {"gb200", Precision::kBf16, 20},
      {"gb200", Precision::kFp8Tensorwise, 40},
      {"gb300", Precision::kBf16, 30},
      {"gb300", Precision::kFp8Tensorwise, 20},
  };
  if (NormalizeModelName(model.name) != "llama370b") return;
  for (const Offload& o : kLlama3_70b) {
    if (cluster_name == o.gpu && training->precision == o.precision) {
      training->cpu_offloading_num_layers = o.layers;
    }
  }
}

bool ApplyRecipeLayout(const std::string& source, const ModelSpec& model,
                       const std::string& cluster_name, Precision precision,
                       search_spaces::ParallelConfig* config) {
  const int v = SourceVersion(source, "megatronbridge_");
  if (v == 0) return false;
  // tp, pp, vpp, ep, mbs.
  struct Layout {
    int64_t tp, pp, vpp, ep, mbs;
  };
  struct Stale {
    const char* model;
    const char* gpu;
    int first, last;  // container versions
    std::optional<Precision> precision;
    Layout printed, ran;
  };
  static const Stale kStale[] = {
      {"qwen330ba3b",
       "h100",
       251100,
       251199,
       std::nullopt,
       {1, 2, 24, 8, 2},
       {1, 2, 12, 8, 1}},
      {"qwen330ba3b",
       "h100",
       260201,
       260201,
       std::nullopt,
       {1, 2, 12, 8, 1},
       {1, 1, 1, 16, 1}},
      {"llama370b",
       "gb300",
       260201,
       260201,
       Precision::kNvfp4,
       {1, 1, 1, 1, 2},
       {1, 4, 5, 1, 1}},
      {"llama370b",
       "gb300",
       260201,
       260201,
       Precision::kMxfp8,
       {1, 4, 1, 1, 2},
       {1, 4, 5, 1, 1}},
  };
  search_spaces::ParallelConfig& c = *config;
  const std::string name = NormalizeModelName(model.name);
  for (const Stale& s : kStale) {
    const Layout& p = s.printed;
    if (name != s.model || cluster_name != s.gpu || v < s.first || v > s.last ||
        (s.precision && *s.precision != precision) || c.cp != 1 ||
        c.tp != p.tp || c.pp != p.pp || c.vpp != p.vpp || c.ep != p.ep ||
        c.mbs != p.mbs) {
      continue;
    }
    const int64_t world = c.tp * c.pp * c.dp;
    c.tp = s.ran.tp;
    c.pp = s.ran.pp;
    c.vpp = s.ran.vpp;
    c.ep = s.ran.ep;
    c.mbs = s.ran.mbs;
    c.dp = world / (c.tp * c.pp);
    return true;
  }
  return false;
}

void ApplyRecipeMoeSoftware(const std::string& source,
                            const std::string& cluster_name,
                            const search_spaces::ParallelConfig& config,
                            ModelSpec* model,
                            search_spaces::TrainingSpec* training) {
  const int v = SourceVersion(source, "megatronbridge_");
  if (v == 0 || !model->is_moe()) return;
  const std::string name = NormalizeModelName(model->name);
  const std::string& g = cluster_name;
  const bool mxfp8 = training->precision == Precision::kMxfp8;
  const bool recipe_2606 = Mxfp8Recipe2606(name, g, v, training->precision);
  bool flex = false, overlap = false, fused_mlp = false;
  if (name == "deepseekv3") {
    fused_mlp = recipe_2606;
    flex = (g == "h100" && v >= 250900) ||
           ((g == "gb200" || g == "gb300") && v >= 251100) ||
           ((g == "b200" || g == "b300") && v >= 260200);
    overlap = (g == "h100" && v <= 251199) ||
              (g == "b200" && mxfp8 && v >= 260401 && config.pp == 8 &&
               config.vpp == 2 && config.ep == 32) ||
              recipe_2606;
  } else if (name == "qwen330ba3b") {
    fused_mlp = recipe_2606;
    flex = !(g == "b200" && v < 260201) && !(g == "h100" && v < 260200);
    overlap = (g == "h100" && v >= 251100 && v < 260201) || recipe_2606;
  } else if (name == "nemotron3nano") {
    flex = true;
  } else {
    return;
  }
  if (flex) {
    model->moe_token_dispatcher_type = search_spaces::TokenDispatcher::kFlex;
  }
  if (fused_mlp) model->use_transformer_engine_op_fuser = true;
  training->moe_ep_overlap =
      overlap && search_spaces::EpOverlapRefusal(*model, config).empty();
}

int64_t RecipeExpertTensorParallel(const std::string& source,
                                   const ModelSpec& model) {
  return model.is_moe() && SourceVersion(source, "megatronbridge_") != 0 ? 1
                                                                         : 0;
}

void ApplyRecipeFp8Attention(const std::string& source, const ModelSpec& model,
                             const std::string& cluster_name,
                             search_spaces::TrainingSpec* training) {
  const int v = SourceVersion(source, "megatronbridge_");
  if (v == 0 || training->precision != Precision::kMxfp8) return;
  const std::string name = NormalizeModelName(model.name);
  const std::string& g = cluster_name;
  // DeepSeek-V3 on GB200 runs the recipe with 16-bit attention.
  const bool fp8_attention = Mxfp8Recipe2606(name, g, v, training->precision) &&
                             !(name == "deepseekv3" && g == "gb200");
  if (fp8_attention) training->fp8_dot_product_attention = true;
}

void ApplyRecipeCudaGraphs(const std::string& source, const ModelSpec& model,
                           const std::string& cluster_name,
                           search_spaces::TrainingSpec* training) {
  const int v = SourceVersion(source, "megatronbridge_");
  if (v == 0) return;
  using search_spaces::CudaGraphImpl;
  using search_spaces::kGraphAttn;
  using search_spaces::kGraphMamba;
  using search_spaces::kGraphMoePreprocess;
  using search_spaces::kGraphMoeRouter;
  const std::string name = NormalizeModelName(model.name);
  const std::string& g = cluster_name;
  const Precision p = training->precision;
  const bool mxfp8 = p == Precision::kMxfp8;
  const bool hopper = g == "h100" || g == "h200";
  constexpr uint32_t kRouter = kGraphMoeRouter | kGraphMoePreprocess;
  std::optional<uint32_t> te;  // transformer_engine with this scope
  bool full_iteration = false;
  if (name == "qwen330ba3b") {
    full_iteration = Mxfp8Recipe2606(name, g, v, p);
    if (g == "h100") {
      if (p == Precision::kBf16) te = kRouter;
    } else if (v < 251100) {
      // 25.09 (0.1.0rc3): one `cuda_graphs` switch, on for the Blackwell
      // tables: whole layers where the experts' inputs are padded to their
      // capacity (static shapes), else the scope its successors name.
      te = model.moe_pad_expert_input_to_capacity ? 0u : (kGraphAttn | kRouter);
    } else if (g == "b200") {
      te = v >= 260201 ? (kGraphAttn | kRouter) : kRouter;
    } else if (g == "gb200") {
      te = mxfp8 ? kRouter : (kGraphAttn | kRouter);
    } else {
      te = kRouter;  // GB300, B300
    }
  } else if (name == "deepseekv3") {
    full_iteration = Mxfp8Recipe2606(name, g, v, p);
    const uint32_t layer = kGraphAttn | kRouter;
    if (g == "gb200") te = v < 260200 ? kRouter : layer;
    if (g == "gb300" && (!mxfp8 || v < 260200)) te = layer;
    if (g == "b300" && v >= 260401) te = layer;
    if (g == "b200" && mxfp8 && v >= 260401) te = layer;
  } else if (name == "nemotron3nano") {
    if (!hopper) {
      te = kGraphAttn | kGraphMamba | kRouter;
    } else {
      te = p == Precision::kBf16 ? (kGraphAttn | kGraphMamba) : kGraphMamba;
    }
  } else {
    return;
  }
  search_spaces::CudaGraphs graphs;
  if (full_iteration) {
    graphs.impl = CudaGraphImpl::kLocal;
    graphs.scope = search_spaces::kGraphFullIteration;
  } else if (te.has_value()) {
    graphs.impl = CudaGraphImpl::kTransformerEngine;
    graphs.scope = *te;
  }
  training->cuda_graphs = graphs;
}

std::optional<search_spaces::Recompute> RecipeRecompute(
    const std::string& source, const ModelSpec& model,
    const std::string& cluster_name, Precision precision,
    const search_spaces::ParallelConfig& config) {
  if (!StartsWith(Lower(source), "megatronbridge_")) return std::nullopt;
  if (NormalizeModelName(model.name) == "nemotron3nano") {
    // Nemotron 3 Nano recomputes only on H100 (tp1 ep8, 16 GPUs): bf16
    // moe and layernorm, FP8-CS also core_attn and moe_act.
    if (cluster_name != "h100") return std::nullopt;
    search_spaces::Recompute r;
    r.granularity = RecomputeGranularity::kSelective;
    r.modules =
        search_spaces::kRecomputeMoe | search_spaces::kRecomputeLayernorm;
    if (search_spaces::IsFp8(precision)) {
      r.modules |=
          search_spaces::kRecomputeCoreAttn | search_spaces::kRecomputeMoeAct;
    }
    return r;
  }
  if (NormalizeModelName(model.name) != "deepseekv3") return std::nullopt;
  // The recipes' layouts (see the header; any_precision false: only the
  // recipe of `precision` is known to use these modules).
  struct Layout {
    const char* gpu;
    int64_t tp, pp, vpp, ep, mbs;
    bool any_precision;
    Precision precision;
    uint32_t modules;
  };
  using search_spaces::kRecomputeMlaUpProj;
  using search_spaces::kRecomputeMlp;
  using search_spaces::kRecomputeMoeAct;
  static const Layout kLayouts[] = {
      {"gb300", 1, 2, 8, 32, 2, true, Precision::kBf16, kRecomputeMlaUpProj},
      {"gb300", 1, 4, 4, 64, 1, false, Precision::kBf16, kRecomputeMoeAct},
      {"gb200", 1, 4, 4, 64, 1, false, Precision::kBf16, kRecomputeMlaUpProj},
      {"b200", 1, 16, 1, 8, 1, true, Precision::kBf16, kRecomputeMlaUpProj},
      {"b200", 1, 8, 2, 32, 1, false, Precision::kMxfp8,
       kRecomputeMlaUpProj | kRecomputeMlp},
      {"b300", 1, 16, 1, 8, 1, true, Precision::kBf16, kRecomputeMlaUpProj},
      {"b300", 1, 8, 1, 8, 2, true, Precision::kBf16, kRecomputeMlaUpProj},
      {"h100", 2, 8, 4, 64, 1, true, Precision::kBf16,
       kRecomputeMlaUpProj | kRecomputeMlp},
      {"h100", 2, 8, 2, 64, 1, true, Precision::kBf16,
       kRecomputeMlaUpProj | kRecomputeMlp},
  };
  for (const Layout& l : kLayouts) {
    if (cluster_name == l.gpu && config.tp == l.tp && config.pp == l.pp &&
        config.vpp == l.vpp && config.ep == l.ep && config.mbs == l.mbs &&
        (l.any_precision || precision == l.precision)) {
      search_spaces::Recompute r;
      r.granularity = RecomputeGranularity::kSelective;
      r.modules = l.modules;
      return r;
    }
  }
  return std::nullopt;
}

// Recompute column: blank or "none" -> none; "full..." -> full, uniform,
// every layer (Megatron --recompute-method uniform --recompute-num-layers
// 1, as the published scripts set); "selective..." -> selective (also the
// App. C microbatch-level variant, which we model as plain selective).
std::optional<search_spaces::Recompute> RecomputeFromText(
    const std::string& text) {
  search_spaces::Recompute r;
  const std::string t = Lower(Trim(text));
  if (t.empty() || t == "none") return r;
  if (StartsWith(t, "full")) {
    r.granularity = RecomputeGranularity::kFull;
    return r;
  }
  if (!StartsWith(t, "selective")) return std::nullopt;
  r.granularity = RecomputeGranularity::kSelective;
  r.modules = search_spaces::kRecomputeCoreAttn;
  // Only "selective (...)" lists modules; other text after "selective"
  // ("selective + microbatch-level (...)", Korthikanti's App. C) is plain
  // selective.
  const std::string head = "selective (";
  const size_t close = t.find(')');
  if (!StartsWith(t, head) || close == std::string::npos) return r;
  const size_t open = head.size() - 1;
  const std::string list = t.substr(open + 1, close - open - 1);
  if (list == "attention core" || list == "core attention") return r;
  // Megatron --recompute-modules names, comma separated.
  static const std::pair<const char*, uint32_t> kModules[] = {
      {"core_attn", search_spaces::kRecomputeCoreAttn},
      {"mlp", search_spaces::kRecomputeMlp},
      {"moe", search_spaces::kRecomputeMoe},
      {"moe_act", search_spaces::kRecomputeMoeAct},
      {"layernorm", search_spaces::kRecomputeLayernorm},
      {"mla_up_proj", search_spaces::kRecomputeMlaUpProj},
      {"shared_experts", search_spaces::kRecomputeSharedExperts},
  };
  uint32_t modules = 0;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const std::string name = Trim(list.substr(start, comma - start));
    bool known = false;
    for (const auto& [module, bit] : kModules) {
      if (name == module) {
        modules |= bit;
        known = true;
      }
    }
    if (!known) return std::nullopt;
    start = comma + 1;
  }
  r.modules = modules;
  return r;
}

MetricKind MetricKindOf(const std::string& metric) {
  if (metric == "layer_fwd_ms") return MetricKind::kLayerForward;
  if (metric == "layer_bwd_ms") return MetricKind::kLayerBackward;
  if (metric == "layer_fwd_bwd_ms") return MetricKind::kLayerForwardBackward;
  if (metric == "allocated_memory_gib") return MetricKind::kAllocatedMemory;
  for (const char* m :
       {"iteration_time_s", "step_time_s", "tokens_per_sec_per_gpu",
        "tflops_per_gpu", "model_tflops_per_gpu", "mfu_pct", "hfu_pct"}) {
    if (metric == m) return MetricKind::kStepTime;
  }
  return MetricKind::kUnknown;
}

const char* MetricUnit(MetricKind kind) {
  switch (kind) {
    case MetricKind::kStepTime:
      return "s";
    case MetricKind::kLayerForward:
    case MetricKind::kLayerBackward:
    case MetricKind::kLayerForwardBackward:
      return "ms";
    case MetricKind::kAllocatedMemory:
      return "GiB";
    case MetricKind::kUnknown:
      break;
  }
  return "";
}

std::optional<double> PublishedStepTime(
    const std::string& source, const std::string& metric, double value,
    const ModelSpec& model, const search_spaces::TrainingSpec& training,
    const search_spaces::ParallelConfig& config, const ClusterSpec& cluster,
    std::string* reason) {
  const double v = value;
  const double n = static_cast<double>(training.num_gpus);
  const double tokens = static_cast<double>(training.global_batch_size) *
                        static_cast<double>(training.seq_length);
  const std::string& m = metric;
  if (m == "iteration_time_s" || m == "step_time_s") return v;
  if (m == "tokens_per_sec_per_gpu") return tokens / (v * n);
  if (m == "tflops_per_gpu") {
    // Achieved TFLOP/s in the source's own FLOP count. Narayanan et al. 2021
    // (SC21, arXiv:2104.04473) eq. 3 counts the recompute forward:
    // F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)). Megatron-LM's own log
    // ("throughput per GPU (TFLOP/s/GPU)", megatron/training/training.py)
    // divides num_floating_point_operations, our model FLOPs, by the
    // iteration time: the Megatron-Core README and guides quote that number.
    // No other source's convention is known, so their rows are skipped
    // rather than guessed.
    const std::string lower = Lower(source);
    if (StartsWith(lower, "megatronlm") || StartsWith(lower, "megatroncore")) {
      return OurFlops(model, training, config, /*hardware=*/false) /
             (v * 1e12 * n);
    }
    if (!StartsWith(source, "Narayanan2021")) {
      *reason = "tflops_per_gpu: FLOP convention of source '" + source +
                "' unknown (known: Narayanan2021 SC21 eq. 3, Megatron-LM / "
                "Megatron-Core logs)";
      return std::nullopt;
    }
    const double B = static_cast<double>(training.global_batch_size);
    const double s = static_cast<double>(training.seq_length);
    const double l = static_cast<double>(model.num_layers);
    const double h = static_cast<double>(model.hidden_size);
    const double V = static_cast<double>(model.vocab_size);
    const double flops =
        96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    return flops / (v * 1e12 * n);
  }
  if (m == "model_tflops_per_gpu") {
    // Model FLOPs: Megatron's num_floating_point_operations (docs/design.md
    // §5), except NeMo sources: NeMo 24.07's performance table counts causal
    // core attention in full (no ½ for the mask). With that count the
    // TFLOP/s row and the tokens/s row of the same run give the same step time
    // within 0.1 % on all 12 NeMo 24.07 pairs of published_calibration.csv;
    // with Megatron's count they differ by 1-11 % (LLaMA-3 8B, seq 8192).
    // The masked half is 3 (fwd + bwd) × the causal forward core attention.
    // Megatron-LM's examples/llama README quotes numbers that "follow NeMo
    // performance scripts": its tokens/s and TFLOP/s pairs in
    // published_dev.csv agree within 0.1 % only with NeMo's count (LLaMA-3
    // 8B at seq 8192: 11 % apart with Megatron's). Megatron-Bridge's pairs
    // agree within 1 % (most within 0.5 %) with Megatron's own count.
    double flops = OurFlops(model, training, config, /*hardware=*/false);
    if (IsNemoSource(source) ||
        StartsWith(Lower(source), "megatronlm_examples")) {
      flops += 3 * costmodel::SelectiveRecomputeFlopsPerStep(
                       model, training.global_batch_size, training.seq_length);
    }
    return flops / (v * 1e12 * n);
  }
  if (m == "mfu_pct" || m == "hfu_pct") {
    // Fraction of the dense bf16 peak (also for fp8 runs, as Megatron and
    // NeMo report it). Korthikanti rows use the paper's eq. 7/8; others our
    // model FLOPs (+ recompute for HFU).
    const bool hardware = m == "hfu_pct";
    const double flops =
        StartsWith(source, "Korthikanti2022")
            ? KorthikantiFlops(model, training, config, hardware)
            : OurFlops(model, training, config, hardware);
    const double peak = cluster.gpu.peak_bf16_tflops * 1e12;
    return flops / (n * peak * v / 100);
  }
  *reason = "metric '" + m +
            "' is not convertible to a step time (known: iteration_time_s, "
            "step_time_s, tokens_per_sec_per_gpu, tflops_per_gpu, "
            "model_tflops_per_gpu, mfu_pct, hfu_pct)";
  return std::nullopt;
}

}  // namespace meshtune::tuner
