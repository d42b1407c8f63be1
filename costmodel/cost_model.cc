// The step estimator: memory on the most loaded stage and the exposed time of
// every part of one optimizer step. docs/costmodel.md has every formula and
// its source; the comments here say what each block models.
#include "costmodel/cost_model.h"

#include <algorithm>
#include <cmath>

#include "costmodel/comm_model.h"
#include "costmodel/compute_model.h"
#include "costmodel/ep_overlap.h"
#include "costmodel/host_launch.h"
#include "costmodel/memory_model.h"
#include "costmodel/model_stats.h"
#include "search_spaces/comm_ops.h"
#include "search_spaces/pipeline_layout.h"
#include "search_spaces/pipeline_schedule.h"

namespace meshtune::costmodel {

using search_spaces::ClusterSpec;
using search_spaces::LayerKind;
using search_spaces::Mixer;
using search_spaces::Mlp;
using search_spaces::ModelSpec;
using search_spaces::ParallelConfig;
using search_spaces::PipelineSchedule;
using search_spaces::Precision;
using search_spaces::RecomputeGranularity;
using search_spaces::RecomputeMethod;
using search_spaces::TokenDispatcher;
using search_spaces::TpCommOp;
using search_spaces::TrainingSpec;
using search_spaces::TransformerLayerTpCommOps;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// Megatron DDP bucket: max(40M, 1M·dp) parameters
// (distributed_data_parallel_config.py).
constexpr double kBucketParams = 40e6;

// TE userbuffers registered by --tp-comm-overlap (see EstimateConfig).
constexpr double kUserbufferCount = 10;

// --tp-comm-overlap takes effect only with SP and tp > 1 (TE userbuffers
// overlap the SP all-gathers / reduce-scatters).
bool UsesTpCommOverlap(const TrainingSpec& training, const ParallelConfig& c,
                       const ModelOptions& options) {
  return training.tp_comm_overlap && c.sp && c.tp > 1 &&
         options.enabled(Refinement::kTpCommOverlapUserbuffers);
}

// Exposed part of `comm` running concurrently with `compute`.
double Exposed(double comm, double compute) {
  return std::max(0.0, comm - compute);
}

// TP/SP, CP and EP communication of one layer for one micro-batch (exposed
// seconds), split into the forward part (repeated by full recompute) and
// the backward part.
struct LayerComm {
  double tp_fwd_s = 0, tp_bwd_s = 0;
  double cp_fwd_s = 0, cp_bwd_s = 0;
  double ep_fwd_s = 0, ep_bwd_s = 0;
};

LayerComm LayerCommTime(const ModelSpec& m, const ParallelConfig& c,
                        int64_t seq, LayerKind kind, bool tp_comm_overlap,
                        const LayerCompute& lc, const CommGroup& tp_group,
                        const CommGroup& cp_group, const CommGroup& ep_group,
                        const CommGroup& etp_group, const Calibration& cal,
                        const ModelOptions& options) {
  LayerComm out;
  const bool moe_layer = kind.mlp == Mlp::kMoe;
  const double T = static_cast<double>(c.mbs) * seq / c.cp;
  const double act_bytes = 2.0 * T * m.hidden_size;  // [T, h] in 16-bit
  if (c.tp > 1) {
    // The collectives themselves come from the list the engine also issues
    // (search_spaces/comm_ops.h); overlap is this model's business.
    double fwd = 0, bwd = 0;
    for (const TpCommOp& op :
         TransformerLayerTpCommOps(c, seq / c.cp, m.hidden_size, false)) {
      const double t =
          cal.CollectiveTime_s(op.kind, 2.0 * op.elements, tp_group, options);
      (op.phase == TpCommOp::Phase::kBackward ? bwd : fwd) += t;
    }
    out.tp_fwd_s = fwd;
    out.tp_bwd_s = bwd;
    if (c.sp) {
      // Backward: the AG of the grad before each row-parallel dgrad stays
      // exposed, the input re-gather for wgrad hides behind the column
      // dgrad, the grad-input RS behind the column wgrad
      // (tensor_parallel/layers.py).
      const double ag = cal.CollectiveTime_s(Collective::kAllGather, act_bytes,
                                             tp_group, options);
      const double rs = cal.CollectiveTime_s(Collective::kReduceScatter,
                                             act_bytes, tp_group, options);
      if (options.enabled(Refinement::kTpOverlap)) {
        out.tp_bwd_s = 2 * ag + Exposed(2 * ag, lc.column_dgrad_s) +
                       Exposed(2 * rs, lc.column_wgrad_s);
      }
      if (tp_comm_overlap &&
          options.enabled(Refinement::kTpCommOverlapUserbuffers)) {
        // TE userbuffers split each AG/RS into t chunks pipelined with the
        // matching GEMM chunks (ring exchange on copy engines): only the
        // first (AG) or last (RS) chunk, 1/t of the collective, stays
        // exposed unless the collective outlasts its GEMMs. Backward:
        // the dgrad AG/RS pipeline with the dgrad GEMMs, the input
        // re-gather and grad RS run in bulk during dgrad/wgrad.
        const double t = static_cast<double>(c.tp);
        out.tp_fwd_s = std::max(fwd / t, fwd - lc.gemm_fwd_s);
        out.tp_bwd_s = std::max(bwd / t, bwd - lc.gemm_bwd_s);
      }
    } else if (options.enabled(Refinement::kTpOverlap)) {
      // Backward: the async AR of the grad input of QKV and fc1 runs during
      // their wgrad.
      out.tp_bwd_s = Exposed(bwd, lc.column_wgrad_s);
    }
  }
  // A hybrid layer holds one block (mixer or MLP), so half a GPT layer's
  // TP collectives.
  if (kind.mixer == Mixer::kNone || kind.mlp == Mlp::kNone) {
    out.tp_fwd_s *= 0.5;
    out.tp_bwd_s *= 0.5;
  }
  const bool attention =
      kind.mixer == Mixer::kAttention || kind.mixer == Mixer::kMla;
  if (c.cp > 1 && attention) {
    // Ring attention: cp−1 steps passing this rank's K and V chunk
    // (2·T·g·d_h/t elements; MLA up-projects full per-head K and V,
    // n·(d_qk + d_v)), overlapped with the attention of the chunk in hand;
    // backward also returns dK, dV (2× the bytes).
    const int64_t dh = m.kv_channels > 0
                           ? m.kv_channels
                           : m.hidden_size / m.num_attention_heads;
    const double kv_elems = kind.mixer == Mixer::kMla
                                ? static_cast<double>(m.num_attention_heads) *
                                      (m.mla_qk_head_dim() + m.v_head_dim)
                                : 2.0 * m.num_query_groups * dh;
    const double kv_bytes = 2.0 * T * kv_elems / static_cast<double>(c.tp);
    const double step = cal.CollectiveTime_s(Collective::kSendRecv, kv_bytes,
                                             cp_group, options);
    const double fwd = (c.cp - 1) * step;
    const bool overlap = options.enabled(Refinement::kCpOverlap);
    out.cp_fwd_s = overlap ? Exposed(fwd, lc.attn_fwd_s) : fwd;
    out.cp_bwd_s = overlap ? Exposed(2 * fwd, lc.attn_bwd_s) : 2 * fwd;
  }
  const int64_t etp_size = c.expert_tp();
  if (moe_layer && (c.ep > 1 || etp_size > 1)) {
    // alltoall dispatcher: A2A(EP) dispatch and combine of the k routed
    // copies of this rank's T/t tokens (at the latent width for latent
    // MoE), and the expert-TP AG/RS of the routed tokens inside the etp
    // group; backward repeats both. Not overlapped (Megatron default).
    // The busiest EP rank receives ι× the mean (MoeLoadImbalance).
    const double width =
        m.moe_latent_size > 0 ? m.moe_latent_size : m.hidden_size;
    const double routed_bytes = 2.0 * T * width;
    const double imbalance = MoeLoadImbalance(m, options);
    const double k = static_cast<double>(m.moe_router_topk) * imbalance;
    const double a2a =
        m.moe_token_dispatcher_type == TokenDispatcher::kFlex &&
                options.enabled(Refinement::kFlexDispatcherDedup)
            ? FlexDispatchTime_s(routed_bytes * imbalance / c.tp,
                                 static_cast<double>(m.moe_router_topk),
                                 ep_group, cal, options)
            : cal.CollectiveTime_s(Collective::kAllToAll,
                                   k * routed_bytes / c.tp, ep_group, options);
    double etp = 0;
    if (etp_size > 1) {
      const double bytes = k * routed_bytes * etp_size / c.tp;
      etp = cal.CollectiveTime_s(Collective::kAllGather, bytes, etp_group,
                                 options) +
            cal.CollectiveTime_s(Collective::kReduceScatter, bytes, etp_group,
                                 options);
    }
    out.ep_fwd_s = 2 * a2a + etp;
    out.ep_bwd_s = 2 * a2a + etp;
  }
  return out;
}

// Exposed seconds of a bucketed DP collective overlapped with `window`:
// everything but the last bucket can hide behind the window.
double BucketedExposed(Collective op, double params, double bytes_per_param,
                       int64_t group_size, const CommGroup& group,
                       double window, const Calibration& cal,
                       const ModelOptions& options) {
  if (group.size <= 1 || params <= 0) return 0.0;
  const double bucket =
      std::min(params, std::max(kBucketParams, 1e6 * group_size));
  const double buckets = std::ceil(params / bucket);
  const double one =
      cal.CollectiveTime_s(op, bucket * bytes_per_param, group, options);
  const double total = buckets * one;
  if (!options.enabled(Refinement::kDpOverlap)) return total;
  return one + Exposed(total - one, window);
}

}  // namespace

