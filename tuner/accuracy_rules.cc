#include "tuner/accuracy_rules.h"

#include <cctype>
#include <cstdlib>

#include "costmodel/model_stats.h"
#include "search_spaces/presets.h"

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

std::string ClusterPresetForGpu(const std::string& gpu) {
  const std::string g = Upper(gpu);
  for (const char* kind : {"GB300", "GB200", "B300", "B200", "H200", "H100"}) {
    if (Contains(g, kind)) return Lower(kind);
  }
  if (Contains(g, "A100")) {
    if (Contains(g, "40GB") || Contains(g, "40G")) return "a100-40g";
    if (Contains(g, "80GB") || Contains(g, "80G")) return "a100-80g";
  }
  return "";
}

std::optional<Precision> PrecisionFromText(const std::string& text) {
  const std::string t = Lower(text);
  // fp8 first: "fp8 with bf16 master weights" is an fp8 run.
  if (Contains(t, "fp8")) return Precision::kFp8;  // fp8, FP8-CS, MXFP8
  if (Contains(t, "bf16")) return Precision::kBf16;
  if (Contains(t, "fp16")) return Precision::kFp16;  // "fp16 mixed (--fp16)"
  // "mixed (16-bit)": bf16 and fp16 run at the same tensor-core rate.
  if (Contains(t, "16-bit") || Contains(t, "16 bit")) return Precision::kBf16;
  return std::nullopt;
}

costmodel::AttentionKernel AttentionKernelForSource(const std::string& source) {
  const std::optional<int> year = YearIn(source);
  return year && *year <= 2022 ? costmodel::AttentionKernel::kUnfused
                               : costmodel::AttentionKernel::kFlash;
}

bool IsNemoSource(const std::string& source) {
  return StartsWith(Lower(source), "nemo");
}

// Recompute column: blank or "none" -> none; "full..." -> full, uniform,
// every layer (Megatron --recompute-method uniform --recompute-num-layers
// 1, as the published scripts set); "selective..." -> selective (also the
// App. C microbatch-level variant, which we model as plain selective).
std::optional<search_spaces::Recompute> RecomputeFromText(
    const std::string& text) {
  search_spaces::Recompute r;
  const std::string t = Lower(text);
  if (t.empty() || t == "none") return r;
  if (StartsWith(t, "full")) {
    r.granularity = RecomputeGranularity::kFull;
    return r;
  }
  if (StartsWith(t, "selective")) {
    r.granularity = RecomputeGranularity::kSelective;
    return r;
  }
  return std::nullopt;
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
    // F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)). No other source's
    // convention is known, so their rows are skipped rather than guessed.
    if (!StartsWith(source, "Narayanan2021")) {
      *reason = "tflops_per_gpu: FLOP convention of source '" + source +
                "' unknown (known: Narayanan2021 SC21 eq. 3)";
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
    double flops = OurFlops(model, training, config, /*hardware=*/false);
    if (IsNemoSource(source)) {
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
