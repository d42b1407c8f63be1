// Enumeration of valid ParallelConfigs under Megatron-Core's rules.
//
// The rules, and where Megatron-LM enforces them:
//  - tp divides num_attention_heads; num_query_groups is a multiple or a
//    divisor of tp (megatron/core/transformer/transformer_config.py,
//    __post_init__).
//  - num_layers % (pp·vpp) == 0, or (num_layers + 2) % (pp·vpp) == 0 with
//    the embedding and loss counted as layers (PipelineLayout;
//    --account-for-{embedding,loss}-in-pipeline-split)
//    (megatron/training/arguments.py, validate_args).
//  - Interleaving needs pp > 1 with --overlap-p2p-communication (the default)
//    and pp > 2 without it (arguments.py); we assume the default.
//  - Interleaving needs m % pp == 0: schedules.py rejects
//    microbatch_group_size_per_vp_stage (default pp) outside [pp, m] and a
//    last group smaller than pp.
//  - seq_length % (2·cp) == 0 when cp > 1, for causal load balancing
//    (arguments.py).
//  - num_experts % ep == 0 (arguments.py); world % (etp·ep·pp) == 0 with
//    etp = tp for the expert grid (megatron/core/parallel_state.py), i.e. ep
//    divides cp·dp.
//  - sequence_parallel is switched off when tp == 1 (arguments.py); we treat
//    asking for it as a rule break so pins are not silently changed.
//  - MoE with tp > 1 trains only with sequence parallelism: MoELayer.forward
//    raises otherwise during training (megatron/core/transformer/moe/
//    moe_layer.py), and the token dispatcher assumes sequence-sharded
//    tokens.
//  - gbs % (mbs·dp) == 0 (megatron/core/num_microbatches_calculator.py).
//  - full recompute: 1 <= recompute_num_layers <= layers per (virtual)
//    stage (transformer_config.py).
//
// The enumeration walks the axes in a fixed order (tp, pp, cp, [dp], ep,
// mbs, vpp, sp, recompute, dist_opt) and applies each rule at the first axis
// where it can be decided; CheckConfig applies the same checks in the same
// order, so a pinned configuration is pruned under the same code that
// CheckConfig returns for it.
#include "search_spaces/space/enumerate.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "search_spaces/pipeline_layout.h"

