#include "costmodel/memory_model.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <utility>

#include "costmodel/compute_model.h"
#include "costmodel/model_layers.h"
#include "costmodel/model_options.h"
#include "search_spaces/pipeline_layout.h"
#include "search_spaces/status.h"

namespace meshtune::costmodel {

using search_spaces::LayerKind;
using search_spaces::Mixer;
using search_spaces::Mlp;
using search_spaces::ModelSpec;
using search_spaces::Normalization;
using search_spaces::ParallelConfig;
using search_spaces::PipelineLayout;
using search_spaces::PipelineSchedule;
using search_spaces::Precision;
using search_spaces::RecomputeGranularity;
using search_spaces::RecomputeMethod;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;

// cuBLAS workspaces allocated through PyTorch's caching allocator: PyTorch's
// own per handle (aten/src/ATen/cuda/CublasHandlePool.cpp, default
// CUBLAS_WORKSPACE_CONFIG ":4096:8" = 32 MiB on Hopper and Blackwell) and
// Transformer Engine's (transformer_engine/pytorch/module/base.py
// get_cublas_workspace_size_bytes: 32 MiB on sm90+), plus TE's extra
// workspaces for the multi-stream grouped GEMM of MoE experts (4 streams).
constexpr double kCublasWorkspaceBytes = 32 * kMiB;
constexpr double kGroupedGemmStreams = 4;

// Mamba-2's chunked scan materialises one fp32 state [H, P, N] per chunk of
// this many tokens (megatron/core/ssm/mamba_mixer.py chunk_size = 128).
constexpr double kMambaChunkTokens = 128;

// Besides the allocated peak (AddMemoryBesidesModel):
// Fragmentation: PyTorch's caching allocator reserves more than it hands
// out; SimuMax v1.2 models reserved = allocated / 0.94 (its strategy
// mem_factor), and the 10 measured B200 runs (SimuMax v1.2's B200 release,
// docs/accuracy.md "The development data") span 2.8-7.9 % (median 5.9 %).
constexpr double kAllocatorFragmentation = 1.0 / 0.94 - 1.0;
// CUDA context with lazily loaded kernels (CUDA_MODULE_LOADING=LAZY, the
// default since CUDA 11.7 / PyTorch 1.13) on Hopper/Blackwell: about 0.5 GiB
// of device memory before the first tensor (assumption, typical
// nvidia-smi per-process usage of a bare torch.cuda.init()).
constexpr double kCudaContextBytes = 0.5 * kGiB;
// NCCL per communicator: per channel and peer, the Simple (NCCL_BUFFSIZE
// 4 MiB), LL128 (~4.5 MiB) and LL (256 KiB) buffers, ~16 channels on
// NVLink for a ring's send and receive peers: ~256 MiB (NCCL docs,
// env.html NCCL_BUFFSIZE; assumption for the channel count).
constexpr double kNcclBytesPerCommunicator = 256 * kMiB;

double HeadDim(const ModelSpec& m) {
  return m.kv_channels > 0
             ? static_cast<double>(m.kv_channels)
             : static_cast<double>(m.hidden_size) / m.num_attention_heads;
}

// GPT-style recipes train with hidden dropout (1-byte masks are stored);
// LLaMA-style recipes (RMSNorm) use none.
bool HasDropout(const ModelSpec& m) {
  return m.normalization == Normalization::kLayerNorm;
}

double Tokens(const ParallelConfig& c, int64_t seq) {
  return static_cast<double>(c.mbs) * seq / c.cp;
}

// One TE linear weight on this GPU: rows × cols, `instances` of it per layer
// (the local experts of a grouped GEMM).
struct Shape {
  double rows = 0, cols = 0, instances = 1;
};
// The linear weights of one layer: at most 5 (MLA) + 6 (MoE with shared and
// latent projections). A fixed array: the search builds one per layer kind
// and configuration, and a heap vector there was most of its allocations.
class ShapeList {
 public:
  static constexpr size_t kCapacity = 12;
  void push_back(const Shape& s) {
    MESHTUNE_CHECK(size_ < kCapacity);
    shapes_[size_++] = s;
  }
  const Shape* begin() const { return shapes_.data(); }
  const Shape* end() const { return shapes_.data() + size_; }

