#include "costmodel/serving_model.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "costmodel/closed_loop.h"
#include "costmodel/comm_model.h"
#include "costmodel/compute_model.h"
#include "costmodel/kv_cache.h"
#include "costmodel/model_stats.h"
#include "costmodel/serving_internal.h"

namespace meshtune::costmodel {

using internal::AttentionLayers;
using internal::AttentionLayersOf;
using internal::ChunkContextOf_s;
using internal::ServingOptions;
using search_spaces::ClusterSpec;
using search_spaces::LayerKind;
using search_spaces::Mixer;
using search_spaces::Mlp;
using search_spaces::ModelSpec;
using search_spaces::Precision;
using search_spaces::ServingConfig;
using search_spaces::ServingWorkload;

namespace {

constexpr double kActivationBytes = 2.0;  // 16-bit activations

double HeadDim(const ModelSpec& m) {
  return m.kv_channels > 0
             ? static_cast<double>(m.kv_channels)
             : static_cast<double>(m.hidden_size) / m.num_attention_heads;
}

// One GEMM of a layer on one GPU: its local weights and its inner
// dimension k (the output width is params / k).
struct Gemm {
  double params = 0;
  double k = 0;
};

// The linear layers one GPU runs for one layer, as parameter counts of its
// local slices, and the tokens each sees.
struct LayerShare {
  double dense_params = 0;   // mixer + dense MLP + shared experts, local
  double small_params = 0;   // norms and router: 16-bit, replicated
  double expert_params = 0;  // one routed expert's local slice (/ moe_tp)
  double local_experts = 0;  // E / ep
  // The GEMMs of the dense part (QKV, out-projection, fc1, fc2, shared
  // experts) and of one local expert, each at its own shape: a layer's
  // GEMMs are not one wide GEMM, and the narrow ones (out-projection and
  // fc2 at k = a·d/tp and f/tp) reach less of the peak.
  std::vector<Gemm> dense_gemms;
  std::vector<Gemm> expert_gemms;
  // Local widths of the elementwise kernels: the attention's query, key
  // and value channels (RoPE and the cache append), the dense MLP's and
  // shared experts' intermediate width, and one routed expert's.
  double qkv_width = 0;
  double mlp_width = 0;
  double expert_width = 0;
  bool attention = false;
  bool mla = false;
  bool moe = false;
  bool mamba = false;
};

// fc1 (with the gate when gated) and fc2 of an MLP of width `f` split over
// `split` ranks, on `width`-wide tokens.
void AddMlp(const ModelSpec& m, double width, double f, double split,
            std::vector<Gemm>* out) {
  if (f <= 0) return;
  const double up = m.gated_mlp() ? 2.0 : 1.0;
  out->push_back({width * up * f / split, width});
  out->push_back({f / split * width, f / split});
}

LayerShare ShareOfLayer(const ModelSpec& m, const ServingConfig& c,
                        const LayerKind& kind) {
  const LayerParams p = ParamsOfLayer(m, kind);
  const double tp = static_cast<double>(c.tp);
  const double h = static_cast<double>(m.hidden_size);
  LayerShare s;
  s.dense_params = p.tp_sharded / tp;
  s.small_params = p.replicated;
  s.attention = kind.mixer == Mixer::kAttention;
  s.mla = kind.mixer == Mixer::kMla;
  s.mamba = kind.mixer == Mixer::kMamba;
  if (s.attention) {
    const double d = HeadDim(m);
    const double heads = static_cast<double>(m.num_attention_heads) / tp;
    const int64_t groups =
        m.num_query_groups > 0 ? m.num_query_groups : m.num_attention_heads;
    const double kv = static_cast<double>(std::max<int64_t>(1, groups / c.tp));
    s.dense_gemms.push_back({h * (heads + 2 * kv) * d, h});
    s.dense_gemms.push_back({heads * d * h, heads * d});
    s.qkv_width = (heads + 2 * kv) * d;
  } else if (kind.mixer != Mixer::kNone) {
    // MLA and Mamba: their projections as one GEMM on the hidden state.
    s.dense_gemms.push_back(
        {ParamsOfLayer(m, {kind.mixer, Mlp::kNone}).tp_sharded / tp, h});
  }
  if (kind.mlp == Mlp::kDense) {
    AddMlp(m, h, static_cast<double>(m.ffn_hidden_size), tp, &s.dense_gemms);
    s.mlp_width = static_cast<double>(m.ffn_hidden_size) / tp;
  }
  if (kind.mlp == Mlp::kMoe) {
    s.moe = true;
    s.local_experts = static_cast<double>(m.num_experts) / c.ep;
    s.expert_params =
        p.routed_experts / m.num_experts / static_cast<double>(c.moe_tp());
    AddMlp(m, h, static_cast<double>(m.moe_shared_expert_intermediate_size), tp,
           &s.dense_gemms);
    const double width =
        m.moe_latent_size > 0 ? static_cast<double>(m.moe_latent_size) : h;
    AddMlp(m, width, static_cast<double>(m.expert_ffn_hidden_size()),
           static_cast<double>(c.moe_tp()), &s.expert_gemms);
    s.mlp_width =
        static_cast<double>(m.moe_shared_expert_intermediate_size) / tp;
    s.expert_width = static_cast<double>(m.expert_ffn_hidden_size()) /
                     static_cast<double>(c.moe_tp());
  }
  return s;
}

// The most loaded stage (by local weight bytes): its first layer's index
// and its layers' kinds, in order.
struct Stage {
  int64_t begin = 0;
  std::vector<LayerKind> kinds;
};

Stage HeaviestStage(const ModelSpec& m, const ServingConfig& c, double wb) {
  const std::vector<LayerKind> kinds = m.DecoderLayers();
  Stage best;
  double best_bytes = -1;
  for (const auto& [begin, end] :
       ServingPipelineStages(static_cast<int64_t>(kinds.size()), c.pp)) {
    Stage stage{begin, std::vector<LayerKind>(kinds.begin() + begin,
                                              kinds.begin() + end)};
    double bytes = 0;
    for (const LayerKind& k : stage.kinds) {
      const LayerShare sh = ShareOfLayer(m, c, k);
      bytes += (sh.dense_params + sh.local_experts * sh.expert_params) * wb;
    }
    if (bytes > best_bytes) {
      best_bytes = bytes;
      best = std::move(stage);
    }
  }
  return best;
}

// Rows a decode GEMM costs at least (search_spaces::GpuSpec::
// decode_gemm_min_rows): 16 on tensor-core GPUs, 1 on a CPU.
int64_t MinGemmRows(const ClusterSpec& cluster) {
  return std::max<int64_t>(1, std::llround(cluster.gpu.decode_gemm_min_rows));
}

// The factor on the calibration's MemoryTime_s (which runs at the GPU's
// hbm_efficiency, large streaming copies) that brings a serving step's
// memory-bound kernels to kServingHbmFraction of the datasheet bandwidth;
// 1 when the GPU states no efficiency.
double StreamScale(const ClusterSpec& cluster) {
  const double eff = cluster.gpu.hbm_efficiency;
  return eff > 0 ? eff / kServingHbmFraction : 1.0;
}

// The device facts the serving GEMMs need: two derived from the cluster,
// the rest read from its GpuSpec (which outlives the estimate).
struct ServingDevice {
  const search_spaces::GpuSpec& gpu;
  int64_t min_rows = 1;       // MinGemmRows
  double stream_scale = 1.0;  // StreamScale
  // NVFP4 weights stream 1 / GpuSpec::nvfp4_stream_relative times more
  // slowly than 16-bit ones.
  double Nvfp4StreamScale() const { return 1.0 / gpu.nvfp4_stream_relative; }
  // The fused MoE's bytes per routed copy and hidden element at `p`
  // (GpuSpec::moe_copy_bytes, moe_fp8_blockwise_copy_bytes); 0 = not swept
  // (ElementwiseBytes).
  double MoeCopyBytes(Precision p) const {
    return p == Precision::kFp8Blockwise && gpu.moe_fp8_blockwise_copy_bytes > 0
               ? gpu.moe_fp8_blockwise_copy_bytes
               : gpu.moe_copy_bytes;
  }
  // The factor on the compute-bound time of routed experts at `p`: the
  // fused MoE GEMMs' over the dense GEMM model's (1 /
  // GpuSpec::moe_gemm_relative), times blockwise-FP8 and NVFP4 experts'
  // own (1 / moe_fp8_blockwise_relative, 1 / moe_nvfp4_relative).
  double FusedMoeScale(Precision p) const {
    const double moe = 1.0 / gpu.moe_gemm_relative;
    switch (p) {
      case Precision::kFp8Blockwise:
        return moe * (1.0 / gpu.moe_fp8_blockwise_relative);
      case Precision::kNvfp4:
        return moe * (1.0 / gpu.moe_nvfp4_relative);
      default:
        return moe;
    }
  }
};
ServingDevice DeviceOf(const ClusterSpec& cluster) {
  return {cluster.gpu, MinGemmRows(cluster), StreamScale(cluster)};
}

// Rows from which the calibration's GEMM curve is used as it is; below, a
// GEMM costs its rows' share of a GEMM this tall (the curve's tile and
// size fall-off describe training shapes, not the weight-streaming kernels
// of decode, whose bound is the max() below).
constexpr int64_t kCurveRows = 256;

// A linear layer on one GPU: [m, k]·[k, params/k] at the weight precision,
// the slower of its GEMM (times `gemm_scale`) and streaming its weights.
// Adds to `weights_s` or `compute_s`, whichever bound it.
void Linear(const Calibration& cal, const ModelOptions& o,
            const ServingDevice& dev, Precision p, double m, double params,
            double k, double wb, double* weights_s, double* compute_s,
            double gemm_scale = 1.0) {
  if (m <= 0 || params <= 0) return;
  const int64_t kk = std::max<int64_t>(1, static_cast<int64_t>(k));
  const int64_t n = std::max<int64_t>(1, std::llround(params / kk));
  const int64_t rows = std::max<int64_t>(dev.min_rows, std::llround(m));
  const int64_t tall = std::max(rows, kCurveRows);
  const double gemm = gemm_scale * cal.GemmTime_s(tall, n, kk, p, o) *
                      static_cast<double>(rows) / static_cast<double>(tall);
  const double stream = cal.MemoryTime_s(params * wb, o) * dev.stream_scale *
                        (p == Precision::kNvfp4 ? dev.Nvfp4StreamScale() : 1.0);
  if (stream >= gemm) {
    *weights_s += stream;
  } else {
    *compute_s += gemm;
  }
}

// The routed experts of one MoE layer on one GPU for `tokens` tokens of the
// replica (micro-batch): the local experts some token picked, expected
// E/ep · (1 − (1 − k/E)^T) of them (independent picks), each with T·k/E
// rows on average over the active ones. Their GEMMs run as one grouped
// GEMM each, in prefill and decode alike (the serving engines' fused MoE
// kernels: TensorRT-LLM's and vLLM's fused_moe and SGLang's, on CUTLASS
// grouped GEMM, github.com/NVIDIA/cutlass examples/24_gemm_grouped): one
// launch tiles every expert's rows over the GPU, so it is priced as one
// GEMM of the active experts' summed width at the per-expert rows,
// streaming all their weights, not as one launch per expert that each pays
// the small-GEMM fall-off (a 2 048-token prefill of Qwen3-30B-A3B gives
// each of its 128 experts 128 rows). Spread over several EP ranks, the
// layer waits for the busiest: its GEMMs, where they bound the time, carry
// MoeLoadImbalance (compute_model.h) times the mean load, the training
// model's factor; the weights it streams do not depend on the load.
void RoutedExperts(const ModelSpec& m, const LayerShare& s,
                   const Calibration& cal, const ModelOptions& o,
                   const ServingDevice& dev, Precision p, double tokens,
                   double wb, double* weights_s, double* compute_s) {
  const double k = static_cast<double>(m.moe_router_topk);
  const double e = static_cast<double>(m.num_experts);
  const double hit =
      ExpectedActiveExperts(m.num_experts, m.moe_router_topk, tokens) / e;
  const double active = s.local_experts * hit;
  const double per_expert = tokens * k / e / std::max(hit, 1e-12);
  const double busiest = s.local_experts < e ? MoeLoadImbalance(m, o) : 1.0;
  for (const Gemm& g : s.expert_gemms) {
    Linear(cal, o, dev, p, per_expert, active * g.params, g.k, wb, weights_s,
           compute_s, dev.FusedMoeScale(p) * busiest);
  }
}

// Bytes the elementwise kernels of one layer move on one GPU for
// `tokens` tokens of its attention rank, 16-bit activations: the two
// residual adds fused with their RMSNorms (each reads the hidden state and
// the residual and writes both: 4h), RoPE and the KV-cache append over the
// rank's query, key and value channels (read and write), the gated MLP's
// activation (reads the gate and up halves, writes their product: 3f per
// f-wide slice, 2f ungated), and for routed experts the token's k copies
// out to the experts and back (the permute reads h and writes k·h, the
// finalize reads k·h and writes h) with each copy's activation on the
// expert's local width, tokens·adp·k/ep copies landing on this GPU; where
// the GPU's fused MoE was swept (`copy_bytes` > 0, GpuSpec::moe_copy_bytes)
// the permute and finalize are instead the measured copy_bytes per copy
// and hidden element, fc2's full-width partial sums included. These
// are the kernels TensorRT-LLM, vLLM and SGLang fuse down to (fused add +
// RMSNorm, fused SiLU-and-mul, fused MoE permute and finalize); a prefill
// or a large decode batch streams them at the HBM bandwidth, beside the
// GEMMs.
double ElementwiseBytes(const ModelSpec& m, const ServingConfig& c,
                        const LayerShare& s, double tokens, double copy_bytes) {
  const double h = static_cast<double>(m.hidden_size);
  const double act = m.gated_mlp() ? 3.0 : 2.0;
  double per_token = 2.0 * 4.0 * h + 2.0 * s.qkv_width + act * s.mlp_width;
  double copy_traffic = 0;  // bytes per token, swept fused MoE
  if (s.moe) {
    const double k = static_cast<double>(m.moe_router_topk);
    const double copies =
        k * static_cast<double>(c.attention_dp) / static_cast<double>(c.ep);
    per_token += copies * act * s.expert_width;
    if (copy_bytes > 0) {
      copy_traffic = copies * h * copy_bytes;
    } else {
      per_token += 2.0 * (1.0 + k) * h;
    }
  }
  return tokens * (per_token * kActivationBytes + copy_traffic);
}

// The kernels of one decode layer besides its collectives, each of which
// pays kKernelLatency_s: its GEMMs (QKV, out-projection, fc1, fc2, shared
// experts; the routed experts as one fused-MoE launch per GEMM with their
// activation fused, plus the router's top-k), the two norms, the attention
// kernel (RoPE and the KV-cache append fused into it,
// as TensorRT-LLM's XQA and vLLM's FlashInfer decode do) and the MLP's
// activation.
double DecodeKernelsOfLayer(const LayerShare& s) {
  double kernels = static_cast<double>(s.dense_gemms.size()) + 2.0;
  if (s.moe) kernels += static_cast<double>(s.expert_gemms.size()) + 1.0;
  if (s.attention || s.mla) kernels += 1.0;
  if (!s.moe && s.dense_gemms.size() > 2) kernels += 1.0;  // activation
  return kernels;
}

int64_t Domain(const ClusterSpec& cluster) {
  return cluster.nvlink_domain_gpus > 0 ? cluster.nvlink_domain_gpus
                                        : std::max(1, cluster.gpus_per_node);
}

// One collective of a serving step: its bandwidth time from the
// calibration (no NCCL latency ramp) plus a one-shot latency of two link
// hops. Serving engines run their small all-reduces and MoE exchanges with
// custom one-shot kernels over NVLink (TensorRT-LLM's CustomAllReduce,
// SGLang's custom all-reduce, DeepEP's low-latency mode), not NCCL's ring.
// All-reduces above kCustomAllReduceMaxBytes fall back to NCCL and are
// priced as the calibration prices NCCL, latency ramp included.
double ServingCollective_s(const Calibration& cal, const ClusterSpec& cluster,
                           Collective op, double bytes, const CommGroup& group,
                           const ModelOptions& o) {
  if (group.size <= 1 || bytes <= 0) return 0.0;
  if (op == Collective::kAllReduce && bytes > kCustomAllReduceMaxBytes) {
    return cal.CollectiveTime_s(op, bytes, group, o);  // NCCL, its ramp on
  }
  ModelOptions bandwidth = o;
  bandwidth.Disable(Refinement::kCollectiveRamp);
  const double hop_us =
      group.nodes > 1 ? cluster.network_latency_us : cluster.nvlink_latency_us;
  return cal.CollectiveTime_s(op, bytes, group, bandwidth) +
         2.0 * hop_us * 1e-6;
}

// Collectives of one layer over `tokens_per_rank` tokens of each attention
// rank: two tp all-reduces (after the mixer and after the MLP) and, for an
// MoE layer spread over several attention-DP ranks, its exchange
// (MoeExchangeOf).
void LayerComm(const ModelSpec& m, const ServingConfig& c,
               const ClusterSpec& cluster, const LayerShare& s,
               double tokens_per_rank, const Calibration& cal,
               const ModelOptions& o, double* tp_s, double* ep_s) {
  const double h = static_cast<double>(m.hidden_size);
  const double act = tokens_per_rank * h * kActivationBytes;
  const CommGroup tp_group = AxisGroup(1, c.tp, Domain(cluster));
  const double blocks = (s.attention || s.mla || s.mamba ? 1.0 : 0.0) + 1.0;
  *tp_s += blocks * ServingCollective_s(cal, cluster, Collective::kAllReduce,
                                        act, tp_group, o);
  const int64_t moe_group = c.tp * c.attention_dp;
  if (!s.moe || moe_group <= 1 || c.attention_dp <= 1) return;
  const CommGroup group = AxisGroup(1, moe_group, Domain(cluster));
  if (MoeExchangeOf(m, c, cluster) == MoeExchange::kAllToAll) {
    // A rank sends each of its tokens' k routed copies once, so its buffer
    // is tokens · k · h in nccl-tests' all-to-all convention (the rank's
    // whole send buffer), as the training model prices its dispatch
    // (cost_model.cc), not that times the group size.
    const double routed = act * static_cast<double>(m.moe_router_topk);
    *ep_s += 2.0 * ServingCollective_s(cal, cluster, Collective::kAllToAll,
                                       routed, group, o);
    return;
  }
  // All ranks' tokens, gathered at their precision, then the 16-bit
  // outputs reduce-scattered back.
  const double all_tokens = static_cast<double>(moe_group) * tokens_per_rank;
  *ep_s += ServingCollective_s(cal, cluster, Collective::kAllGather,
                               all_tokens * h * GatheredActivationBytes(c),
                               group, o) +
           ServingCollective_s(cal, cluster, Collective::kReduceScatter,
                               all_tokens * h * kActivationBytes, group, o);
}

// FLOP/s of a decode step's attention on one GPU: the BF16 GEMM ceiling,
// or for MLA over an FP8 latent cache on a GPU whose kernels multiply in
// FP8 (GpuSpec::mla_fp8_kv_relative > 0) that share of the FP8 ceiling.
double AttentionFlopRate(const ClusterSpec& cluster, const ServingConfig& c,
                         bool mla) {
  const search_spaces::GpuSpec& g = cluster.gpu;
  if (mla && c.kv_cache == search_spaces::KvCacheDtype::kFp8 &&
      g.mla_fp8_kv_relative > 0) {
    return g.peak_fp8_tflops * 1e12 * g.gemm_max_efficiency_fp8 *
           g.mla_fp8_kv_relative;
  }
  return g.peak_bf16_tflops * 1e12 * g.gemm_max_efficiency_bf16;
}

}  // namespace

int64_t MaxBatch(const ServingConfig& c) {
  return c.max_batch > 0 ? c.max_batch : kDefaultMaxBatch * c.attention_dp;
}

int64_t MaxNumTokens(const ServingConfig& c) {
  return c.max_num_tokens > 0 ? c.max_num_tokens : kMaxNumTokens;
}

namespace internal {

ModelOptions ServingOptions(const ModelOptions& o) {
  ModelOptions s = o;
  s.Disable(Refinement::kTrainingKernelEfficiency);
  s.Disable(Refinement::kNvls);
  return s;
}

}  // namespace internal

double StepOverhead_s(search_spaces::ServingEngine engine) {
  switch (engine) {
    case search_spaces::ServingEngine::kVllm:
      return kVllmStepOverhead_s;
    case search_spaces::ServingEngine::kSglang:
      return kSglangStepOverhead_s;
    case search_spaces::ServingEngine::kTensorRtLlm:
    case search_spaces::ServingEngine::kTensorRtLlmCpp:
      return kTensorRtLlmStepOverhead_s;
  }
  return kVllmStepOverhead_s;
}

double HostStepTime_s(search_spaces::ServingEngine engine,
                      const ClusterSpec& cluster, double requests) {
  if (engine != search_spaces::ServingEngine::kTensorRtLlm) return 0.0;
  return kTensorRtLlmHostPerRequest_s * std::max(0.0, requests) *
         cluster.host_launch_factor;
}

bool HostAfterGpu(const ServingConfig& c) {
  return c.engine == search_spaces::ServingEngine::kTensorRtLlm && c.pp > 1 &&
         c.trtllm_sync_pipeline;
}

KvAdmission KvAdmissionOf(search_spaces::ServingEngine engine) {
  return search_spaces::IsTensorRtLlm(engine)
             ? KvAdmission::kReserveWholeRequest
             : KvAdmission::kPreemptNewest;
}

MoeExchange MoeExchangeOf(const ModelSpec& m, const ServingConfig& c,
                          const ClusterSpec& cluster) {
  const int64_t group = c.tp * c.attention_dp;
  if (group > Domain(cluster)) return MoeExchange::kAllToAll;
  const bool multi_node_nvlink =
      cluster.nvlink_domain_gpus > cluster.gpus_per_node;
  if (search_spaces::IsTensorRtLlm(c.engine) && multi_node_nvlink &&
      c.ep > m.moe_router_topk) {
    return MoeExchange::kAllToAll;
  }
  return MoeExchange::kAllGather;
}

double GatheredActivationBytes(const ServingConfig& c) {
  if (!search_spaces::IsTensorRtLlm(c.engine)) {
    return kActivationBytes;
  }
  switch (c.weights) {
    case Precision::kNvfp4:
    case Precision::kFp8:
    case Precision::kFp8Tensorwise:
      return search_spaces::WeightBytesPerElement(c.weights);
    default:
      return kActivationBytes;
  }
}

double ExpectedActiveExperts(int64_t experts, int64_t topk, double tokens) {
  if (experts <= 0 || topk <= 0 || tokens <= 0) return 0.0;
  const double e = static_cast<double>(experts);
  const double k = std::min(static_cast<double>(topk), e);
  return e * (1.0 - std::pow(1.0 - k / e, tokens));
}

namespace {

// The tokens one pass of a replica's micro-batch runs: decodes (one token
// each, at `context`) and prompt chunks (`prefill_sequences` sequences of
// `prefill_tokens` tokens in all, equal lengths).
struct PassTokens {
  double decodes = 0;
  int64_t context = 0;
  int64_t prefill_tokens = 0;
  int64_t prefill_sequences = 0;
  // Tokens each decode runs: 1, or 1 + nextn when speculative decoding
  // verifies its drafts (ServingConfig::nextn).
  double queries = 1;
};

// The decode attention of `per_rank` sequences at `context` tokens on one
// rank, one layer (`layer`, of `kind`), `queries` tokens each (1, or a
// speculative verify's 1 + nextn). The rank's sequences read their cache
// once, whatever their queries (the decode kernels load a sequence's
// blocks once for all its query tokens); MLA's absorbed attention also
// multiplies every head against the latent, which can make it
// compute-bound: 2·a·ctx·(2·c_kv + r) FLOPs per query token, at the BF16
// ceiling or, over an FP8 cache where the GPU's kernels multiply in FP8,
// at GpuSpec::mla_fp8_kv_relative of the FP8 one.
double DecodeAttention_s(const ModelSpec& m, const ClusterSpec& cluster,
                         const ServingConfig& c, const ServingDevice& dev,
                         const Calibration& cal, const ModelOptions& o,
                         const LayerShare& s, double per_rank, double queries,
                         int64_t context, int64_t layer,
                         const LayerKind& kind) {
  const double ctx = static_cast<double>(context);
  const double kv_bytes =
      per_rank * KvCacheBytesOfLayer(m, c, layer, kind, context);
  // Each tensor-parallel rank runs its share of the heads, MLA's too (over
  // the whole latent, which every rank keeps).
  const double heads =
      static_cast<double>(m.num_attention_heads) / static_cast<double>(c.tp);
  const double flops =
      queries * (s.mla ? 2.0 * per_rank * heads * ctx *
                             (2.0 * m.kv_lora_rank + m.qk_pos_emb_head_dim)
                       : 4.0 * per_rank * heads * ctx * HeadDim(m));
  const double compute = flops / AttentionFlopRate(cluster, c, s.mla);
  // MLA's kernel also spends a fixed time on each sequence's heads
  // (GpuSpec::mla_decode_head_ns), whatever the context.
  const double fixed =
      s.mla ? per_rank * heads * cluster.gpu.mla_decode_head_ns * 1e-9 : 0.0;
  return fixed +
         std::max(cal.MemoryTime_s(kv_bytes, o) * dev.stream_scale, compute);
}

// One pipeline stage's times for one pass of `p` on the heaviest stage, on
// the busiest attention-DP rank, without the step overhead, host time and
// pipeline hops: the linear layers, routed experts, elementwise kernels and
// collectives over the pass's tokens, each attention apart (decodes read
// their cache, prompts run causal attention over themselves; both land in
// kv_cache_s). A pass that decodes also pays the decode's fixed costs
// (norm and router weights, kernel latencies). DecodeStep prices decodes
// alone and PrefillTime_s prompts alone; a step that does both is priced
// as their sum, not as one forward reading the weights once
// (docs/serving.md §5, session 33: that fits the published runs worse).
// `layers` are the stage's (HeaviestStage; MtpStage for a draft pass), the
// output layer counted when `output_layer`, and `inputs` GEMMs run once
// before them at the pass's rows (a draft pass's input projection).
DecodeBreakdown LayersTimes(const ModelSpec& m, const ClusterSpec& cluster,
                            const ServingConfig& c, const PassTokens& p,
                            const Calibration& cal, const ModelOptions& o,
                            const Stage& heaviest, bool output_layer,
                            const std::vector<Gemm>& inputs = {}) {
  const ServingDevice dev = DeviceOf(cluster);
  const double wb = search_spaces::WeightBytesPerElement(c.weights);
  const double h = static_cast<double>(m.hidden_size);
  const double adp = static_cast<double>(c.attention_dp);
  // Decodes are spread evenly over the attention-DP ranks.
  const double per_rank = p.decodes > 0 ? std::max(1.0, p.decodes / adp) : 0;
  // Attention DP splits the requests, not a request: each prompt is
  // prefilled whole on the rank that holds it (TensorRT-LLM's
  // enable_attention_dp, SGLang's and vLLM's DP attention), and the ranks
  // meet at every MoE layer, so the pass waits for the busiest rank, the
  // one with ceil(sequences / adp) prompts. The routed experts see every
  // rank's tokens.
  const double tokens = static_cast<double>(p.prefill_tokens);
  const double seqs = static_cast<double>(p.prefill_sequences);
  const double seqs_per_rank = seqs > 0 ? std::ceil(seqs / adp) : 0;
  const double per_seq =
      seqs > 0 ? std::max(1.0, std::floor(tokens / seqs)) : 0;
  const double t =
      seqs > 0 ? std::min(tokens, seqs_per_rank * tokens / seqs) : 0;
  const double rows = per_rank * p.queries + t;
  DecodeBreakdown stage;
  for (const Gemm& g : inputs) {
    Linear(cal, o, dev, c.weights, rows, g.params, g.k, wb, &stage.weights_s,
           &stage.compute_s);
  }
  for (size_t i = 0; i < heaviest.kinds.size(); ++i) {
    const LayerKind& kind = heaviest.kinds[i];
    const LayerShare s = ShareOfLayer(m, c, kind);
    for (const Gemm& g : s.dense_gemms) {
      Linear(cal, o, dev, c.weights, rows, g.params, g.k, wb, &stage.weights_s,
             &stage.compute_s);
    }
    if (per_rank > 0) {
      stage.weights_s +=
          cal.MemoryTime_s(s.small_params * kActivationBytes, o) *
              dev.stream_scale +
          DecodeKernelsOfLayer(s) * kKernelLatency_s;
    }
    if (s.moe) {
      RoutedExperts(
          m, s, cal, o, dev, c.weights,
          per_rank > 0 ? std::max(1.0, p.decodes) * p.queries + tokens : tokens,
          wb, &stage.weights_s, &stage.compute_s);
    }
    if ((s.attention || s.mla) && per_rank > 0) {
      stage.kv_cache_s += DecodeAttention_s(
          m, cluster, c, dev, cal, o, s, per_rank, p.queries, p.context,
          heaviest.begin + static_cast<int64_t>(i), kind);
    }
    if ((s.attention || s.mla) && seqs > 0) {
      const double heads = static_cast<double>(m.num_attention_heads) / c.tp;
      const double d =
          s.mla ? static_cast<double>(m.mla_qk_head_dim()) : HeadDim(m);
      const int64_t len = static_cast<int64_t>(per_seq);
      const int64_t bh =
          std::max<int64_t>(1, std::llround(seqs_per_rank * heads));
      // A sliding-window layer's queries see at most its window of keys
      // where the engine keeps the window (the compute model's count).
      const int64_t window =
          ServedWindow(m, c, heaviest.begin + static_cast<int64_t>(i));
      stage.kv_cache_s += window > 0 && window < len
                              ? cal.AttentionForwardTime_s(
                                    bh, len, window, static_cast<int64_t>(d),
                                    /*causal=*/false, o)
                              : cal.AttentionForwardTime_s(
                                    bh, len, len, static_cast<int64_t>(d),
                                    /*causal=*/true, o);
    }
    LayerComm(m, c, cluster, s, rows, cal, o, &stage.tp_comm_s,
              &stage.ep_comm_s);
    stage.elementwise_s +=
        cal.MemoryTime_s(
            ElementwiseBytes(m, c, s, rows, dev.MoeCopyBytes(c.weights)), o) *
        dev.stream_scale;
  }
  // The output layer: every decode's tokens and each prompt's last.
  if (output_layer) {
    const double vocab =
        static_cast<double>(PaddedVocabSize(m.vocab_size, c.tp));
    Linear(cal, o, dev, Precision::kBf16, per_rank * p.queries + seqs_per_rank,
           vocab * h / c.tp, h, kActivationBytes, &stage.weights_s,
           &stage.compute_s);
  }
  return stage;
}

DecodeBreakdown StageTimes(const ModelSpec& m, const ClusterSpec& cluster,
                           const ServingConfig& c, const PassTokens& p,
                           const Calibration& cal, const ModelOptions& o) {
  return LayersTimes(
      m, cluster, c, p, cal, o,
      HeaviestStage(m, c, search_spaces::WeightBytesPerElement(c.weights)),
      /*output_layer=*/true);
}

// The MTP layers of one draft depth (ModelSpec::MtpDepthLayers), at the
// index of the model's last layer, whose spec Megatron's MTP block reuses
// (for ServedWindow and the cache's layer rules).
Stage MtpStage(const ModelSpec& m) {
  return {std::max<int64_t>(0, m.num_layers - 1), m.MtpDepthLayers()};
}

// One pass of one MTP depth over `p` on the last stage: its decoder
// layer(s), the projection of the concatenated [embedding; hidden state]
// back to h (DeepSeek-V3's eh_proj, 2h·h weights over tp) and the output
// layer, which the module shares with the model (DeepSeek-V3 §2.2).
DecodeBreakdown MtpPassTimes(const ModelSpec& m, const ClusterSpec& cluster,
                             const ServingConfig& c, const PassTokens& p,
                             const Calibration& cal, const ModelOptions& o) {
  const double h = static_cast<double>(m.hidden_size);
  return LayersTimes(m, cluster, c, p, cal, o, MtpStage(m),
                     /*output_layer=*/true, {{2.0 * h * h / c.tp, 2.0 * h}});
}

// The EAGLE-3 head's serving copy: 16-bit weights (the engines load the
// head unquantised), no pipeline or experts, nothing drafted itself.
ServingConfig HeadConfigOf(const ServingConfig& c) {
  ServingConfig h = c;
  h.weights = Precision::kBf16;
  h.pp = 1;
  h.ep = 1;
  h.nextn = 0;
  return h;
}

// One pass of an EAGLE-3 head over `p` (search_spaces::DraftHead): its
// decoder layer, whose query, key and value projections read 2h (the
// embedding's half as an input GEMM beside the layer's own), and its output
// layer over the draft vocabulary. The fc fusing the target's hidden states
// is Eagle3Fc_s.
DecodeBreakdown Eagle3PassTimes(const ModelSpec& m, const ClusterSpec& cluster,
                                const ServingConfig& c, const PassTokens& p,
                                const Calibration& cal, const ModelOptions& o) {
  const ModelSpec head = search_spaces::Eagle3HeadModel(m, c.draft_head);
  const ServingConfig hc = HeadConfigOf(c);
  const Stage stage{0, head.DecoderLayers()};
  const Gemm qkv = ShareOfLayer(head, hc, stage.kinds.front()).dense_gemms[0];
  return LayersTimes(head, cluster, hc, p, cal, o, stage,
                     /*output_layer=*/true, {qkv});
}

// The head's fc (3h -> h, 16-bit, replicated on every tensor-parallel
// rank: vLLM's ReplicatedLinear) over `rows` tokens of one rank.
double Eagle3Fc_s(const ModelSpec& m, const ClusterSpec& cluster, double rows,
                  const Calibration& cal, const ModelOptions& o) {
  const double h = static_cast<double>(m.hidden_size);
  double weights_s = 0, compute_s = 0;
  Linear(cal, o, DeviceOf(cluster), Precision::kBf16, rows, 3.0 * h * h,
         3.0 * h, kActivationBytes, &weights_s, &compute_s);
  return weights_s + compute_s;
}

// The drafts of one decode step of `micro` sequences at `context` on the
// last stage: nextn passes of the drafter one after the other (each drafts
// from the previous one's token; a model with fewer MTP depths reuses
// them), the first on one token per sequence and, in a tree, the others on
// its draft_topk candidates per sequence (each reading the sequence's
// cache once). The EAGLE-3 head first fuses the target's hidden states of
// every verified token (VerifiedTokens per sequence) with its fc.
double DraftStep_s(const ModelSpec& m, const ClusterSpec& cluster,
                   const ServingConfig& c, double micro, int64_t context,
                   const Calibration& cal, const ModelOptions& o) {
  const double drafts = static_cast<double>(search_spaces::ServedDrafts(m, c));
  if (drafts <= 0) return 0.0;
  const PassTokens first{micro, context, 0, 0};
  const PassTokens rest{
      micro, context, 0, 0,
      static_cast<double>(std::max<int64_t>(1, c.draft_topk))};
  const bool head = search_spaces::ServedEagle3Head(m, c);
  auto pass_s = [&](const PassTokens& p) {
    return head ? Eagle3PassTimes(m, cluster, c, p, cal, o).gpu_s()
                : MtpPassTimes(m, cluster, c, p, cal, o).gpu_s();
  };
  double s = pass_s(first) + (drafts - 1.0) * pass_s(rest);
  if (head) {
    const double per_rank = std::max(1.0, micro / c.attention_dp);
    s += Eagle3Fc_s(
        m, cluster,
        per_rank * static_cast<double>(search_spaces::VerifiedTokens(m, c)),
        cal, o);
  }
  return s;
}

// What the drafter adds to a prefill of `tokens` tokens of `sequences`
// prompts, `rank_tokens` of them on the busiest attention-DP rank: each
// served MTP depth runs over the prompt (filling its cache and drafting the
// first decode's tokens), or the EAGLE-3 head once, after its fc over the
// rank's tokens.
double DraftPrefill_s(const ModelSpec& m, const ClusterSpec& cluster,
                      const ServingConfig& c, int64_t tokens, int64_t sequences,
                      double rank_tokens, const Calibration& cal,
                      const ModelOptions& o) {
  const PassTokens pass{0, 0, tokens, sequences};
  if (search_spaces::ServedEagle3Head(m, c)) {
    return Eagle3PassTimes(m, cluster, c, pass, cal, o).gpu_s() +
           Eagle3Fc_s(m, cluster, rank_tokens, cal, o);
  }
  const int64_t depths = search_spaces::ServedMtpDepths(m, c);
  if (depths <= 0) return 0.0;
  return static_cast<double>(depths) *
         MtpPassTimes(m, cluster, c, pass, cal, o).gpu_s();
}

// The head's weights on each GPU of the last stage, bytes: its layer with
// the second h of its query/key/value input, norms, the replicated fc and
// the output layer over the draft vocabulary, all 16-bit.
double Eagle3HeadBytes(const ModelSpec& m, const ServingConfig& c) {
  const ModelSpec head = search_spaces::Eagle3HeadModel(m, c.draft_head);
  const ServingConfig hc = HeadConfigOf(c);
  const double h = static_cast<double>(m.hidden_size);
  const LayerShare s = ShareOfLayer(head, hc, head.DecoderLayers().front());
  const double vocab =
      static_cast<double>(PaddedVocabSize(head.vocab_size, c.tp));
  return (s.dense_params + s.dense_gemms[0].params + s.small_params +
          3.0 * h * h + vocab * h / c.tp) *
         kActivationBytes;
}

// The activations one pipeline hop carries for `rows` tokens of a rank.
double PipelineHop_s(const ModelSpec& m, const ClusterSpec& cluster,
                     double rows, const Calibration& cal,
                     const ModelOptions& o) {
  const CommGroup pair = AxisGroup(1, 2, 2);
  return ServingCollective_s(
      cal, cluster, Collective::kSendRecv,
      rows * static_cast<double>(m.hidden_size) * kActivationBytes, pair, o);
}

}  // namespace

double PrefillTime_s(const ModelSpec& m, const ClusterSpec& cluster,
                     const ServingConfig& c, int64_t tokens, int64_t sequences,
                     const Calibration& cal, const ModelOptions& options) {
  if (tokens <= 0 || sequences <= 0) return 0.0;
  const ModelOptions o = ServingOptions(options);
  const DecodeBreakdown stage =
      StageTimes(m, cluster, c, {0, 0, tokens, sequences}, cal, o);
  // The busiest attention-DP rank's tokens.
  const double rank_tokens = std::min(
      static_cast<double>(tokens),
      std::ceil(static_cast<double>(sequences) / c.attention_dp) *
          static_cast<double>(tokens) / static_cast<double>(sequences));
  // With speculative decoding the drafter also runs over the prompt.
  return DraftPrefill_s(m, cluster, c, tokens, sequences, rank_tokens, cal, o) +
         static_cast<double>(c.pp) * stage.gpu_s() +
         static_cast<double>(c.pp - 1) *
             PipelineHop_s(m, cluster, rank_tokens, cal, o);
}

namespace internal {

AttentionLayers AttentionLayersOf(const ModelSpec& m, const ServingConfig& c) {
  AttentionLayers a;
  // The rank's share of the heads, as the prompt's own attention
  // (StageTimes); MLA's queries and keys at its full head width.
  a.heads = std::max<int64_t>(
      1, std::llround(static_cast<double>(m.num_attention_heads) / c.tp));
  const Stage heaviest =
      HeaviestStage(m, c, search_spaces::WeightBytesPerElement(c.weights));
  for (size_t i = 0; i < heaviest.kinds.size(); ++i) {
    const LayerShare share = ShareOfLayer(m, c, heaviest.kinds[i]);
    if (!share.attention && !share.mla) continue;
    const int64_t d = static_cast<int64_t>(
        share.mla ? static_cast<double>(m.mla_qk_head_dim()) : HeadDim(m));
    const int64_t window =
        ServedWindow(m, c, heaviest.begin + static_cast<int64_t>(i));
    auto it = std::find_if(a.kinds.begin(), a.kinds.end(), [&](const auto& k) {
      return k.head_dim == d && k.window == window;
    });
    if (it == a.kinds.end()) {
      a.kinds.push_back({d, window, 1});
    } else {
      ++it->layers;
    }
  }
  return a;
}

double ChunkContextOf_s(const AttentionLayers& a, const Calibration& cal,
                        int64_t chunk, int64_t prior, const ModelOptions& o) {
  if (chunk <= 0 || prior <= 0) return 0.0;
  double s = 0;
  for (const AttentionLayers::Kind& k : a.kinds) {
    // A windowed layer's chunk sees at most the window's earlier keys.
    const int64_t keys = k.window > 0 ? std::min(prior, k.window) : prior;
    s += k.layers * cal.AttentionForwardTime_s(a.heads, chunk, keys, k.head_dim,
                                               /*causal=*/false, o);
  }
  return s;
}

}  // namespace internal

double ChunkContextTime_s(const ModelSpec& m, const ServingConfig& c,
                          int64_t chunk, int64_t prior, const Calibration& cal,
                          const ModelOptions& options) {
  return ChunkContextOf_s(AttentionLayersOf(m, c), cal, chunk, prior,
                          ServingOptions(options));
}

double PromptsPrefillTime_s(const ModelSpec& m, const ClusterSpec& cluster,
                            const ServingConfig& c, int64_t isl, int64_t cached,
                            int64_t sequences, const Calibration& cal,
                            const ModelOptions& options) {
  const int64_t computed = isl - cached;
  const double prompts = PrefillTime_s(m, cluster, c, sequences * computed,
                                       sequences, cal, options);
  if (cached <= 0) return prompts;
  const double busiest_rank_prompts =
      std::ceil(static_cast<double>(sequences) / c.attention_dp);
  return prompts + busiest_rank_prompts * static_cast<double>(c.pp) *
                       ChunkContextTime_s(m, c, computed, cached, cal, options);
}

DecodeBreakdown DecodeStep(const ModelSpec& m, const ClusterSpec& cluster,
                           const ServingConfig& c, int64_t batch,
                           int64_t context, const Calibration& cal,
                           const ModelOptions& options) {
  const ModelOptions o = ServingOptions(options);
  DecodeBreakdown d;
  if (batch <= 0) return d;
  // A pipeline keeps pp micro-batches in flight: each stage runs B/pp.
  const double micro = std::max(1.0, static_cast<double>(batch) / c.pp);
  // A speculative step verifies each request's token and its drafts.
  const double queries =
      static_cast<double>(search_spaces::VerifiedTokens(m, c));
  const DecodeBreakdown stage =
      StageTimes(m, cluster, c, {micro, context, 0, 0, queries}, cal, o);
  const double pp = static_cast<double>(c.pp);
  // The drafts, on the last stage for each of the pp micro-batches.
  d.draft_s = pp * DraftStep_s(m, cluster, c, micro, context, cal, o);
  d.weights_s = pp * stage.weights_s;
  d.compute_s = pp * stage.compute_s;
  d.kv_cache_s = pp * stage.kv_cache_s;
  d.elementwise_s = pp * stage.elementwise_s;
  d.tp_comm_s = pp * stage.tp_comm_s;
  d.ep_comm_s = pp * stage.ep_comm_s;
  if (c.pp > 1) {
    d.pp_comm_s =
        (pp - 1) * PipelineHop_s(m, cluster,
                                 std::max(1.0, micro / c.attention_dp), cal, o);
  }
  d.overhead_s = StepOverhead_s(c.engine);
  d.host_s = HostStepTime_s(c.engine, cluster,
                            static_cast<double>(batch) / c.attention_dp);
  d.host_after_gpu = HostAfterGpu(c);
  return d;
}

ServingEstimate EstimateServingMemory(const ModelSpec& m,
                                      const ClusterSpec& cluster,
                                      const ServingWorkload& w,
                                      const ServingConfig& c) {
  ServingEstimate est;
  const double wb = search_spaces::WeightBytesPerElement(c.weights);
  const double h = static_cast<double>(m.hidden_size);
  double weights = 0;
  double widest_local = 0;  // the widest local GEMM output, for runtime
  for (const LayerKind& kind : HeaviestStage(m, c, wb).kinds) {
    const LayerShare s = ShareOfLayer(m, c, kind);
    weights += (s.dense_params + s.local_experts * s.expert_params) * wb +
               s.small_params * kActivationBytes;
    // The widest single GEMM output (fc1 with its gate, or QKV), not the
    // sum of the layer's GEMMs: TensorRT reuses activation memory from one
    // tensor and one layer to the next, so one GEMM's output is alive with
    // its input (TensorRT-LLM docs/source/reference/memory.md, "Activation
    // size").
    for (const Gemm& g : s.dense_gemms) {
      widest_local = std::max(widest_local, g.params / std::max(g.k, 1.0));
    }
    for (const Gemm& g : s.expert_gemms) {
      widest_local = std::max(widest_local, g.params / std::max(g.k, 1.0));
    }
  }
  // The served MTP depths (speculative decoding): their layers and eh_proj
  // (2h·h over tp) and norms, on the last stage, counted on the heaviest
  // (conservative when that is another stage).
  const int64_t depths = search_spaces::ServedMtpDepths(m, c);
  for (int64_t d = 0; d < depths; ++d) {
    for (const LayerKind& kind : m.MtpDepthLayers()) {
      const LayerShare s = ShareOfLayer(m, c, kind);
      weights += (s.dense_params + s.local_experts * s.expert_params) * wb +
                 s.small_params * kActivationBytes;
    }
    weights += 2.0 * h * h / c.tp * wb + 3.0 * h * kActivationBytes;
  }
  // An EAGLE-3 head, on the last stage, counted on the heaviest likewise.
  if (search_spaces::ServedEagle3Head(m, c)) {
    weights += Eagle3HeadBytes(m, c);
  }
  const double vocab = static_cast<double>(PaddedVocabSize(m.vocab_size, c.tp));
  // Embedding and output layer: on the first and last stage; with one
  // stage both, tied or not (the serving engines keep an output copy).
  weights += (c.pp == 1 ? 2.0 : 1.0) * vocab * h / c.tp * kActivationBytes;
  est.weight_bytes = weights;
  // Runtime: a forward of max_num_tokens tokens keeps a few activations of
  // the widest local linear layer alive, plus fp32 logits of the batch's
  // last tokens (one chunk of them).
  const double chunk = static_cast<double>(MaxNumTokens(c)) / c.attention_dp;
  est.runtime_bytes =
      chunk * (4.0 * h + 2.0 * widest_local) * kActivationBytes +
      std::min(chunk, 2048.0) * vocab / c.tp * 4.0;
  const double capacity = cluster.UsableMemoryGib() * 1073741824.0;
  const double free_bytes = capacity - est.weight_bytes - est.runtime_bytes;
  est.kv_cache_bytes = std::max(0.0, free_bytes) * c.kv_cache_memory_fraction;
  // A cached prefix's whole pages are shared: stored once per distinct
  // prefix (the engines share full blocks only, so its last partial page
  // is each sequence's own), the growing part of the cache only (a Mamba
  // state stays per sequence).
  est.kv_block_tokens = KvBlockTokens(m, c);
  est.kv_shared_prefix_tokens =
      w.prefix / est.kv_block_tokens * est.kv_block_tokens;
  if (est.kv_shared_prefix_tokens > 0) {
    est.kv_shared_prefix_bytes =
        static_cast<double>(std::max<int64_t>(1, w.prefix_pool)) *
        (KvCacheBytesPerSequence(m, c, est.kv_shared_prefix_tokens) -
         KvCacheBytesPerSequence(m, c, 0));
  }
  est.kv_bytes_per_sequence = KvCacheBytesPerSequence(
      m, c, w.isl + w.osl - est.kv_shared_prefix_tokens);
  const double own_bytes =
      std::max(0.0, est.kv_cache_bytes - est.kv_shared_prefix_bytes);
  const double per_rank_sequences =
      est.kv_bytes_per_sequence > 0
          ? std::floor(own_bytes / est.kv_bytes_per_sequence)
          : static_cast<double>(kDefaultMaxBatch);
  est.max_sequences =
      static_cast<int64_t>(std::min(per_rank_sequences, 1e12) * c.attention_dp);
  if (free_bytes <= 0) {
    est.infeasible_reason = "out_of_memory: the weights do not fit";
    return est;
  }
  if (est.max_sequences < 1) {
    est.infeasible_reason =
        "out_of_memory: no room for one sequence's KV cache";
  }
  return est;
}

}  // namespace meshtune::costmodel