namespace meshtune::search_spaces {
namespace {

// Reason codes; kReasonNames gives their stable strings (see enumerate.h).
enum Reason {
  kOk = 0,
  kNonpositiveSize,
  kWorldNotDivisible,
  kTpExceedsNvlinkDomain,
  kTpNotDividingHeads,
  kTpNotDividingQueryGroups,
  kLayersNotDivisibleByPp,
  kSeqNotDivisibleByCp,
  kGbsNotDivisibleByMbsDp,
  kEpNotDividingExperts,
  kEpNotDividingDpCp,
  kVppRequiresPp,
  kLayersNotDivisibleByPpVpp,
  kMicrobatchesVsPp,
  kSpRequiresTp,
  kRecomputeNumLayersOutOfRange,
  kMambaHeadsNotDivisibleByTp,
  kMambaHeadsNotDivisibleByCp,
  kMtpWithCp,
  kEtpNotDividingExpertFfn,
  kExpertBiasRequiresEtp1,
  kExpertGridNotDividingWorld,
  kEpOverlapPreconditions,
  kMoeTpRequiresSp,
  kNumReasons,
};

constexpr std::array<const char*, kNumReasons> kReasonNames = {
    "",
    "nonpositive_size",
    "world_not_divisible",
    "tp_exceeds_nvlink_domain",
    "tp_not_dividing_heads",
    "tp_not_dividing_query_groups",
    "layers_not_divisible_by_pp",
    "seq_not_divisible_by_cp",
    "gbs_not_divisible_by_mbs_dp",
    "ep_not_dividing_experts",
    "ep_not_dividing_dp_cp",
    "vpp_requires_pp",
    "layers_not_divisible_by_pp_vpp",
    "microbatches_vs_pp",
    "sp_requires_tp",
    "recompute_num_layers_out_of_range",
    "mamba_heads_not_divisible_by_tp",
    "mamba_heads_not_divisible_by_cp",
    "mtp_with_cp",
    "etp_not_dividing_expert_ffn",
    "expert_bias_requires_etp_1",
    "expert_grid_not_dividing_world",
    "ep_overlap_preconditions",
    "moe_tp_requires_sp",
};

using std::to_string;

// Each Check* returns kOk or the reason, and fills `detail` (when non-null)
// with a one-line explanation. They are the single source of the rules.

Reason CheckTp(const ModelSpec& model, int64_t num_gpus, int64_t tp,
               std::string* detail) {
  if (tp < 1) {
    if (detail) *detail = "tp " + to_string(tp) + " must be at least 1";
    return kNonpositiveSize;
  }
  if (num_gpus % tp != 0) {
    if (detail) {
      *detail = "tp " + to_string(tp) + " does not divide the " +
                to_string(num_gpus) + " GPUs";
    }
    return kWorldNotDivisible;
  }
  if (model.num_attention_heads % tp != 0) {
    if (detail) {
      *detail = "tp " + to_string(tp) +
                " does not divide num_attention_heads " +
                to_string(model.num_attention_heads);
    }
    return kTpNotDividingHeads;
  }
  const int64_t groups = model.num_query_groups > 0 ? model.num_query_groups
                                                    : model.num_attention_heads;
  if (groups % tp != 0 && tp % groups != 0) {
    if (detail) {
      *detail = "num_query_groups " + to_string(groups) +
                " is neither a multiple nor a divisor of tp " + to_string(tp);
    }
    return kTpNotDividingQueryGroups;
  }
  // Mamba-2 splits heads and groups over tp (mamba_mixer.py asserts
  // nheads % tp == 0 and ngroups % tp == 0).
  if (model.is_hybrid() &&
      (model.mamba_heads() % tp != 0 || model.mamba_num_groups % tp != 0)) {
    if (detail) {
      *detail = "tp " + to_string(tp) + " does not divide the Mamba heads " +
                to_string(model.mamba_heads()) + " and groups " +
                to_string(model.mamba_num_groups);
    }
    return kMambaHeadsNotDivisibleByTp;
  }
  return kOk;
}

// The layouts searched for (pp, vpp): Megatron's even split (with the
// embedding/loss accounting) where it exists, otherwise the uneven family
// (PipelineLayout::UnevenFamily). (first, last) pairs; (-1, -1) is the even
// split.
std::vector<std::pair<int64_t, int64_t>> LayoutOptions(int64_t layers,
                                                       int64_t pp,
                                                       int64_t vpp) {
  if (PipelineLayout::Valid(layers, pp, vpp)) return {{-1, -1}};
  return PipelineLayout::UnevenFamily(layers, pp, vpp);
}

constexpr int64_t kMaxUnevenVpp = PipelineLayout::kMaxUnevenVpp;

bool AnyLayout(int64_t layers, int64_t pp) {
  for (int64_t v = 1; v <= kMaxUnevenVpp; ++v) {
    if (!LayoutOptions(layers, pp, v).empty()) return true;
  }
  return PipelineLayout::Valid(layers, pp, 1);
}

// `rest` = GPUs per tensor-parallel group slice = num_gpus / tp.
Reason CheckPp(const ModelSpec& model, int64_t rest, int64_t pp,
               std::string* detail) {
  if (pp < 1) {
    if (detail) *detail = "pp " + to_string(pp) + " must be at least 1";
    return kNonpositiveSize;
  }
  if (rest % pp != 0) {
    if (detail) {
      *detail = "pp " + to_string(pp) +
                " does not divide GPUs/tp = " + to_string(rest);
    }
    return kWorldNotDivisible;
  }
  if (!AnyLayout(model.num_layers, pp)) {
    if (detail) {
      *detail = "num_layers " + to_string(model.num_layers) +
                " has no pipeline layout over pp " + to_string(pp) +
                " (even split, embedding/loss accounting or an uneven "
                "first/last stage)";
    }
    return kLayersNotDivisibleByPp;
  }
  return kOk;
}

// `rest` = num_gpus / (tp·pp).
Reason CheckCp(int64_t seq_length, int64_t rest, int64_t cp,
               std::string* detail) {
  if (cp < 1) {
    if (detail) *detail = "cp " + to_string(cp) + " must be at least 1";
    return kNonpositiveSize;
  }
  if (rest % cp != 0) {
    if (detail) {
      *detail = "cp " + to_string(cp) +
                " does not divide GPUs/(tp·pp) = " + to_string(rest);
    }
    return kWorldNotDivisible;
  }
  if (cp > 1 && seq_length % (2 * cp) != 0) {
    if (detail) {
      *detail = "seq_length " + to_string(seq_length) +
                " is not divisible by 2·cp = " + to_string(2 * cp);
    }
    return kSeqNotDivisibleByCp;
  }
  return kOk;
}

// Model-specific context-parallel rules: Megatron's MTP does not support
// CP (docs/user-guide/features/multi_token_prediction.md); Mamba's CP is
// head-parallel all-to-all, so the heads per tp rank must split over cp
// (megatron/core/ssm/mamba_context_parallel.py).
Reason CheckModelCp(const ModelSpec& model, int64_t tp, int64_t cp,
                    std::string* detail) {
  if (cp <= 1) return kOk;
  if (model.mtp_num_layers > 0) {
    if (detail) {
      *detail = "cp " + to_string(cp) + " with " +
                to_string(model.mtp_num_layers) +
                " MTP layers: Megatron's multi-token prediction does not "
                "support context parallelism";
    }
    return kMtpWithCp;
  }
  if (model.is_hybrid() && (model.mamba_heads() / tp) % cp != 0) {
    if (detail) {
      *detail = "cp " + to_string(cp) +
                " does not divide the Mamba heads "
                "per tp rank (" +
                to_string(model.mamba_heads() / tp) + ")";
    }
    return kMambaHeadsNotDivisibleByCp;
  }
  return kOk;
}

// No micro-batch size can work when dp does not divide gbs.
Reason CheckDp(int64_t gbs, int64_t dp, std::string* detail) {
  if (gbs % dp != 0) {
    if (detail) {
      *detail = "global_batch_size " + to_string(gbs) +
                " is not divisible by dp " + to_string(dp);
    }
    return kGbsNotDivisibleByMbsDp;
  }
  return kOk;
}

// Expert tensor parallelism: the expert FFN splits over etp, expert biases
// need etp 1 (transformer_config.py: "Bias in Moe is only supported when
// ETP==1"), and the folded expert grid etp·ep·edp·pp covers the world
// (parallel_state.py), i.e. etp·ep divides tp·cp·dp.
Reason CheckEtp(const ModelSpec& model, int64_t tp, int64_t tp_cp_dp,
                int64_t etp, int64_t ep, std::string* detail) {
  if (!model.is_moe()) return kOk;
  if (etp < 1) {
    if (detail) *detail = "etp " + to_string(etp) + " must be at least 1";
    return kNonpositiveSize;
  }
  if (model.expert_ffn_hidden_size() % etp != 0) {
    if (detail) {
      *detail = "etp " + to_string(etp) + " does not divide the expert FFN " +
                to_string(model.expert_ffn_hidden_size());
    }
    return kEtpNotDividingExpertFfn;
  }
  // Only an explicit add_bias_linear counts: the LayerNorm-implies-biases
  // default describes 2020-22 dense GPTs, not an MoE recipe.
  if (etp > 1 && model.add_bias_linear.value_or(false)) {
    if (detail) {
      *detail = "etp " + to_string(etp) +
                " with expert biases: Megatron supports biases in MoE only "
                "with expert_tensor_parallel_size 1";
    }
    return kExpertBiasRequiresEtp1;
  }
  // etp == tp: CheckEp states the same rule as ep | dp·cp.
  if (etp != tp && tp_cp_dp % (etp * ep) != 0) {
    if (detail) {
      *detail = "etp·ep = " + to_string(etp * ep) +
                " does not divide tp·cp·dp = " + to_string(tp_cp_dp) +
                " (expert grid etp·ep·edp·pp = world)";
    }
    return kExpertGridNotDividingWorld;
  }
  return kOk;
}

Reason CheckEp(const ModelSpec& model, int64_t dp_cp, int64_t ep,
               std::string* detail) {
  if (ep < 1) {
    if (detail) *detail = "ep " + to_string(ep) + " must be at least 1";
    return kNonpositiveSize;
  }
  if (ep == 1) return kOk;
  if (!model.is_moe() || model.num_experts % ep != 0) {
    if (detail) {
      *detail = "ep " + to_string(ep) + " does not divide num_experts " +
                to_string(model.num_experts);
    }
    return kEpNotDividingExperts;
  }
  if (dp_cp % ep != 0) {
    if (detail) {
      *detail = "ep " + to_string(ep) +
                " does not divide dp·cp = " + to_string(dp_cp) +
                " (expert grid etp·ep·edp = tp·cp·dp)";
    }
    return kEpNotDividingDpCp;
  }
  return kOk;
}

Reason CheckMbs(int64_t gbs, int64_t dp, int64_t mbs, std::string* detail) {
  if (mbs < 1) {
    if (detail) *detail = "mbs " + to_string(mbs) + " must be at least 1";
    return kNonpositiveSize;
  }
  if (gbs % (mbs * dp) != 0) {
    if (detail) {
      *detail = "global_batch_size " + to_string(gbs) +
                " is not divisible by mbs·dp = " + to_string(mbs * dp);
    }
    return kGbsNotDivisibleByMbsDp;
  }
  return kOk;
}

// `m` = micro-batches per step.
Reason CheckVpp(const ModelSpec& model, int64_t pp, int64_t vpp, int64_t m,
                std::string* detail) {
  if (vpp < 1) {
    if (detail) *detail = "vpp " + to_string(vpp) + " must be at least 1";
    return kNonpositiveSize;
  }
  if (vpp == 1) {
    if (pp >= 2 && LayoutOptions(model.num_layers, pp, 1).empty()) {
      if (detail) {
        *detail = "num_layers " + to_string(model.num_layers) +
                  " has no layout over pp " + to_string(pp) +
                  " without interleaving";
      }
      return kLayersNotDivisibleByPpVpp;
    }
    return kOk;
  }
  if (pp < 2) {
    if (detail) {
      *detail = "vpp " + to_string(vpp) + " (interleaving) needs pp >= 2";
    }
    return kVppRequiresPp;
  }
  if (LayoutOptions(model.num_layers, pp, vpp).empty()) {
    if (detail) {
      *detail = "num_layers " + to_string(model.num_layers) +
                " is not divisible by pp·vpp = " + to_string(pp * vpp) +
                ", even counting the embedding and loss as layers (" +
                to_string(model.num_layers + 2) +
                "), and no uneven first/last layout fits";
    }
    return kLayersNotDivisibleByPpVpp;
  }
  if (m % pp != 0) {
    if (detail) {
      *detail = "interleaving needs the " + to_string(m) +
                " micro-batches to be a multiple of pp " + to_string(pp);
    }
    return kMicrobatchesVsPp;
  }
  return kOk;
}

Reason CheckSp(const ModelSpec& model, int64_t tp, bool sp,
               std::string* detail) {
  if (sp && tp == 1) {
    if (detail) *detail = "sequence parallel needs tp > 1";
    return kSpRequiresTp;
  }
  if (model.is_moe() && tp > 1 && !sp) {
    if (detail) {
      *detail = "MoE with tp " + to_string(tp) +
                " needs sequence parallelism in training";
    }
    return kMoeTpRequiresSp;
  }
  return kOk;
}

// `chunk_layers` = num_layers / (pp·vpp).
Reason CheckRecompute(const Recompute& r, int64_t chunk_layers,
                      std::string* detail) {
  if (r.granularity != RecomputeGranularity::kFull) return kOk;
  if (r.num_layers < 1 || r.num_layers > chunk_layers) {
    if (detail) {
      *detail = "recompute_num_layers " + to_string(r.num_layers) +
                " is outside [1, " + to_string(chunk_layers) +
                "] (layers per virtual stage)";
    }
    return kRecomputeNumLayersOutOfRange;
  }
  return kOk;
}

Reason CheckEpOverlap(const ModelSpec& model, const TrainingSpec& training,
                      const ParallelConfig& c, std::string* detail) {
  if (!training.moe_ep_overlap || !model.is_moe()) return kOk;
  const std::string why = EpOverlapRefusal(model, c);
  if (why.empty()) return kOk;
  if (detail) *detail = "EP communication overlap " + why;
  return kEpOverlapPreconditions;
}

Reason CheckAll(const ModelSpec& model, const TrainingSpec& training,
                const ParallelConfig& c, std::string* detail) {
  const int64_t n = training.num_gpus;
  if (n < 1 || training.global_batch_size < 1 || c.dp < 1) {
    if (detail) {
      *detail = "num_gpus, global_batch_size and dp must be at least 1";
    }
    return kNonpositiveSize;
  }
  Reason r;
  if ((r = CheckTp(model, n, c.tp, detail)) != kOk) return r;
  if ((r = CheckPp(model, n / c.tp, c.pp, detail)) != kOk) return r;
  if ((r = CheckCp(training.seq_length, n / (c.tp * c.pp), c.cp, detail)) !=
      kOk) {
    return r;
  }
  if ((r = CheckModelCp(model, c.tp, c.cp, detail)) != kOk) return r;
  if (c.world() != n) {
    if (detail) {
      *detail = "tp·pp·cp·dp = " + to_string(c.world()) + " but there are " +
                to_string(n) + " GPUs";
    }
    return kWorldNotDivisible;
  }
  if ((r = CheckDp(training.global_batch_size, c.dp, detail)) != kOk) return r;
  if ((r = CheckEtp(model, c.tp, c.tp * c.cp * c.dp, c.expert_tp(), c.ep,
                    detail)) != kOk) {
    return r;
  }
  if ((r = CheckEp(model, c.tp * c.cp * c.dp / c.expert_tp(), c.ep, detail)) !=
      kOk) {
    return r;
  }
  if ((r = CheckMbs(training.global_batch_size, c.dp, c.mbs, detail)) != kOk) {
    return r;
  }
  if ((r = CheckVpp(model, c.pp, c.vpp,
                    c.num_microbatches(training.global_batch_size), detail)) !=
      kOk) {
    return r;
  }
  if (!PipelineLayout::Valid(model.num_layers, c)) {
    if (detail) {
      *detail = "the layout (first " + to_string(c.layout_first_layers) +
                ", last " + to_string(c.layout_last_layers) +
                " layers) does not split num_layers " +
                to_string(model.num_layers) +
                " over pp·vpp = " + to_string(c.pp * c.vpp) +
                " evenly in the middle stages";
    }
    return kLayersNotDivisibleByPpVpp;
  }
  if ((r = CheckSp(model, c.tp, c.sp, detail)) != kOk) return r;
  if ((r = CheckRecompute(c.recompute,
                          PipelineLayout(model.num_layers, c).units_per_chunk(),
                          detail)) != kOk) {
    return r;
  }
  return CheckEpOverlap(model, training, c, detail);
}

// ---- Axis domains. ----

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d * d <= n; ++d) {
    if (n % d == 0) {
      out.push_back(d);
      if (d != n / d) out.push_back(n / d);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int64_t> SortedUnique(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

bool Contains(const std::vector<int64_t>& v, int64_t x) {
  return std::binary_search(v.begin(), v.end(), x);
}

// false before true; `allowed` is used when there is no pin.
std::vector<bool> BoolDomain(const std::vector<bool>& pins,
                             const std::vector<bool>& allowed) {
  if (pins.empty()) return allowed;
  std::vector<bool> out;
  for (bool value : {false, true}) {
    if (std::find(pins.begin(), pins.end(), value) != pins.end()) {
      out.push_back(value);
    }
  }
  return out;
}

Recompute MakeFull(RecomputeMethod method, int64_t num_layers) {
  Recompute r;
  r.granularity = RecomputeGranularity::kFull;
  r.method = method;
  r.num_layers = num_layers;
  return r;
}

// Every full-recompute variant for `chunk_layers` layers per virtual stage:
// uniform with 1 layer per checkpoint (every layer's input saved), then block
// with k = 1, 2, 4, ... < chunk_layers layers recomputed. Block with k =
// chunk_layers recomputes the same layers from the same saved inputs as
// uniform 1, so it is left out as a duplicate.
void AppendFullVariants(int64_t chunk_layers, std::vector<Recompute>* out) {
  out->push_back(MakeFull(RecomputeMethod::kUniform, 1));
  for (int64_t k = 1; k < chunk_layers; k *= 2) {
    out->push_back(MakeFull(RecomputeMethod::kBlock, k));
  }
}

struct RecomputeDomain {
  std::vector<Recompute> valid;
  std::vector<Reason> pruned;  // one entry per rejected pinned variant
};

RecomputeDomain MakeRecomputeDomain(const std::vector<Recompute>& pins,
                                    int64_t chunk_layers) {
  RecomputeDomain d;
  Recompute none, selective;
  selective.granularity = RecomputeGranularity::kSelective;
  if (pins.empty()) {
    d.valid.push_back(none);
    d.valid.push_back(selective);
    AppendFullVariants(chunk_layers, &d.valid);
    return d;
  }
  std::vector<Recompute> wanted;
  for (const Recompute& pin : pins) {
    if (pin.granularity == RecomputeGranularity::kFull && pin.num_layers == 0) {
      AppendFullVariants(chunk_layers, &wanted);
    } else {
      wanted.push_back(pin);
    }
  }
  std::vector<Recompute> unique;
  for (const Recompute& r : wanted) {
    if (std::find(unique.begin(), unique.end(), r) == unique.end()) {
      unique.push_back(r);
    }
  }
  for (const Recompute& r : unique) {
    const Reason reason = CheckRecompute(r, chunk_layers, nullptr);
    if (reason == kOk) {
      d.valid.push_back(r);
    } else {
      d.pruned.push_back(reason);
    }
  }
  // Fixed order regardless of pin order: none, selective, full uniform, full
  // block, each by num_layers.
  auto key = [](const Recompute& r) {
    return std::make_tuple(static_cast<int>(r.granularity),
                           static_cast<int>(r.method), r.num_layers);
  };
  std::sort(
      d.valid.begin(), d.valid.end(),
      [&](const Recompute& a, const Recompute& b) { return key(a) < key(b); });
  return d;
}

}  // namespace

std::string CheckConfig(const ModelSpec& model, const TrainingSpec& training,
                        const ClusterSpec& cluster, const ParallelConfig& c,
                        std::string* detail) {
  // The cluster does not restrict Megatron's rules: tp beyond the NVLink
  // domain is legal (just slow), so it is only a search-space bound.
  (void)cluster;
  if (detail) detail->clear();
  return kReasonNames[CheckAll(model, training, c, detail)];
}

Enumeration EnumerateConfigs(const ModelSpec& model,
                             const TrainingSpec& training,
                             const ClusterSpec& cluster,
                             const SearchSpace& space) {
  std::array<int64_t, kNumReasons> pruned{};
  Enumeration result;
  const int64_t n = training.num_gpus;
  const int64_t gbs = training.global_batch_size;
  const int64_t layers = model.num_layers;

  if (n < 1 || gbs < 1 || layers < 1) {
    pruned[kNonpositiveSize] = 1;
  } else {
    const int64_t max_tp =
        space.max_tp > 0 ? space.max_tp : cluster.nvlink_domain_gpus;
    const std::vector<int64_t> dp_pins = SortedUnique(space.dp);
    // A pinned dp that cannot divide the world is reported once; other dp
    // values are simply outside the pinned space.
    for (int64_t dp : dp_pins) {
      if (dp < 1) {
        ++pruned[kNonpositiveSize];
      } else if (n % dp != 0) {
        ++pruned[kWorldNotDivisible];
      }
    }
    const std::vector<int64_t> ep_pins = SortedUnique(space.ep);
    const std::vector<int64_t> etp_pins = SortedUnique(space.etp);
    const std::vector<int64_t> vpp_pins = SortedUnique(space.vpp);
    const std::vector<int64_t> mbs_pins = SortedUnique(space.mbs);
    const std::vector<int64_t> experts =
        model.is_moe() ? Divisors(model.num_experts) : std::vector<int64_t>{1};
    std::vector<int64_t> mbs_all;
    // Powers of two; the second bound stops the doubling before it could
    // overflow for a max_mbs near INT64_MAX (limits.h keeps it far below).
    for (int64_t mbs = 1; mbs <= std::max<int64_t>(space.max_mbs, 1) &&
                          mbs <= std::numeric_limits<int64_t>::max() / 2;
         mbs *= 2) {
      mbs_all.push_back(mbs);
    }
    // Recompute domains depend only on layers per virtual stage. Keyed by
    // that count, so memory follows the few counts met, not num_layers (a
    // vector indexed by it took gigabytes for a 10^8-layer model file).
    std::map<int64_t, RecomputeDomain> recompute_by_chunk;

    const bool tp_pinned = !space.tp.empty();
    const std::vector<int64_t> tps =
        tp_pinned ? SortedUnique(space.tp) : Divisors(n);
    for (int64_t tp : tps) {
      if (!tp_pinned && tp > max_tp) {
        ++pruned[kTpExceedsNvlinkDomain];
        continue;
      }
      if (Reason r = CheckTp(model, n, tp, nullptr); r != kOk) {
        ++pruned[r];
        continue;
      }
      const std::vector<bool> sps =
          BoolDomain(space.sp, tp > 1 ? std::vector<bool>{false, true}
                                      : std::vector<bool>{false});
      const std::vector<int64_t> pps =
          space.pp.empty() ? Divisors(n / tp) : SortedUnique(space.pp);
      for (int64_t pp : pps) {
        if (Reason r = CheckPp(model, n / tp, pp, nullptr); r != kOk) {
          ++pruned[r];
          continue;
        }
        const std::vector<int64_t> cps =
            space.cp.empty() ? Divisors(n / (tp * pp)) : SortedUnique(space.cp);
        std::vector<int64_t> vpps = vpp_pins;
        if (vpps.empty()) {
          // Even splits, and splits that count the embedding and the loss
          // as layers (PipelineLayout); CheckVpp keeps the valid ones.
          vpps = {1};
          if (pp >= 2) {
            std::vector<int64_t> all = Divisors(layers);
            const std::vector<int64_t> more = Divisors(layers + 2);
            all.insert(all.end(), more.begin(), more.end());
            // ... and the uneven family up to kMaxUnevenVpp chunks.
            for (int64_t v = 1; v <= kMaxUnevenVpp; ++v) all.push_back(v);
            vpps.clear();
            for (int64_t v : SortedUnique(all)) {
              if (!LayoutOptions(layers, pp, v).empty()) vpps.push_back(v);
            }
          }
        }
        for (int64_t cp : cps) {
          if (Reason r =
                  CheckCp(training.seq_length, n / (tp * pp), cp, nullptr);
              r != kOk) {
            ++pruned[r];
            continue;
          }
          if (Reason r = CheckModelCp(model, tp, cp, nullptr); r != kOk) {
            ++pruned[r];
            continue;
          }
          const int64_t dp = n / (tp * pp * cp);
          if (!dp_pins.empty() && !Contains(dp_pins, dp)) continue;
          if (Reason r = CheckDp(gbs, dp, nullptr); r != kOk) {
            ++pruned[r];
            continue;
          }
          const std::vector<bool> dist_opts = BoolDomain(
              space.dist_opt, dp * cp > 1 ? std::vector<bool>{false, true}
                                          : std::vector<bool>{false});
          const std::vector<int64_t>& eps = ep_pins.empty() ? experts : ep_pins;
          // Expert TP: pinned values, or 1, 2, 4, 8 (up to max_tp) and tp
          // itself (Megatron's default) for an MoE model; dense models keep
          // etp = tp (0).
          std::vector<int64_t> etps = etp_pins;
          if (!model.is_moe()) {
            etps = {0};
          } else if (etps.empty()) {
            for (int64_t e = 1; e <= std::min<int64_t>(8, max_tp); e *= 2) {
              etps.push_back(e);
            }
            etps.push_back(tp);
            etps = SortedUnique(etps);
          }
          for (int64_t etp : etps) {
            if (etp != 0) {
              if (Reason r = CheckEtp(model, tp, tp * cp * dp, etp, 1, nullptr);
                  r != kOk) {
                ++pruned[r];
                continue;
              }
            }
            const int64_t etp_size = etp > 0 ? etp : tp;
            for (int64_t ep : eps) {
              if (etp != 0) {
                if (Reason r =
                        CheckEtp(model, tp, tp * cp * dp, etp, ep, nullptr);
                    r != kOk) {
                  ++pruned[r];
                  continue;
                }
              }
              if (Reason r =
                      CheckEp(model, tp * cp * dp / etp_size, ep, nullptr);
                  r != kOk) {
                ++pruned[r];
                continue;
              }
              const std::vector<int64_t>& mbss =
                  mbs_pins.empty() ? mbs_all : mbs_pins;
              for (int64_t mbs : mbss) {
                if (Reason r = CheckMbs(gbs, dp, mbs, nullptr); r != kOk) {
                  ++pruned[r];
                  continue;
                }
                const int64_t m = gbs / (mbs * dp);
                for (int64_t vpp : vpps) {
                  if (Reason r = CheckVpp(model, pp, vpp, m, nullptr);
                      r != kOk) {
                    ++pruned[r];
                    continue;
                  }
                  for (const auto& [first, last] :
                       LayoutOptions(layers, pp, vpp)) {
                    ParallelConfig c;
                    c.layout_first_layers = first;
                    c.layout_last_layers = last;
                    c.pp = pp;
                    c.vpp = vpp;
                    const int64_t chunk_layers =
                        PipelineLayout(layers, c).units_per_chunk();
                    auto domain = recompute_by_chunk.find(chunk_layers);
                    if (domain == recompute_by_chunk.end()) {
                      domain = recompute_by_chunk
                                   .emplace(chunk_layers,
                                            MakeRecomputeDomain(space.recompute,
                                                                chunk_layers))
                                   .first;
                    }
                    const RecomputeDomain& recomputes = domain->second;
                    c.tp = tp;
                    c.etp = etp;
                    c.pp = pp;
                    c.vpp = vpp;
                    c.cp = cp;
                    c.dp = dp;
                    c.ep = ep;
                    c.mbs = mbs;
                    for (bool sp : sps) {
                      if (Reason r = CheckSp(model, tp, sp, nullptr);
                          r != kOk) {
                        ++pruned[r];
                        continue;
                      }
                      c.sp = sp;
                      for (Reason r : recomputes.pruned) ++pruned[r];
                      for (const Recompute& recompute : recomputes.valid) {
                        c.recompute = recompute;
                        if (Reason r =
                                CheckEpOverlap(model, training, c, nullptr);
                            r != kOk) {
                          ++pruned[r];
                          continue;
                        }
                        for (bool dist_opt : dist_opts) {
                          c.dist_opt = dist_opt;
                          result.configs.push_back(c);
                        }
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }

  result.considered = static_cast<int64_t>(result.configs.size());
  for (int reason = 1; reason < kNumReasons; ++reason) {
    if (pruned[reason] > 0) {
      result.pruned[kReasonNames[reason]] = pruned[reason];
      result.considered += pruned[reason];
    }
  }
  return result;
}

// --overlap-moe-expert-parallel-comm preconditions (transformer_config.py,
// docs/sources.md §2.3): ep > 1, the alltoall or flex dispatcher, no full
// recompute, at most one MTP layer, and virtual stages when pp > 1.
std::string EpOverlapRefusal(const ModelSpec& model, const ParallelConfig& c) {
  if (c.ep < 2) return "needs ep > 1";
  if (model.moe_token_dispatcher_type == TokenDispatcher::kAllgather) {
    return "needs the alltoall or flex dispatcher";
  }
  if (c.recompute.granularity == RecomputeGranularity::kFull) {
    return "does not support full recompute";
  }
  if (model.mtp_num_layers > 1) return "supports at most one MTP layer";
  if (c.pp > 1 && c.vpp < 2) return "needs virtual pipeline stages when pp > 1";
  return "";
}

}  // namespace meshtune::search_spaces