 private:
  std::array<Shape, kCapacity> shapes_;
  size_t size_ = 0;
};

void MixerShapes(const ModelSpec& m, const ParallelConfig& c, Mixer mixer,
                 ShapeList* out) {
  const double t = static_cast<double>(c.tp);
  const double h = static_cast<double>(m.hidden_size);
  switch (mixer) {
    case Mixer::kAttention: {
      const double q = m.num_attention_heads * HeadDim(m);
      const double kv = m.num_query_groups * HeadDim(m);
      out->push_back({(q + 2 * kv) / t, h});
      out->push_back({h, q / t});
      break;
    }
    case Mixer::kMla: {
      const double n = static_cast<double>(m.num_attention_heads);
      const double dqk = static_cast<double>(m.mla_qk_head_dim());
      if (m.q_lora_rank > 0) {
        out->push_back({static_cast<double>(m.q_lora_rank), h});
        out->push_back({n * dqk / t, static_cast<double>(m.q_lora_rank)});
      } else {
        out->push_back({n * dqk / t, h});
      }
      out->push_back(
          {static_cast<double>(m.kv_lora_rank + m.qk_pos_emb_head_dim), h});
      out->push_back({n * (m.qk_head_dim + m.v_head_dim) / t,
                      static_cast<double>(m.kv_lora_rank)});
      out->push_back({h, n * m.v_head_dim / t});
      break;
    }
    case Mixer::kMamba: {
      const double H = static_cast<double>(m.mamba_heads());
      const double P = static_cast<double>(m.mamba_head_dim);
      const double GN =
          static_cast<double>(m.mamba_num_groups) * m.mamba_state_dim;
      out->push_back({(2 * H * P + 2 * GN + H) / t, h});
      out->push_back({h, H * P / t});
      break;
    }
    case Mixer::kNone:
      break;
  }
}

void MlpShapes(const ModelSpec& m, const ParallelConfig& c, Mlp mlp,
               ShapeList* out) {
  const double t = static_cast<double>(c.tp);
  const double h = static_cast<double>(m.hidden_size);
  const double phi = m.gated_mlp() ? 2.0 : 1.0;
  switch (mlp) {
    case Mlp::kDense: {
      const double f = static_cast<double>(m.ffn_hidden_size);
      out->push_back({phi * f / t, h});
      out->push_back({h, f / t});
      break;
    }
    case Mlp::kMoe: {
      const double etp = static_cast<double>(c.expert_tp());
      const double fe = static_cast<double>(m.expert_ffn_hidden_size());
      const double h_in = m.moe_latent_size > 0 ? m.moe_latent_size : h;
      const double local = static_cast<double>(m.num_experts) / c.ep;
      out->push_back({phi * fe / etp, h_in, local});
      out->push_back({h_in, fe / etp, local});
      const double fs =
          static_cast<double>(m.moe_shared_expert_intermediate_size);
      if (fs > 0) {
        out->push_back({phi * fs / t, h});
        out->push_back({h, fs / t});
      }
      if (m.moe_latent_size > 0) {
        out->push_back({h_in, h});
        out->push_back({h, h_in});
      }
      break;
    }
    case Mlp::kNone:
      break;
  }
}

ShapeList LayerShapes(const ModelSpec& m, const ParallelConfig& c,
                      LayerKind kind) {
  ShapeList s;
  MixerShapes(m, c, kind.mixer, &s);
  MlpShapes(m, c, kind.mlp, &s);
  return s;
}

double LinearParams(const ShapeList& shapes) {
  double n = 0;
  for (const Shape& s : shapes) n += s.rows * s.cols * s.instances;
  return n;
}

// The stage's layers (every chunk of the layout) counted per kind from the
// prepared prefix counts; `sl` is refilled (its buffer reused).
void FillStageLayers(const ModelSpec& m, const ModelLayers& layers,
                     const PipelineLayout& layout, const ParallelConfig& c,
                     int64_t stage, StageLayers* sl) {
  sl->layers = 0;
  sl->moe = 0;
  sl->kinds.clear();
  for (size_t k = 0; k < layers.kinds().size(); ++k) {
    int64_t n = 0;
    for (int64_t chunk = 0; chunk < c.vpp; ++chunk) {
      n += layers.CountInRange(k, layout.FirstLayerOfChunk(stage, chunk),
                               layout.LayersInChunk(stage, chunk));
    }
    if (n == 0) continue;
    const LayerKind kind = layers.kinds()[k];
    sl->kinds.push_back({kind, n});
    sl->layers += static_cast<double>(n);
    if (kind.mlp == Mlp::kMoe) sl->moe += static_cast<double>(n);
  }
  sl->mtp_depths = stage == c.pp - 1 ? m.mtp_num_layers : 0;
  sl->mtp_weight_depths = stage == c.pp - 1 ? m.mtp_weight_depths() : 0;
}

LocalParams LocalParamsOf(const ModelSpec& m, const ModelStats& st,
                          const ParallelConfig& c, const StageLayers& sl,
                          const std::vector<LayerKind>& mtp_kinds,
                          int64_t stage) {
  const double t = static_cast<double>(c.tp);
  const double expert_split = static_cast<double>(c.ep * c.expert_tp());
  LocalParams lp;
  auto add = [&](const LayerParams& p, double times) {
    lp.dense += times * (p.tp_sharded / t + p.replicated);
    lp.expert += times * p.routed_experts / expert_split;
  };
  for (const KindCount& k : sl.kinds) {
    add(ParamsOfLayer(m, k.kind), static_cast<double>(k.count));
    lp.linear += k.count * LinearParams(LayerShapes(m, c, k.kind));
  }
  if (sl.mtp_weight_depths > 0) {
    // Weights: a repeated layer's depths hold one block.
    const double d = static_cast<double>(sl.mtp_weight_depths);
    add(MtpGlueParams(m), d);
    const double h = static_cast<double>(m.hidden_size);
    lp.linear += d * 2 * h * h / t;  // eh_proj
    for (const LayerKind& kind : mtp_kinds) {
      add(ParamsOfLayer(m, kind), d);
      lp.linear += d * LinearParams(LayerShapes(m, c, kind));
    }
  }
  const bool first = stage == 0;
  const bool last = stage == c.pp - 1;
  if (first) lp.dense += st.word_embedding_params / t + st.position_params;
  if (last) {
    lp.dense += st.final_norm_params;
    if (st.output_params > 0) {
      lp.dense += st.output_params / t;
    } else if (!first) {
      // Tied embeddings with pp > 1: the last stage keeps its own copy of
      // the word embeddings for the output layer (Megatron).
      lp.dense += st.word_embedding_params / t;
    }
  }
  return lp;
}

// Per-token activation bytes of one block, split by how they shard:
// `repl` over the SP group only with sequence parallelism, `shard` over tp;
// `rows_bytes` are absolute bytes of the routed-expert rows (MoE).
struct BlockActs {
  double repl = 0, shard = 0, rows_bytes = 0;
};

BlockActs MixerActs(const ModelSpec& m, const ParallelConfig& c, int64_t seq,
                    Precision precision, Mixer mixer,
                    const MemoryRecipe& recipe) {
  BlockActs b;
  const double h = static_cast<double>(m.hidden_size);
  const bool quant = search_spaces::IsQuantized(precision);
  const double l = SavedInputBytesPerElement(precision);
  const double drop = HasDropout(m) ? 1.0 : 0.0;
  const bool cp_a2a = c.cp > 1 && recipe.cp_all_to_all;
  const bool selective =
      c.recompute.granularity == RecomputeGranularity::kSelective;
  (void)seq;
  switch (mixer) {
    case Mixer::kAttention: {
      const double dh = HeadDim(m);
      const double q = m.num_attention_heads * dh;
      const double kv = m.num_query_groups * dh;
      // norm1 in, QKV in, attention dropout mask | Q, K, V, O, quantised
      // copy of O (proj input), LSE; CP a2a keeps O before the all-to-all.
      b.repl = 2 * h + l * h + drop * h;
      b.shard = 2 * q + 4 * kv + 2 * q + (quant ? l * q : 0.0) +
                4.0 * m.num_attention_heads + (cp_a2a ? 2 * q : 0.0);
      break;
    }
    case Mixer::kMla: {
      // docs/sources.md §4.6: latents at s/tp granularity (the
      // down-projections run on the SP shard), Q, K, V up-projected per
      // head (d_qk = nope + rope for Q and K, d_v for V), O and LSE.
      const double n = static_cast<double>(m.num_attention_heads);
      const double dqk = static_cast<double>(m.mla_qk_head_dim());
      const double dv = static_cast<double>(m.v_head_dim);
      const double qr = static_cast<double>(m.q_lora_rank);
      const double kr = static_cast<double>(m.kv_lora_rank);
      const double dr = static_cast<double>(m.qk_pos_emb_head_dim);
      // norm1 in, its output (down-projection input), q latent (q norm in,
      // q_up in), kv down output (kv norm keeps it), kv latent (kv_up in).
      b.repl = 2 * h + l * h + drop * h + (qr > 0 ? 2 * qr + l * qr : 0.0) +
               2 * (kr + dr) + l * kr;
      // mla_up_proj recompute discards Q, K, V after core attention and
      // rebuilds them from the latents in backward.
      const bool up_proj_recomputed =
          selective &&
          (c.recompute.modules & search_spaces::kRecomputeMlaUpProj) != 0;
      const double qkv =
          up_proj_recomputed ? 0.0 : 2 * n * dqk * 2 + 2 * n * dv;
      b.shard = qkv + 2 * n * dv + (quant ? l * n * dv : 0.0) + 4.0 * n +
                (cp_a2a ? 2 * n * dv : 0.0);
      break;
    }
    case Mixer::kMamba: {
      // §4.7: the fused in_proj (norm fused) keeps its input and norm
      // output; its output z|x|B|C|dt feeds the conv + chunked scan, which
      // keeps it, dt and the cumulative decay in fp32, and one fp32 state
      // [H/t, P, N] per chunk; the gated norm keeps its input y; out_proj
      // its input. TP splits heads and groups.
      const double H = static_cast<double>(m.mamba_heads());
      const double P = static_cast<double>(m.mamba_head_dim);
      const double GN =
          static_cast<double>(m.mamba_num_groups) * m.mamba_state_dim;
      b.repl = 2 * h + l * h;
      b.shard = 2 * (2 * H * P + 2 * GN + H) + 8 * H +
                4 * H * P * m.mamba_state_dim / kMambaChunkTokens + 2 * H * P +
                l * H * P;
      break;
    }
    case Mixer::kNone:
      break;
  }
  return b;
}

BlockActs MlpActs(const ModelSpec& m, const ParallelConfig& c, int64_t seq,
                  Precision precision, Mlp mlp, const MemoryRecipe& recipe) {
  (void)recipe;
  BlockActs b;
  const double h = static_cast<double>(m.hidden_size);
  const bool quant = search_spaces::IsQuantized(precision);
  const double l = SavedInputBytesPerElement(precision);
  const double drop = HasDropout(m) ? 1.0 : 0.0;
  // Selective recompute modules that checkpoint a whole MLP block keep only
  // the block's input and rebuild the rest in backward (Megatron
  // transformer_layer.py / moe_layer.py: tensor_parallel.checkpoint of the
  // mlp, the MoE layer, the shared experts; "layernorm" runs the MoE
  // layer's pre-MLP norm under CheckpointWithoutOutput, which frees its
  // output after the router and experts read it).
  const uint32_t modules =
      c.recompute.granularity == RecomputeGranularity::kSelective
          ? c.recompute.modules
          : 0u;
  switch (mlp) {
    case Mlp::kDense: {
      const double f = static_cast<double>(m.ffn_hidden_size);
      // norm2 in, fc1 in, dropout mask | fc1 out (activation input), fc2 in.
      // "mlp" recompute: the norm-fused fc1's input (the residual, norm2
      // in) and the dropout mask after the block stay.
      if (modules & search_spaces::kRecomputeMlp) {
        b.repl = 2 * h + drop * h;
        break;
      }
      b.repl = 2 * h + l * h + drop * h;
      b.shard = (m.gated_mlp() ? 4 * f : 2 * f) + l * f;
      break;
    }
    case Mlp::kMoe: {
      // §4.5, alltoall dispatcher. Per token of this rank: norm2 in, its
      // 16-bit output (router and shared-expert input; a quantised copy for
      // the shared fc1), fp32 router scores [E], dropout mask; latent MoE
      // keeps the up-projection's latent input.
      const double E = static_cast<double>(m.num_experts);
      const double fs =
          static_cast<double>(m.moe_shared_expert_intermediate_size);
      const double lat = static_cast<double>(m.moe_latent_size);
      // "layernorm" frees the norm's 16-bit output (the MoE input).
      const double norm_out =
          (modules & search_spaces::kRecomputeLayernorm) ? 0.0 : 2 * h;
      // "moe": the MoE layer keeps only its input (the norm output).
      if (modules & search_spaces::kRecomputeMoe) {
        b.repl = 2 * h + norm_out + drop * h;
        break;
      }
      // "shared_experts": the shared experts keep only their input.
      const bool shared_kept =
          fs > 0 && !(modules & search_spaces::kRecomputeSharedExperts);
      b.repl = 2 * h + norm_out + (quant && shared_kept ? l * h : 0.0) + 4 * E +
               drop * h + 2 * lat;
      // Shared experts: a dense MLP of their width, split over tp.
      if (shared_kept) b.shard = (m.gated_mlp() ? 4 * fs : 2 * fs) + l * fs;
      // Routed copies on this GPU: expert fc1 input at h_in (gathered over
      // etp), fc1 output and activation output at fe/etp (moe_act
      // recompute discards the latter); capacity and imbalance in the row
      // count. The routing probabilities are applied inside the expert
      // activation (megatron/core/transformer/moe/experts.py
      // bias_act_func: weighted SwiGLU of fc1 output and permuted_probs),
      // and the combine's unpermute runs without probs
      // (token_dispatcher.py: unpermute(..., probs=None), TE
      // fused_unpermute with merging_probs=None saves only its row map):
      // nothing of the combine input [k·T, h] is kept for backward
      // (Megatron-Core >= 0.13, "Memory efficient token permutation",
      // commit 2659630721, 2025-04-09; before it the unpermute kept its
      // 16-bit input for the probs' gradient).
      const double h_in = lat > 0 ? lat : h;
      const double fe = static_cast<double>(m.expert_ffn_hidden_size());
      const double etp = static_cast<double>(c.expert_tp());
      const bool act_recomputed =
          c.recompute.granularity == RecomputeGranularity::kSelective &&
          (c.recompute.modules & search_spaces::kRecomputeMoeAct) != 0;
      const double per_row = l * h_in +
                             (m.gated_mlp() ? 4 * fe : 2 * fe) / etp +
                             (act_recomputed ? 0.0 : l * fe / etp);
      b.rows_bytes = RoutedRowsPerRank(m, c, seq) * per_row;
      break;
    }
    case Mlp::kNone:
      break;
  }
  return b;
}

double BlockBytes(const BlockActs& b, const ParallelConfig& c, int64_t seq) {
  const double t = static_cast<double>(c.tp);
  const double tsp = c.sp ? t : 1.0;
  return Tokens(c, seq) * (b.repl / tsp + b.shard / t) + b.rows_bytes;
}

// The gradient buffers of a layer's largest block, live while its backward
// runs (e.g. dense MLP: the gradients of the fc1 and activation outputs).
double LayerBackwardTransientBytes(const ModelSpec& m, const ParallelConfig& c,
                                   int64_t seq, Precision p, LayerKind kind,
                                   const MemoryRecipe& r) {
  const double T = Tokens(c, seq);
  const double t = static_cast<double>(c.tp);
  const BlockActs mixer = MixerActs(m, c, seq, p, kind.mixer, r);
  const BlockActs mlp = MlpActs(m, c, seq, p, kind.mlp, r);
  return std::max(T * mixer.shard / t, T * mlp.shard / t + mlp.rows_bytes);
}

// Per-depth activations of the MTP glue (enorm and hnorm inputs, eh_proj
// input [T, 2h], the depth's final norm and its output-layer input) and the
// depth's saved logits.
double MtpGlueActivationBytes(const ModelSpec& m, const ModelStats& st,
                              const ParallelConfig& c, int64_t seq, Precision p,
                              const MemoryRecipe& r) {
  const double h = static_cast<double>(m.hidden_size);
  const double t = static_cast<double>(c.tp);
  const double tsp = c.sp ? t : 1.0;
  const double l = SavedInputBytesPerElement(p);
  const double T = Tokens(c, seq);
  const double logits = (r.cross_entropy_fusion ? 2.0 : 4.0) * T *
                        static_cast<double>(st.padded_vocab) / t;
  return T * (2 * h + 2 * h + l * 2 * h + 2 * h + 2 * h) / tsp + logits;
}

double TeDummyWgradBytes(const ModelSpec& m, const ParallelConfig& c,
                         const StageLayers& sl,
                         const std::vector<LayerKind>& mtp_kinds) {
  // Distinct shapes: at most every shape of every kind and of the MTP
  // layers, plus eh_proj. Left uninitialised (written before read): this
  // runs for every stage of every configuration of a search.
  struct Key {
    double rows, cols;
  };
  Key seen[2 * 12 * ShapeList::kCapacity + 1];
  size_t num_seen = 0;
  double elements = 0;
  auto add = [&](const ShapeList& shapes) {
    for (const Shape& s : shapes) {
      const bool known = std::any_of(seen, seen + num_seen, [&](const Key& k) {
        return k.rows == s.rows && k.cols == s.cols;
      });
      if (known) continue;
      MESHTUNE_CHECK(num_seen < std::size(seen));
      seen[num_seen++] = {s.rows, s.cols};
      elements += s.rows * s.cols;
    }
  };
  for (const KindCount& k : sl.kinds) add(LayerShapes(m, c, k.kind));
  if (sl.mtp_depths > 0) {
    const double h = static_cast<double>(m.hidden_size);
    ShapeList eh_proj;
    eh_proj.push_back({h / c.tp, 2 * h});
    add(eh_proj);
    for (const LayerKind& kind : mtp_kinds) add(LayerShapes(m, c, kind));
  }
  return 2.0 * elements;  // parameter dtype (bf16/fp16)
}

// Megatron-FSDP's working set on one GPU: the all-gathered weights and the
// unsharded gradient bucket of the two largest FSDP units in use at once.
// Units are the transformer layers (megatron_fsdp fsdp_unit_modules; MTP
// layers likewise) and, on their stages, the embedding and the output
// layer; during backward the unit being computed and the next one
// (prefetched all-gather; the previous unit's reduce-scatter in flight)
// are live. Parameter counts are this GPU's tp / ep·etp shard of a unit.
struct FsdpWorkingSet {
  double weights_bytes = 0, grads_bytes = 0;
};
FsdpWorkingSet FsdpWorkingSetBytes(const ModelSpec& m, const ModelStats& st,
                                   const ParallelConfig& c,
                                   const StageLayers& sl,
                                   const std::vector<LayerKind>& mtp_kinds,
                                   int64_t stage, double weight_bytes,
                                   double grad_bytes) {
  const double t = static_cast<double>(c.tp);
  const double expert_split = static_cast<double>(c.ep * c.expert_tp());
  auto unit = [&](const LayerParams& p) {
    return p.tp_sharded / t + p.replicated + p.routed_experts / expert_split;
  };
  double first = 0, second = 0;  // the two largest units
  auto add = [&](double params, int64_t count) {
    for (int64_t i = 0; i < std::min<int64_t>(count, 2); ++i) {
      if (params > first) {
        second = first;
        first = params;
      } else if (params > second) {
        second = params;
      }
    }
  };
  for (const KindCount& k : sl.kinds)
    add(unit(ParamsOfLayer(m, k.kind)), k.count);
  for (const LayerKind& kind : mtp_kinds) {
    if (sl.mtp_depths > 0) add(unit(ParamsOfLayer(m, kind)), sl.mtp_depths);
  }
  if (stage == 0) add(st.word_embedding_params / t + st.position_params, 1);
  if (stage == c.pp - 1) {
    const double out =
        st.output_params > 0 ? st.output_params : st.word_embedding_params;
    if (st.output_params > 0 || stage != 0) add(out / t, 1);
  }
  FsdpWorkingSet ws;
  ws.weights_bytes = (first + second) * weight_bytes;
  ws.grads_bytes = (first + second) * grad_bytes;
  return ws;
}

MemoryBreakdown StageMemoryOf(const ModelSpec& m, const ModelStats& st,
                              const ParallelConfig& c, int64_t seq,
                              Precision precision,
                              const PipelineSchedule& schedule, int64_t stage,
                              bool flash_attention, const MemoryRecipe& r,
                              const StageLayers& sl,
                              const std::vector<LayerKind>& mtp_kinds,
                              const StageStatics& statics) {
  MemoryBreakdown mem;
  const LocalParams& lp = statics.params;
  const int64_t dpcp = c.dp * c.cp;
  const int64_t edp = ExpertDataParallelSize(c);
  const double params = lp.dense + lp.expert;
  if (r.megatron_fsdp) {
    // Megatron-FSDP (optim_grads_params): every persistent state is a
    // shard, dense parameters over dp·cp and experts over edp; the
    // all-gathered weights and unsharded gradients of the units in use
    // are the working set (FsdpWorkingSetBytes).
    const double dense_shard = static_cast<double>(std::max<int64_t>(1, dpcp));
    const double expert_shard = static_cast<double>(std::max<int64_t>(1, edp));
    const double sharded = lp.dense / dense_shard + lp.expert / expert_shard;
    const double linear_share = params > 0 ? lp.linear / params : 0.0;
    double weight_bytes = r.weight_bytes_per_param;
    if (search_spaces::IsQuantized(precision)) {
      const double q = QuantizedBytesPerElement(precision);
      weight_bytes =
          r.quantized_param_gather
              ? r.weight_bytes_per_param * (1 - linear_share) + q * linear_share
              : r.weight_bytes_per_param + q * linear_share;
    }
    const FsdpWorkingSet ws = FsdpWorkingSetBytes(
        m, st, c, sl, mtp_kinds, stage, weight_bytes, r.grad_bytes_per_param);
    mem.weights_bytes = weight_bytes * sharded + ws.weights_bytes;
    mem.gradients_bytes = r.grad_bytes_per_param * sharded + ws.grads_bytes;
    mem.optimizer_bytes = OptimizerBytesPerParam(true, 1) * sharded;
  } else {
    if (search_spaces::IsQuantized(precision)) {
      // TE keeps a quantised copy of every linear weight next to the 16-bit
      // one; with quantised param gather the copy is the weight (§4.3).
      const double q = QuantizedBytesPerElement(precision);
      mem.weights_bytes =
          r.quantized_param_gather
              ? r.weight_bytes_per_param * (params - lp.linear) + q * lp.linear
              : r.weight_bytes_per_param * params + q * lp.linear;
    } else {
      mem.weights_bytes = r.weight_bytes_per_param * params;
    }
    mem.gradients_bytes = r.grad_bytes_per_param * params;
    mem.optimizer_bytes = lp.dense * OptimizerBytesPerParam(c.dist_opt, dpcp) +
                          lp.expert * OptimizerBytesPerParam(c.dist_opt, edp);
  }

  // Activations of one micro-batch through all of this stage's layers.
  double a_full = 0, a_max = 0, transient = 0;
  bool has_moe = false;
  double moe_rows = 0;  // one MoE layer's routed working set
  // Selective recompute frees tensors in forward and rebuilds one layer's
  // in its backward: the largest rebuilt set is working memory, and the
  // backward's gradient buffers keep the shapes of the full activations.
  const bool selective =
      c.recompute.granularity == RecomputeGranularity::kSelective;
  ParallelConfig kept = c;
  kept.recompute.granularity = RecomputeGranularity::kNone;
  double rebuilt = 0;
  auto add_kind = [&](LayerKind kind, double count) {
    const double a =
        LayerActivationBytes(m, c, seq, precision, kind, r, flash_attention);
    a_full += count * a;
    a_max = std::max(a_max, a);
    transient = std::max(transient, LayerBackwardTransientBytes(
                                        m, kept, seq, precision, kind, r));
    if (selective) {
      rebuilt = std::max(
          rebuilt,
          LayerActivationBytes(m, kept, seq, precision, kind, r, true) - a);
    }
    if (kind.mlp == Mlp::kMoe) {
      has_moe = true;
      moe_rows = std::max(
          moe_rows, MlpActs(m, c, seq, precision, Mlp::kMoe, r).rows_bytes);
    }
  };
  for (const KindCount& k : sl.kinds) {
    add_kind(k.kind, static_cast<double>(k.count));
  }
  double units = sl.layers;
  if (sl.mtp_depths > 0) {
    const double d = static_cast<double>(sl.mtp_depths);
    for (const LayerKind& kind : mtp_kinds) add_kind(kind, d);
    a_full += d * MtpGlueActivationBytes(m, st, c, seq, precision, r);
    units += d * static_cast<double>(mtp_kinds.size());
  }
  const double a_avg = units > 0 ? a_full / units : 0.0;
  const double ckpt = CheckpointBytes(m, c, seq);
  const double in_flight = schedule.InFlightMicrobatches(stage);

  double stored = a_full;    // per in-flight micro-batch
  double working = rebuilt;  // one recompute chunk materialised in backward
  if (c.recompute.granularity == RecomputeGranularity::kFull) {
    const double n =
        static_cast<double>(std::max<int64_t>(1, c.recompute.num_layers));
    if (c.recompute.method == RecomputeMethod::kUniform) {
      stored = units / n * ckpt;
      working = std::min(n, units) * a_max;
    } else {
      const double per_chunk = units / static_cast<double>(c.vpp);
      const double rr = std::min(n, per_chunk);
      stored = c.vpp * (rr * ckpt + (per_chunk - rr) * a_avg);
      working = a_max;
    }
  }
  // CPU activation offloading (--cpu-offloading-num-layers N; Megatron
  // allows it only with pp 1 and no recompute, transformer_config.py): the
  // saved activations of N layers go to host memory. One offloaded layer's
  // activations stay on the device while its copy is in flight (the
  // offload of layer i overlaps the forward of layer i+1, the reload of
  // layer i−1 the backward of layer i), so N − 1 layers' worth leaves.
  if (r.cpu_offloading_num_layers > 1 &&
      c.recompute.granularity == RecomputeGranularity::kNone) {
    const double offloaded =
        std::min(static_cast<double>(r.cpu_offloading_num_layers), units) - 1;
    stored = std::max(0.0, stored - std::max(0.0, offloaded) * a_avg);
  }
  // EP A2A overlap keeps a second micro-batch's MoE working set live (§4.5).
  const double ep_overlap = r.moe_ep_overlap && has_moe ? moe_rows : 0.0;
  mem.activations_bytes = in_flight * stored + working + ep_overlap;

  // Other: small first/last-stage buffers and the largest transient of the
  // backward at the peak.
  const double T = Tokens(c, seq);
  const double t = static_cast<double>(c.tp);
  const double tsp = c.sp ? t : 1.0;
  const double h = static_cast<double>(m.hidden_size);
  const double V = static_cast<double>(st.padded_vocab);
  double small = 0;
  double peak = transient;  // backward of the largest layer
  if (stage == 0) {
    // Token/position ids and the embedding dropout mask of each in-flight
    // micro-batch.
    small += in_flight * T * (8.0 + (HasDropout(m) ? h / tsp : 0.0));
    // Embedding backward: a dense 16-bit weight gradient [V/t, h] before it
    // is added to the main grad, once this micro-batch's activations are
    // freed.
    if (!r.megatron_fsdp) peak = std::max(peak, 2.0 * V * h / t - stored);
  }
  if (stage == c.pp - 1) {
    // Final norm input and output (the output layer's input).
    small += 4.0 * T * h / tsp;
    // Output-layer backward: the logits (16-bit with their gradient in
    // place when fused; fp32 saved + a 16-bit gradient copy unfused), the
    // weight-gradient buffer Megatron's LinearWithGradAccumulation... with
    // gradient-accumulation fusion allocates (tensor_parallel/layers.py),
    // and the [T, h] input gradient before its reduction.
    const double logits = (r.cross_entropy_fusion ? 2.0 : 6.0) * T * V / t;
    // With Megatron-FSDP the weight gradient goes to the unit's unsharded
    // gradient bucket, counted in the working set.
    const double wgrad =
        r.te_dummy_wgrad && !r.megatron_fsdp ? 2.0 * V * h / t : 0.0;
    peak = std::max(peak, logits + wgrad + 2.0 * T * h);
  }
  mem.other_bytes = small + std::max(0.0, peak);

  // Persistent library buffers allocated through PyTorch.
  mem.workspace_bytes =
      (r.te_dummy_wgrad ? statics.te_dummy_wgrad_bytes : 0.0) +
      2 * kCublasWorkspaceBytes +
      (has_moe && m.moe_grouped_gemm ? kGroupedGemmStreams : 0.0) *
          kCublasWorkspaceBytes;
  return mem;
}

}  // namespace