double CoreSharing_s(double step_s, double mean_busy_s, int64_t ranks_per_node,
                     int64_t host_cores) {
  if (host_cores <= 0 || ranks_per_node <= host_cores) return 0.0;
  const double shared_s = static_cast<double>(ranks_per_node) /
                          static_cast<double>(host_cores) *
                          std::max(0.0, mean_busy_s);
  return std::max(0.0, shared_s - step_s);
}

Estimate EstimateConfig(const ModelSpec& model, const ClusterSpec& cluster,
                        const TrainingSpec& training, const ParallelConfig& c,
                        const Calibration& calibration) {
  return Estimator(model, cluster, training, calibration)(c);
}

Estimate EstimateConfig(const ModelSpec& model, const ClusterSpec& cluster,
                        const TrainingSpec& training, const ParallelConfig& c,
                        const Calibration& calibration,
                        const ModelOptions& options) {
  return Estimator(model, cluster, training, calibration, options)(c);
}

Estimator::Estimator(const ModelSpec& model, const ClusterSpec& cluster,
                     const TrainingSpec& training,
                     const Calibration& calibration,
                     const ModelOptions& options)
    : model_(model),
      cluster_(cluster),
      training_(training),
      calibration_(calibration),
      options_(options),
      layers_(model) {}

const ModelStats& Estimator::StatsFor(int64_t padded_vocab) const {
  for (const auto& [vocab, stats] : stats_) {
    if (vocab == padded_vocab) return stats;
  }
  const int64_t seq = training_.seq_length;
  const int64_t positions =
      model_.seq_length > 0 ? std::max(model_.seq_length, seq) : seq;
  stats_.emplace_back(padded_vocab,
                      ComputeModelStats(model_, padded_vocab, positions));
  return stats_.back().second;
}