MemoryRecipe MemoryRecipeFor(const search_spaces::TrainingSpec& training) {
  MemoryRecipe r;
  r.weight_bytes_per_param = 2.0;
  r.grad_bytes_per_param = training.grad_bytes_per_param();
  r.quantized_param_gather = training.fp8_param_gather &&
                             search_spaces::IsQuantized(training.precision);
  r.moe_ep_overlap = training.moe_ep_overlap;
  r.cross_entropy_fusion = training.cross_entropy_loss_fusion;
  r.cp_all_to_all = training.cp_comm_a2a;
  r.megatron_fsdp = training.megatron_fsdp;
  r.cpu_offloading_num_layers = training.cpu_offloading_num_layers;
  return r;
}

double QuantizedBytesPerElement(Precision p) {
  switch (p) {
    case Precision::kFp8:
    case Precision::kFp8Tensorwise:
      return 1.0;
    case Precision::kFp8Blockwise:
      return 1.0 + 4.0 / 128;
    case Precision::kMxfp8:
      return 2.0 * (1.0 + 1.0 / 32);
    case Precision::kNvfp4:
      return 0.5 + 1.0 / 16;
    case Precision::kBf16:
    case Precision::kFp16:
      return 2.0;
  }
  return 2.0;
}

double SavedInputBytesPerElement(Precision p) {
  return p == Precision::kMxfp8 ? 1.0 + 1.0 / 32 : QuantizedBytesPerElement(p);
}

int64_t ExpertDataParallelSize(const ParallelConfig& c) {
  const int64_t grid = c.expert_tp() * c.ep * c.pp;
  return std::max<int64_t>(1, c.world() / std::max<int64_t>(1, grid));
}

StageLayers LayersOnStage(const ModelSpec& m, const ModelLayers& layers,
                          const PipelineLayout& layout, const ParallelConfig& c,
                          int64_t stage) {
  StageLayers sl;
  FillStageLayers(m, layers, layout, c, stage, &sl);
  return sl;
}

StageLayers LayersOnStage(const ModelSpec& m, const ParallelConfig& c,
                          int64_t stage) {
  return LayersOnStage(m, ModelLayers(m), PipelineLayout(m.num_layers, c), c,
                       stage);
}

LocalParams StageLocalParams(const ModelSpec& m, const ModelStats& st,
                             const ParallelConfig& c, int64_t stage) {
  const ModelLayers layers(m);
  return StageLocalParams(
      m, layers, st, c,
      {stage,
       LayersOnStage(m, layers, PipelineLayout(m.num_layers, c), c, stage)});
}

double RoutedRowsPerRank(const ModelSpec& m, const ParallelConfig& c,
                         int64_t seq) {
  if (!m.is_moe()) return 0.0;
  return static_cast<double>(m.num_experts) / c.ep *
         TokensPerLocalExpert(m, c, seq, ModelOptions());
}