const Estimator::StagePlan& Estimator::PlanFor(const ParallelConfig& c) const {
  const auto key =
      std::make_tuple(c.pp, c.vpp, c.layout_first_layers, c.layout_last_layers);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    search_spaces::PipelineLayout layout(model_.num_layers, c);
    std::vector<StageClass> stages = DistinctStages(model_, layers_, layout, c);
    it = plans_.emplace(key, StagePlan{std::move(layout), std::move(stages)})
             .first;
  }
  return it->second;
}

const std::vector<StageStatics>& Estimator::StaticsFor(
    const ParallelConfig& c, const StagePlan& plan,
    const ModelStats& stats) const {
  const auto key =
      std::make_tuple(c.pp, c.vpp, c.layout_first_layers, c.layout_last_layers,
                      c.tp, c.ep, c.expert_tp());
  auto it = statics_.find(key);
  if (it == statics_.end()) {
    std::vector<StageStatics> statics;
    statics.reserve(plan.stages.size());
    for (const StageClass& sc : plan.stages) {
      statics.push_back(StageStaticsOf(model_, layers_, stats, c, sc));
    }
    it = statics_.emplace(key, std::move(statics)).first;
  }
  return it->second;
}

Estimate Estimator::operator()(const ParallelConfig& c,
                               bool time_out_of_memory) const {
  const ModelSpec& model = model_;
  const ClusterSpec& cluster = cluster_;
  const TrainingSpec& training = training_;
  const Calibration& calibration = calibration_;
  const ModelOptions& options = options_;
  Estimate est;
  est.config = c;
  est.calibration = calibration.Name();
  const int64_t seq = training.seq_length;
  const Precision prec = training.precision;
  const int64_t padded_vocab = PaddedVocabSize(model.vocab_size, c.tp);
  const ModelStats& stats = StatsFor(padded_vocab);
  const int64_t m =
      std::max<int64_t>(1, c.num_microbatches(training.global_batch_size));
  const PipelineSchedule schedule(c.pp, c.vpp, m);
  const StagePlan& plan = PlanFor(c);
  const search_spaces::PipelineLayout& layout = plan.layout;
  const std::vector<StageStatics>& statics = StaticsFor(c, plan, stats);

  // ---- Memory: the most loaded pipeline stage (memory_model.h).
  const StateBytes state_bytes{training.weight_bytes_per_param(),
                               training.grad_bytes_per_param()};
  // Every stage of the layout; the most loaded one's allocated peak.
  est.memory =
      MostLoadedStage(model, layers_, stats, c, plan.stages, statics, seq, prec,
                      schedule, calibration.UsesFlashAttention(),
                      MemoryRecipeFor(training))
          .memory;
  if (UsesTpCommOverlap(training, c, options)) {
    // Userbuffers: Transformer Engine's initialize_ub registers one
    // [T, h] 16-bit buffer per overlapped GEMM (qkv/fc1 fprop, proj/fc2
    // dgrad ring-exchange; proj/fc2 fprop pipelined; qkv/fc1 dgrad and
    // wgrad bulk): 10 of them, T = mbs·seq/cp.
    est.memory.other_bytes += kUserbufferCount * 2.0 * c.mbs *
                              static_cast<double>(seq) / c.cp *
                              model.hidden_size;
  }
  est.memory_capacity_bytes = cluster.UsableMemoryGib() * kGiB;
  est.fits = est.memory.total_bytes() <= est.memory_capacity_bytes;
  if (!est.fits) est.infeasible_reason = "out_of_memory";
  if (!est.fits && !time_out_of_memory) return est;

  // ---- Placement of the groups (Megatron order tp-cp-ep-dp-pp).
  const int64_t domain = cluster.nvlink_domain_gpus > 0
                             ? cluster.nvlink_domain_gpus
                             : std::max(1, cluster.gpus_per_node);
  const CommGroup tp_group = AxisGroup(1, c.tp, domain);
  const CommGroup cp_group = AxisGroup(c.tp, c.cp, domain);
  // The expert grid folds etp·ep over the dense tp·cp·dp ranks (Megatron
  // order tp-cp-ep-dp-pp; EP may span tp ranks when etp < tp).
  const CommGroup etp_group = AxisGroup(1, c.expert_tp(), domain);
  const CommGroup ep_group = AxisGroup(c.expert_tp(), c.ep, domain);
  const CommGroup dpcp_group = AxisGroup(c.tp, c.dp * c.cp, domain);
  // Expert data parallel over the folded grid: world / (etp·ep·pp).
  const int64_t edp = ExpertDataParallelSize(c);
  const CommGroup edp_group = AxisGroup(c.expert_tp() * c.ep, edp, domain);
  const CommGroup pp_group = AxisGroup(c.tp * c.cp * c.dp, c.pp, domain);

  // Megatron under PyTorch launches its eager modules from Python.
  const bool host_launch =
      training.python_launches && options.enabled(Refinement::kHostLaunch);
  // --fp8-dot-product-attention in an fp8 run (compute_model.h).
  const bool fp8_attention = training.fp8_dot_product_attention &&
                             search_spaces::IsFp8(prec) &&
                             options.enabled(Refinement::kFp8Attention);
  // Megatron's combined 1F1B EP overlap applies (it prices the all-to-alls
  // and the host launches below).
  const bool ep_overlap = training.moe_ep_overlap && model.is_moe() &&
                          c.ep > 1 &&
                          options.enabled(Refinement::kMoeEpOverlap);

  // ---- Each distinct layer kind once, one micro-batch.
  struct KindCost {
    LayerKind kind;
    LayerCompute c;
    LayerComm x;
    HostLaunch host;  // eager launches (host_launch.h)
  };
  std::vector<KindCost> kind_costs;
  auto cost_of = [&](LayerKind kind) -> const KindCost& {
    for (const KindCost& k : kind_costs) {
      if (k.kind == kind) return k;
    }
    KindCost k{kind, {}, {}, {}};
    k.c = LayerComputeTime(model, c, seq, prec, kind, calibration, options);
    if (fp8_attention) UseFp8CoreAttention(kind, &k.c);
    k.x = LayerCommTime(model, c, seq, kind, training.tp_comm_overlap, k.c,
                        tp_group, cp_group, ep_group, etp_group, calibration,
                        options);
    if (host_launch) {
      k.host = LayerHostLaunch(model, c, kind, training.cuda_graphs, ep_overlap,
                               cluster.host_launch_factor);
    }
    kind_costs.push_back(k);
    return kind_costs.back();
  };
  const std::vector<LayerKind>& mtp_kinds = layers_.mtp();

  // Logits on the last stage, embedding on the first; with pp == 1 both.
  const LayerCompute logits =
      LogitsComputeTime(model, c, seq, padded_vocab, prec, calibration, options,
                        CrossEntropyOp(training));
  const LayerCompute embed =
      EmbeddingComputeTime(model, c, seq, calibration, options);
  double logits_tp = 0;  // vocab-parallel CE: 3 small all-reduces of [T]
  if (c.tp > 1 && options.enabled(Refinement::kOutputLayer)) {
    const double T = static_cast<double>(c.mbs) * seq / c.cp;
    logits_tp = 3 * calibration.CollectiveTime_s(Collective::kAllReduce,
                                                 4.0 * T, tp_group, options);
  }

  // ---- Recompute: which fraction of the layers re-runs its forward.
  double full_fraction = 0;
  if (c.recompute.granularity == RecomputeGranularity::kFull) {
    full_fraction = 1.0;
    if (c.recompute.method == RecomputeMethod::kBlock) {
      const double per_chunk = static_cast<double>(layout.units_per_chunk());
      full_fraction = std::min(
          1.0, static_cast<double>(c.recompute.num_layers) / per_chunk);
    }
  }
  const bool selective =
      c.recompute.granularity == RecomputeGranularity::kSelective;

  // ---- EP overlap (--overlap-moe-expert-parallel-comm with
  // --delay-wgrad-compute): Megatron's combined 1F1B runs the forward of
  // one micro-batch (chunk) with the backward of another, each layer's
  // dispatch/combine all-to-alls on a separate stream behind the other
  // micro-batch's attention and expert compute
  // (megatron/core/pipeline_parallel/combined_1f1b.py). Only steps with a
  // partner overlap: without pipelining all but the first forward and the
  // last backward (1 of m unpaired); interleaved, the warm-up forwards and
  // flush backwards (rank 0's WarmupSteps of m·vpp chunk steps).
  double ep_unpaired = 1.0;
  if (ep_overlap) {
    const double steps = static_cast<double>(m) * c.vpp;
    const double alone =
        c.pp > 1 ? static_cast<double>(schedule.WarmupSteps(0)) : 1.0;
    ep_unpaired = std::min(1.0, alone / steps);
  }

  // ---- Per micro-batch on each stage: its layers (from the layout), the
  // embedding on the first, logits and MTP depths on the last. The slowest
  // stage sets the pace of the pipeline.
  struct StageWork {
    double compute = 0, recompute = 0, tp = 0, cp = 0, ep = 0;
    double host = 0;                  // waiting for eager launches
    double fwd = 0, bwd = 0;          // compute only (p2p overlap windows)
    double fwd_win = 0, bwd_win = 0;  // compute + TP (DP overlap windows)
    double total() const { return compute + recompute + tp + cp + ep + host; }
  };
  // `n` layers of `kind`.
  auto add_layer = [&](StageWork* w, LayerKind kind, double n) {
    const KindCost& k = cost_of(kind);
    const double f = k.c.fwd_s(), b = k.c.bwd_s();
    w->compute += n * (f + b);
    w->fwd += n * f;
    w->bwd += n * b;
    // Selective recompute re-runs the chosen modules' forwards; recomputing
    // the MoE block replays its dispatch and combine too.
    double ep_replays = full_fraction;
    if (selective) {
      w->recompute += n * SelectiveRecomputeTime_s(k.c, c.recompute.modules);
      if (kind.mlp == search_spaces::Mlp::kMoe &&
          (c.recompute.modules & search_spaces::kRecomputeMoe)) {
        ep_replays = 1;
      }
    } else if (full_fraction > 0) {
      w->recompute += n * full_fraction * f;
    }
    w->tp += n * (k.x.tp_fwd_s * (1 + full_fraction) + k.x.tp_bwd_s);
    w->cp += n * (k.x.cp_fwd_s * (1 + full_fraction) + k.x.cp_bwd_s);
    const double ep = k.x.ep_fwd_s * (1 + ep_replays) + k.x.ep_bwd_s;
    // Paired steps hide the all-to-alls behind the partner's compute, stage
    // by stage (ep_overlap.h).
    const double paired =
        ep_unpaired < 1.0
            ? PairedEpExposed_s(k.x.ep_fwd_s / 2, k.x.ep_bwd_s / 2, f, b,
                                k.c.moe_fwd_s, k.x.ep_fwd_s * ep_replays)
            : 0.0;
    w->ep += n * (ep_unpaired * ep + (1 - ep_unpaired) * paired);
    w->fwd_win += n * (f + k.x.tp_fwd_s);
    w->bwd_win += n * (b + k.x.tp_bwd_s);
    // Each phase lasts at least as long as the host takes to launch it.
    if (host_launch) {
      const HostLaunch& h = k.host;
      w->host +=
          n *
          (HostWait_s(h.fwd_s, f + k.x.tp_fwd_s + k.x.cp_fwd_s + k.x.ep_fwd_s) +
           HostWait_s(h.bwd_s, b + k.x.tp_bwd_s + k.x.cp_bwd_s + k.x.ep_bwd_s) +
           h.sync_fwd_s);
    }
  };
  // Embedding, logits and MTP glue: compute, but not part of the chunk
  // windows the p2p and DP transfers hide behind.
  auto add_edge = [&](StageWork* w, const LayerCompute& e, double tp_s) {
    w->compute += e.fwd_s() + e.bwd_s();
    w->tp += tp_s;
  };
  // Middle stages holding the same layers do the same work: each distinct
  // set is costed once (DistinctStages, prepared once per layout).
  StageWork pace;
  double all_stages_s = 0;  // Σ over the pp ranks of one micro-batch's work
  bool first_stage = true;
  for (const StageClass& sc : plan.stages) {
    const int64_t stage = sc.stage;
    const StageLayers& sl = sc.layers;
    StageWork w;
    for (const KindCount& k : sl.kinds) {
      add_layer(&w, k.kind, static_cast<double>(k.count));
    }
    if (stage == 0) add_edge(&w, embed, 0.0);
    if (stage == c.pp - 1) {
      add_edge(&w, logits, logits_tp);
      // MTP (Megatron's default placement: the last stage): each depth
      // runs its layers, a 2h -> h projection and one more output layer.
      for (int64_t d = 0; d < model.mtp_num_layers; ++d) {
        for (const LayerKind& kind : mtp_kinds) add_layer(&w, kind, 1.0);
        add_edge(&w, logits, logits_tp);
        LayerCompute glue;
        const double T = static_cast<double>(c.mbs) * seq / c.cp;
        const double fwd = calibration.GemmTime_s(
            static_cast<int64_t>(T), model.hidden_size / c.tp,
            2 * model.hidden_size, prec, options);
        glue.gemm_fwd_s = fwd;
        glue.gemm_bwd_s = 2 * fwd;
        add_edge(&w, glue, 0.0);
      }
    }
    all_stages_s += static_cast<double>(sc.count) * w.total();
    if (first_stage || w.total() > pace.total()) pace = w;
    first_stage = false;
  }
  const double compute_mb = pace.compute;
  const double recompute_mb = pace.recompute;
  const double tp_mb = pace.tp;
  const double cp_mb = pace.cp;
  const double ep_mb = pace.ep;
  const double host_mb = pace.host;

  // Pipeline p2p: one activation forward and one gradient backward per
  // chunk boundary and micro-batch. Without SP, Megatron's scatter-gather
  // sends 1/t of the tensor across nodes and all-gathers it over NVLink.
  const double chunk_fwd_s = pace.fwd;  // all chunks of a stage
  const double chunk_bwd_s = pace.bwd;
  const double md = static_cast<double>(m);
  double pp_step = 0;     // exposed p2p of the whole step
  double fill_drain = 0;  // transfers on the bubble's critical path
  if (c.pp > 1 && options.enabled(Refinement::kPipelineP2p)) {
    const double T = static_cast<double>(c.mbs) * seq / c.cp;
    const double full = 2.0 * T * model.hidden_size;
    double msg = calibration.CollectiveTime_s(Collective::kSendRecv,
                                              full / c.tp, pp_group, options);
    if (!c.sp && c.tp > 1) {
      msg += calibration.CollectiveTime_s(Collective::kAllGather, full,
                                          tp_group, options);
    }
    const bool warmup_flush =
        options.enabled(Refinement::kPipelineWarmupFlushP2p);
    // Interleaved 1F1B (Megatron overlap_p2p_comm, on by default with
    // virtual stages) posts the sends and receives of the next chunk
    // before computing this one: in the steady state each transfer hides
    // behind one chunk's forward (or backward) and only the excess is
    // exposed. 1F1B without interleaving waits for its batched send/recv.
    if (c.vpp > 1 && options.enabled(Refinement::kPipelineP2pOverlap)) {
      const double chunk_fwd = chunk_fwd_s / c.vpp;
      const double chunk_bwd = chunk_bwd_s / c.vpp;
      const double steps = md * c.vpp;  // chunk forwards (and backwards)
      // The warm-up forwards and flush backwards post their transfer only
      // after computing (overlap_p2p_comm_warmup_flush = False by default,
      // megatron/core/model_parallel_config.py; schedules.py
      // forward_backward_pipelining_with_interleaving), so each waits for
      // it: rank 0's warm-up, 2(pp−1) + (vpp−1)·pp chunk steps
      // (PipelineSchedule::WarmupSteps), is the longest.
      const double blocking =
          warmup_flush
              ? std::min(steps, static_cast<double>(schedule.WarmupSteps(0)))
              : 0.0;
      pp_step = blocking * 2.0 * msg +
                (steps - blocking) *
                    (Exposed(msg, chunk_fwd) + Exposed(msg, chunk_bwd));
    } else {
      pp_step = md * 2.0 * c.vpp * msg;
    }
    // Fill and drain: the first micro-batch's activation passes pp−1
    // stage boundaries before the last stage starts, its gradient pp−1
    // on the way back, and nothing else is in flight to hide them
    // (Narayanan et al. SC21 §2.2: the bubble is pp−1 chunk hops each
    // way). Equal to the old (pp−1)/vpp share of 2·vpp transfers per
    // micro-batch when nothing overlaps.
    if (warmup_flush || c.vpp == 1 ||
        !options.enabled(Refinement::kPipelineP2pOverlap)) {
      fill_drain = (c.pp - 1) * 2.0 * msg;
    }
  }

  TimeBreakdown& tb = est.time;
  tb.compute_s = md * compute_mb;
  tb.recompute_s = md * recompute_mb;
  tb.tp_comm_s = md * tp_mb;
  tb.cp_comm_s = md * cp_mb;
  tb.ep_comm_s = md * ep_mb;
  tb.host_s = md * host_mb;
  tb.pp_comm_s = pp_step;
  // Bubble: the slowest rank runs its m micro-batches back to back; the
  // first forward reaches it through the ranks before it and the last
  // backward leaves through them (and the ranks after it, both ways): one
  // micro-batch-chunk of every other rank, Σ_{i≠slowest} t_i / vpp
  // (Narayanan et al. SC21 §2.2 with unequal stages; (pp−1)/vpp of the
  // stage when they are equal). Plus the fill and drain transfers.
  const double pace_s = pace.total();
  const double others_s =
      options.enabled(Refinement::kPipelineBubbleOtherStages)
          ? std::max(0.0, all_stages_s - pace_s) / static_cast<double>(c.vpp)
          : schedule.BubbleMicrobatches() * pace_s;
  tb.pp_bubble_s = others_s + fill_drain;

  // ---- Data parallel: gradient reduce (fp32) overlapped with the last
  // micro-batch's backward except the last bucket; with the distributed
  // optimizer the bf16 parameter all-gather overlaps the first forward.
  const LocalParams& lp0 = statics.front().params;
  const LocalParams& lp_last = statics.back().params;
  const LocalParams lp =
      (lp_last.dense + lp_last.expert > lp0.dense + lp0.expert) ? lp_last : lp0;
  // Without --overlap-grad-reduce (--overlap-param-gather) Megatron runs
  // the collectives after backward (before forward): nothing hides them.
  const double bwd_window =
      training.overlap_grad_reduce
          ? pace.bwd_win + (full_fraction > 0 ? recompute_mb : 0.0)
          : 0.0;
  const double fwd_window = training.overlap_param_gather ? pace.fwd_win : 0.0;
  const int64_t dpcp = c.dp * c.cp;
  // Gradients reduce in the main-grad dtype; parameters gather in the weight
  // dtype (Megatron DDP config: grad_reduce_in_fp32, fp8_param_gather).
  const double grad_b = state_bytes.grad_bytes_per_param;
  const double weight_b = state_bytes.weight_bytes_per_param;
  double dp_s = 0;
  if (c.dist_opt) {
    dp_s += BucketedExposed(Collective::kReduceScatter, lp.dense, grad_b, dpcp,
                            dpcp_group, bwd_window, calibration, options);
    dp_s += BucketedExposed(Collective::kAllGather, lp.dense, weight_b, dpcp,
                            dpcp_group, fwd_window, calibration, options);
    dp_s += BucketedExposed(Collective::kReduceScatter, lp.expert, grad_b, edp,
                            edp_group, bwd_window, calibration, options);
    dp_s += BucketedExposed(Collective::kAllGather, lp.expert, weight_b, edp,
                            edp_group, fwd_window, calibration, options);
  } else {
    dp_s += BucketedExposed(Collective::kAllReduce, lp.dense, grad_b, dpcp,
                            dpcp_group, bwd_window, calibration, options);
    dp_s += BucketedExposed(Collective::kAllReduce, lp.expert, grad_b, edp,
                            edp_group, bwd_window, calibration, options);
  }
  // Tied embeddings with pp > 1: the embedding gradient all-reduce between
  // the first and last stage after the pipeline drains (not overlapped).
  if (c.pp > 1 && !model.untie_embeddings_and_output_weights) {
    CommGroup pair = AxisGroup(c.tp * c.cp * c.dp * (c.pp - 1), 2, domain);
    dp_s += calibration.CollectiveTime_s(
        Collective::kAllReduce, 4.0 * stats.word_embedding_params / c.tp, pair,
        options);
  }
  tb.dp_comm_s = dp_s;

  // ---- Optimizer: Adam is memory bound. Per optimizer-owned parameter:
  // fp32 master, m, v read + written (24 B), main grad read (4 B fp32 or 2 B
  // bf16), model weight written (2 B, or 1 B fp8); plus the grad-norm pass
  // over all local grads.
  const double opt_params =
      lp.dense / (c.dist_opt ? dpcp : 1) + lp.expert / (c.dist_opt ? edp : 1);
  tb.optimizer_s =
      !options.enabled(Refinement::kOptimizerStep)
          ? 0.0
          : calibration.MemoryTime_s((24.0 + grad_b + weight_b) * opt_params +
                                         grad_b * (lp.dense + lp.expert),
                                     options);

  // ---- Cores shared by more ranks than cores (the CPU engine).
  if (cluster.host_cores > 0) {
    const int64_t per_node =
        std::min<int64_t>(c.world(), std::max(1, cluster.gpus_per_node));
    // Σ_stages work / pp: the lighter first and last-but-one stages of an
    // uneven pipeline need less of the cores than the pacing one.
    const double mean_busy_s = md * all_stages_s / static_cast<double>(c.pp) +
                               tb.pp_comm_s + tb.dp_comm_s + tb.optimizer_s;
    tb.core_sharing_s =
        CoreSharing_s(tb.total_s(), mean_busy_s, per_node, cluster.host_cores);
  }

  // ---- Totals.
  est.step_time_s = tb.total_s();
  const double tokens = static_cast<double>(training.global_batch_size) * seq;
  const double n = static_cast<double>(c.world());
  est.tokens_per_s = tokens / est.step_time_s;
  est.tokens_per_s_per_gpu = est.tokens_per_s / n;
  est.model_flops_per_step =
      ModelFlopsPerStep(model, training.global_batch_size, seq, padded_vocab);
  double recompute_flops = 0;
  if (selective) {
    recompute_flops =
        SelectiveRecomputeFlopsPerStep(model, training.global_batch_size, seq);
  } else if (full_fraction > 0) {
    recompute_flops = FullRecomputeFlopsPerStep(
        model, training.global_batch_size, seq, full_fraction);
  }
  est.hardware_flops_per_step = est.model_flops_per_step + recompute_flops;
  est.model_tflops_per_gpu =
      est.model_flops_per_step / (est.step_time_s * n) / 1e12;
  // MFU/HFU against the dense bf16 peak in every precision (fp8 runs are
  // reported on the same scale, as Megatron and NeMo do).
  const double peak = cluster.gpu.peak_bf16_tflops * 1e12;
  est.mfu = est.model_flops_per_step / (est.step_time_s * n * peak);
  est.hfu = est.hardware_flops_per_step / (est.step_time_s * n * peak);
  est.days_to_train = training.train_tokens / est.tokens_per_s / 86400.0;
  return est;
}

}  // namespace meshtune::costmodel