double LayerActivationBytes(const ModelSpec& m, const ParallelConfig& c,
                            int64_t seq, Precision precision, LayerKind kind,
                            const MemoryRecipe& recipe, bool flash_attention) {
  const BlockActs mixer = MixerActs(m, c, seq, precision, kind.mixer, recipe);
  const BlockActs mlp = MlpActs(m, c, seq, precision, kind.mlp, recipe);
  double bytes = BlockBytes(mixer, c, seq) + BlockBytes(mlp, c, seq);
  const bool attention =
      kind.mixer == Mixer::kAttention || kind.mixer == Mixer::kMla;
  if (attention && !flash_attention &&
      c.recompute.granularity == RecomputeGranularity::kNone) {
    // Korthikanti Table 2: softmax output, its dropout mask and output.
    bytes += Tokens(c, seq) * 5.0 * m.num_attention_heads *
             static_cast<double>(seq) / c.tp;
  }
  return bytes;
}

double LayerActivationBytes(const ModelSpec& m, const ParallelConfig& c,
                            int64_t seq, Precision precision, bool moe_layer,
                            bool flash_attention) {
  const LayerKind kind{
      m.multi_latent_attention ? Mixer::kMla : Mixer::kAttention,
      moe_layer ? Mlp::kMoe : Mlp::kDense};
  return LayerActivationBytes(m, c, seq, precision, kind, MemoryRecipe(),
                              flash_attention);
}

double CheckpointBytes(const ModelSpec& m, const ParallelConfig& c,
                       int64_t seq) {
  return 2.0 * Tokens(c, seq) * m.hidden_size / (c.sp ? c.tp : 1);
}

double OptimizerBytesPerParam(bool dist_opt, int64_t shard) {
  return dist_opt ? 12.0 / static_cast<double>(std::max<int64_t>(1, shard))
                  : 12.0;
}

MemoryBreakdown StageMemory(const ModelSpec& m, const ModelStats& st,
                            const ParallelConfig& c, int64_t seq,
                            Precision precision,
                            const PipelineSchedule& schedule, int64_t stage,
                            bool flash_attention, const MemoryRecipe& recipe) {
  const ModelLayers layers(m);
  const StageLayers sl =
      LayersOnStage(m, layers, PipelineLayout(m.num_layers, c), c, stage);
  return StageMemoryOf(m, st, c, seq, precision, schedule, stage,
                       flash_attention, recipe, sl, layers.mtp(),
                       StageStaticsOf(m, layers, st, c, {stage, sl}));
}

std::vector<StageClass> DistinctStages(const ModelSpec& m,
                                       const ModelLayers& layers,
                                       const PipelineLayout& layout,
                                       const ParallelConfig& c) {
  std::vector<StageClass> out;
  StageLayers sl;
  for (int64_t stage = 0; stage < c.pp; ++stage) {
    FillStageLayers(m, layers, layout, c, stage, &sl);
    const bool edge = stage == 0 || stage == c.pp - 1;
    if (!edge) {
      auto same =
          std::find_if(out.begin(), out.end(), [&](const StageClass& o) {
            return o.stage != 0 && o.layers.kinds == sl.kinds;
          });
      if (same != out.end()) {
        ++same->count;
        continue;
      }
    }
    out.push_back({stage, sl, 1});
  }
  return out;
}

LocalParams StageLocalParams(const ModelSpec& m, const ModelLayers& layers,
                             const ModelStats& st, const ParallelConfig& c,
                             const StageClass& stage) {
  return LocalParamsOf(m, st, c, stage.layers, layers.mtp(), stage.stage);
}

StageStatics StageStaticsOf(const ModelSpec& m, const ModelLayers& layers,
                            const ModelStats& st, const ParallelConfig& c,
                            const StageClass& stage) {
  StageStatics s;
  s.params = LocalParamsOf(m, st, c, stage.layers, layers.mtp(), stage.stage);
  s.te_dummy_wgrad_bytes = TeDummyWgradBytes(m, c, stage.layers, layers.mtp());
  return s;
}

StagePeak MostLoadedStage(const ModelSpec& m, const ModelLayers& layers,
                          const ModelStats& st, const ParallelConfig& c,
                          const std::vector<StageClass>& stages,
                          const std::vector<StageStatics>& statics, int64_t seq,
                          Precision precision, const PipelineSchedule& schedule,
                          bool flash_attention, const MemoryRecipe& recipe) {
  MESHTUNE_CHECK(statics.size() == stages.size());
  StagePeak best;
  bool first = true;
  for (size_t i = 0; i < stages.size(); ++i) {
    const StageClass& sc = stages[i];
    const MemoryBreakdown mem = StageMemoryOf(
        m, st, c, seq, precision, schedule, sc.stage, flash_attention, recipe,
        sc.layers, layers.mtp(), statics[i]);
    if (first || mem.allocated_bytes() > best.memory.allocated_bytes()) {
      best.stage = sc.stage;
      best.memory = mem;
      first = false;
    }
  }
  return best;
}

StagePeak MostLoadedStage(const ModelSpec& m, const ModelStats& st,
                          const ParallelConfig& c, int64_t seq,
                          Precision precision, const PipelineSchedule& schedule,
                          bool flash_attention, const MemoryRecipe& recipe) {
  const ModelLayers layers(m);
  const std::vector<StageClass> stages =
      DistinctStages(m, layers, PipelineLayout(m.num_layers, c), c);
  std::vector<StageStatics> statics;
  for (const StageClass& sc : stages) {
    statics.push_back(StageStaticsOf(m, layers, st, c, sc));
  }
  return MostLoadedStage(m, layers, st, c, stages, statics, seq, precision,
                         schedule, flash_attention, recipe);
}

void AddMemoryBesidesModel(const ParallelConfig& c, MemoryBreakdown* mem) {
  mem->fragmentation_bytes = kAllocatorFragmentation * mem->allocated_bytes();
  mem->cuda_context_bytes = kCudaContextBytes;
  // Communicators this rank uses: tp, cp, the dp·cp gradient group, pp
  // (p2p), ep, etp when it differs from tp, and the expert dp group.
  int64_t comms = 0;
  comms += c.tp > 1;
  comms += c.cp > 1;
  comms += c.dp * c.cp > 1;
  comms += c.pp > 1;
  comms += c.ep > 1;
  comms += c.expert_tp() != c.tp && c.expert_tp() > 1;
  comms += c.ep > 1 && ExpertDataParallelSize(c) > 1;
  mem->nccl_bytes = static_cast<double>(comms) * kNcclBytesPerCommunicator;
}

}  // namespace meshtune::costmodel
