#include "engine/transformer_layer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/context_parallel/ring_attention.h"
#include "engine/context_parallel/sequence_chunks.h"
#include "engine/cpu/moe_router.h"
#include "engine/cpu/ops.h"
#include "engine/param_init.h"
#include "search_spaces/status.h"

namespace meshtune::engine {

using search_spaces::Activation;
using search_spaces::Normalization;
using search_spaces::PositionEmbedding;

namespace {

// y[n, h] = a + b elementwise.
void AddInto(const float* a, const float* b, float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) y[i] = a[i] + b[i];
}

// The sequence chunks of this layer's rank (the whole sequence when cp == 1).
context_parallel::SequenceChunks ChunksOf(const LayerShape& sh,
                                          const Communicator* cp) {
  return context_parallel::SequenceChunks(sh.s * sh.cp, sh.cp,
                                          sh.cp > 1 ? cp->rank() : 0);
}

// dbias[h] += Σ_rows d[rows, h] in float64, fixed row order.
void AccumulateBiasGrad(const float* d, float* dbias, int64_t rows, int64_t h) {
  std::vector<double> acc(h, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < h; ++j) acc[j] += d[r * h + j];
  }
  for (int64_t j = 0; j < h; ++j) dbias[j] += static_cast<float>(acc[j]);
}

// The MoE tensors of one layer (names in transformer_layer.h). Expert
// tensors are split over etp with the column/row-parallel rules, so the
// ParamInfo's tp fields hold the etp rank and size.
void AddMoeParams(ParamStore& store, const TrainConfig& config,
                  const std::string& prefix, int tp_rank, int ep_rank,
                  int etp_rank, LayerParams* p) {
  const auto& m = config.model;
  const auto& par = config.parallel;
  const int tp = static_cast<int>(par.tp);
  const int etp = static_cast<int>(par.expert_tp());
  const int64_t h = m.hidden_size, f = m.expert_ffn_hidden_size();
  const int64_t shared = m.moe_shared_expert_intermediate_size;
  const int64_t g = m.activation == Activation::kSwiglu ? 2 : 1;
  auto add = [&](const std::string& name, std::vector<int64_t> shape,
                 TpSplit split, int64_t part, int rank, int size, bool expert) {
    ParamInfo info;
    info.name = prefix + name;
    info.global_shape = std::move(shape);
    info.split = split;
    if (split == TpSplit::kColumn) info.parts.assign(g, part);
    info.tp_rank = rank;
    info.tp_size = size;
    info.expert = expert;
    return store.Add(std::move(info));
  };
  p->moe = true;
  {
    // Replicated over tp; under SP each rank routes its own sequence shard,
    // so its gradient is a partial sum over tp (counted once in the norm).
    ParamInfo info;
    info.name = prefix + "mlp.router.weight";
    info.global_shape = {m.num_experts, h};
    info.tp_rank = tp_rank;
    info.tp_size = tp;
    info.sequence_parallel = par.sp && tp > 1;
    info.counts_in_norm = tp_rank == 0;
    p->router = store.Add(std::move(info));
  }
  if (m.moe_router_enable_expert_bias) {
    // Every rank routes with the whole bias; no gradient, no decay, not in
    // the norm: only UpdateExpertBias changes it.
    ParamInfo info;
    info.name = prefix + "mlp.router.expert_bias";
    info.global_shape = {m.num_experts};
    info.tp_rank = tp_rank;
    info.tp_size = tp;
    info.weight_decay = false;
    info.counts_in_norm = false;
    p->expert_bias = store.Add(std::move(info));
  }
  const int64_t local = m.num_experts / par.ep;
  for (int64_t le = 0; le < local; ++le) {
    const std::string e = std::to_string(ep_rank * local + le);
    p->expert_fc1.push_back(add("mlp.experts.linear_fc1.weight" + e, {f * g, h},
                                TpSplit::kColumn, f, etp_rank, etp, true));
    p->expert_fc2.push_back(add("mlp.experts.linear_fc2.weight" + e, {h, f},
                                TpSplit::kRow, 0, etp_rank, etp, true));
  }
  if (shared > 0) {
    p->shared_fc1 = add("mlp.shared_experts.linear_fc1.weight", {shared * g, h},
                        TpSplit::kColumn, shared, tp_rank, tp, false);
    p->shared_fc2 = add("mlp.shared_experts.linear_fc2.weight", {h, shared},
                        TpSplit::kRow, 0, tp_rank, tp, false);
  }
}

}  // namespace

LayerShape MakeLayerShape(const TrainConfig& config) {
  const auto& m = config.model;
  const int tp = static_cast<int>(config.parallel.tp);
  const int cp = static_cast<int>(config.parallel.cp);
  LayerShape sh;
  sh.s = config.seq() / cp;  // this rank's two chunks under cp
  sh.b = config.parallel.mbs;
  sh.h = m.hidden_size;
  sh.head_dim =
      m.kv_channels > 0 ? m.kv_channels : m.hidden_size / m.num_attention_heads;
  sh.heads = m.num_attention_heads / tp;
  sh.groups = m.num_query_groups / tp;
  sh.ffn = m.ffn_hidden_size / tp;
  sh.swiglu = m.activation == Activation::kSwiglu;
  sh.rmsnorm = m.normalization == Normalization::kRMSNorm;
  sh.rope = m.position_embedding_type == PositionEmbedding::kRope;
  // Megatron --add-bias-linear is on for GPT recipes and off for LLaMA
  // (--disable-bias-linear); we follow the family (GELU = GPT).
  sh.bias = m.activation == Activation::kGelu;
  sh.eps = config.norm_epsilon;
  sh.rope_base = config.rotary_base;
  sh.tp = tp;
  sh.sp = config.parallel.sp && tp > 1;
  sh.cp = cp;
  sh.hidden_dropout = config.hidden_dropout;
  sh.attention_dropout = config.attention_dropout;
  sh.seed = config.seed;
  return sh;
}

moe::MoeShape MakeMoeShape(const TrainConfig& config) {
  const auto& m = config.model;
  const auto& par = config.parallel;
  moe::MoeShape sh;
  sh.n = config.seq() / par.cp * par.mbs;
  sh.sp = par.sp && par.tp > 1;
  sh.nl = sh.sp ? sh.n / par.tp : sh.n;
  sh.hidden = m.hidden_size;
  sh.expert_ffn = m.expert_ffn_hidden_size() / par.expert_tp();
  sh.shared_ffn = m.moe_shared_expert_intermediate_size / par.tp;
  sh.swiglu = m.activation == Activation::kSwiglu;
  sh.router.num_experts = m.num_experts;
  sh.router.topk = m.moe_router_topk;
  sh.router.score = m.moe_router_score_function;
  sh.router.pre_softmax = m.moe_router_pre_softmax;
  sh.router.num_groups = m.moe_router_num_groups;
  sh.router.group_topk = m.moe_router_group_topk;
  sh.capacity_factor = m.moe_expert_capacity_factor;
  sh.aux_loss_coeff = config.moe_aux_loss_on() ? config.moe_aux_loss_coeff : 0;
  // Megatron's sequence aux loss: one group per sequence of the micro-batch.
  sh.aux_groups = config.moe_router_load_balancing_type ==
                          TrainConfig::LoadBalancing::kSeqAuxLoss
                      ? par.mbs
                      : 1;
  sh.aux_grad_scale = static_cast<double>(par.cp) /
                      static_cast<double>(config.num_microbatches());
  return sh;
}

LayerParams AddLayerParams(ParamStore& store, const TrainConfig& config,
                           int64_t global_layer, int tp_rank, int ep_rank,
                           int etp_rank) {
  const LayerShape sh = MakeLayerShape(config);
  const auto& m = config.model;
  const int tp = sh.tp;
  const int64_t h = sh.h, d = sh.head_dim;
  const int64_t q = m.num_attention_heads * d, kv = m.num_query_groups * d;
  const int64_t f = m.ffn_hidden_size;
  const std::string prefix =
      "decoder.layers." + std::to_string(global_layer) + ".";
  auto add = [&](const std::string& name, std::vector<int64_t> shape,
                 TpSplit split, std::vector<int64_t> parts, bool decay) {
    ParamInfo info;
    info.name = prefix + name;
    info.global_shape = std::move(shape);
    info.split = split;
    info.parts = std::move(parts);
    info.tp_rank = tp_rank;
    info.tp_size = tp;
    info.weight_decay = decay;
    if (split == TpSplit::kReplicated) {
      // Identical on every tp rank: counted once in the gradient norm; its
      // gradient differs per rank only under SP (sharded rows).
      info.sequence_parallel = sh.sp;
      info.counts_in_norm = tp_rank == 0;
    }
    return store.Add(std::move(info));
  };
  const std::vector<int64_t> qkv_parts = {q, kv, kv};
  const std::vector<int64_t> fc1_parts =
      sh.swiglu ? std::vector<int64_t>{f, f} : std::vector<int64_t>{f};
  LayerParams p;
  p.ln1_w = add("input_layernorm.weight", {h}, TpSplit::kReplicated, {}, false);
  if (!sh.rmsnorm) {
    p.ln1_b = add("input_layernorm.bias", {h}, TpSplit::kReplicated, {}, false);
  }
  p.qkv_w = add("self_attention.linear_qkv.weight", {q + 2 * kv, h},
                TpSplit::kColumn, qkv_parts, true);
  if (sh.bias) {
    p.qkv_b = add("self_attention.linear_qkv.bias", {q + 2 * kv},
                  TpSplit::kColumn, qkv_parts, false);
  }
  p.proj_w =
      add("self_attention.linear_proj.weight", {h, q}, TpSplit::kRow, {}, true);
  if (sh.bias) {
    p.proj_b = add("self_attention.linear_proj.bias", {h}, TpSplit::kReplicated,
                   {}, false);
  }
  p.ln2_w =
      add("pre_mlp_layernorm.weight", {h}, TpSplit::kReplicated, {}, false);
  if (!sh.rmsnorm) {
    p.ln2_b =
        add("pre_mlp_layernorm.bias", {h}, TpSplit::kReplicated, {}, false);
  }
  if (m.IsMoeLayer(global_layer)) {
    AddMoeParams(store, config, prefix, tp_rank, ep_rank, etp_rank, &p);
    return p;
  }
  p.fc1_w = add("mlp.linear_fc1.weight", {f * (sh.swiglu ? 2 : 1), h},
                TpSplit::kColumn, fc1_parts, true);
  if (sh.bias) {
    p.fc1_b = add("mlp.linear_fc1.bias", {f * (sh.swiglu ? 2 : 1)},
                  TpSplit::kColumn, fc1_parts, false);
  }
  p.fc2_w = add("mlp.linear_fc2.weight", {h, f}, TpSplit::kRow, {}, true);
  if (sh.bias) {
    p.fc2_b = add("mlp.linear_fc2.bias", {h}, TpSplit::kReplicated, {}, false);
  }
  return p;
}

void InitLayerParams(ParamStore& store, const LayerParams& p,
                     const TrainConfig& config) {
  const float std = config.init_method_std;
  // Megatron scaled_init_method_normal: σ/√(2·num_layers) for the two
  // output projections feeding the residual stream.
  const float out_std =
      std / std::sqrt(2.0f * static_cast<float>(config.model.num_layers));
  const uint64_t seed = config.seed;
  auto init = [&](int idx, InitKind kind, float s) {
    if (idx >= 0) InitParam(store, idx, kind, s, seed);
  };
  init(p.ln1_w, InitKind::kOnes, 0);
  init(p.ln1_b, InitKind::kZeros, 0);
  init(p.qkv_w, InitKind::kNormal, std);
  init(p.qkv_b, InitKind::kZeros, 0);
  init(p.proj_w, InitKind::kNormal, out_std);
  init(p.proj_b, InitKind::kZeros, 0);
  init(p.ln2_w, InitKind::kOnes, 0);
  init(p.ln2_b, InitKind::kZeros, 0);
  init(p.fc1_w, InitKind::kNormal, std);
  init(p.fc1_b, InitKind::kZeros, 0);
  init(p.fc2_w, InitKind::kNormal, out_std);
  init(p.fc2_b, InitKind::kZeros, 0);
  init(p.router, InitKind::kNormal, std);
  init(p.expert_bias, InitKind::kZeros, 0);
  for (int i : p.expert_fc1) init(i, InitKind::kNormal, std);
  for (int i : p.expert_fc2) init(i, InitKind::kNormal, out_std);
  init(p.shared_fc1, InitKind::kNormal, std);
  init(p.shared_fc2, InitKind::kNormal, out_std);
}

TransformerLayer::TransformerLayer(const LayerShape& shape,
                                   const LayerParams& params, ParamStore* store,
                                   Communicator* tp, bool selective,
                                   int64_t global_layer, Communicator* cp,
                                   std::unique_ptr<moe::MoeBlock> moe)
    : sh_(shape),
      p_(params),
      store_(store),
      tp_(tp),
      selective_(selective),
      global_layer_(global_layer),
      cp_(cp),
      moe_(std::move(moe)) {
  MESHTUNE_CHECK(sh_.cp == 1 || (cp_ != nullptr && cp_->size() == sh_.cp));
  MESHTUNE_CHECK(p_.moe == (moe_ != nullptr));
}

void TransformerLayer::UpdateExpertBias(
    const std::vector<Communicator*>& sum_over, float rate) {
  if (p_.expert_bias < 0) return;
  const int64_t e = store_->info(p_.expert_bias).numel;
  routed_tokens_.resize(e, 0.0);  // a rank may have run no backward yet
  for (Communicator* comm : sum_over) {
    if (comm != nullptr && comm->size() > 1) {
      comm->AllReduceSum(routed_tokens_.data(), e);
    }
  }
  cpu::UpdateExpertBias(routed_tokens_.data(), e, rate,
                        store_->param(p_.expert_bias));
  std::fill(routed_tokens_.begin(), routed_tokens_.end(), 0.0);
}

moe::MoeWeights MoeWeightsOf(const ParamStore& store, const LayerParams& p) {
  moe::MoeWeights w;
  w.router = store.param(p.router);
  if (p.expert_bias >= 0) w.expert_bias = store.param(p.expert_bias);
  for (int i : p.expert_fc1) w.fc1.push_back(store.param(i));
  for (int i : p.expert_fc2) w.fc2.push_back(store.param(i));
  if (p.shared_fc1 >= 0) {
    w.shared_fc1 = store.param(p.shared_fc1);
    w.shared_fc2 = store.param(p.shared_fc2);
  }
  return w;
}

moe::MoeGrads TransformerLayer::MoeGradsOf() {
  moe::MoeGrads g;
  g.router = store_->grad(p_.router);
  for (int i : p_.expert_fc1) g.fc1.push_back(store_->grad(i));
  for (int i : p_.expert_fc2) g.fc2.push_back(store_->grad(i));
  if (p_.shared_fc1 >= 0) {
    g.shared_fc1 = store_->grad(p_.shared_fc1);
    g.shared_fc2 = store_->grad(p_.shared_fc2);
  }
  return g;
}

void TransformerLayer::HiddenDropout(float* x, cpu::DropoutSite site,
                                     int64_t first_sample) const {
  if (sh_.hidden_dropout <= 0.0f) return;
  cpu::DropoutSpec d;
  d.p = sh_.hidden_dropout;
  d.key = cpu::DropoutKey(sh_.seed, global_layer_, site);
  d.first_sample = first_sample;
  // Under SP this rank holds rows [tp_rank·nl, (tp_rank + 1)·nl).
  d.first_row = sh_.sp ? tp_->rank() * sh_.local_rows() : 0;
  if (sh_.cp == 1) {
    cpu::HiddenDropout(x, sh_.local_rows(), sh_.h, sh_.b, d);
    return;
  }
  // Context parallelism: the rows are this rank's positions of its two
  // chunks; each run of consecutive global positions draws the masks of
  // its global rows, so every cp layout drops what one rank drops.
  const int64_t first_pos = d.first_row / sh_.b;
  for (const context_parallel::PositionRun& run :
       ChunksOf(sh_, cp_).Runs(first_pos, sh_.local_rows() / sh_.b)) {
    cpu::DropoutSpec part = d;
    part.first_row = run.global_pos0 * sh_.b;
    cpu::HiddenDropout(x + (run.local_pos0 - first_pos) * sh_.b * sh_.h,
                       run.len * sh_.b, sh_.h, sh_.b, part);
  }
}

const float* TransformerLayer::DropoutGrad(const float* d,
                                           cpu::DropoutSite site,
                                           int64_t first_sample,
                                           std::vector<float>* scratch) const {
  if (sh_.hidden_dropout <= 0.0f) return d;  // no copy without dropout
  scratch->assign(d, d + sh_.local_rows() * sh_.h);
  HiddenDropout(scratch->data(), site, first_sample);
  return scratch->data();
}

cpu::DropoutSpec TransformerLayer::AttentionDropout(
    int64_t first_sample) const {
  cpu::DropoutSpec d;
  d.p = sh_.attention_dropout;
  d.key = cpu::DropoutKey(sh_.seed, global_layer_,
                          cpu::DropoutSite::kAttentionProbs);
  d.first_sample = first_sample;
  d.first_head = static_cast<int64_t>(tp_->rank()) * sh_.heads;
  return d;
}

void TransformerLayer::Rope(float* qkv, bool forward) const {
  auto rotate = forward ? cpu::RopeForward : cpu::RopeBackward;
  if (sh_.cp == 1) {
    rotate(qkv, sh_.s, sh_.b, sh_.heads, sh_.groups, sh_.head_dim,
           sh_.rope_base, 0);
    return;
  }
  // The rows [n] are the rank's chunks; each rotates by its global
  // positions (Megatron-Core passes the cp rank's position ids to RoPE,
  // rope_utils.py get_pos_emb_on_this_cp_rank).
  const int64_t qw = sh_.qkv_width();
  for (const context_parallel::PositionRun& run :
       ChunksOf(sh_, cp_).Runs(0, sh_.s)) {
    rotate(qkv + run.local_pos0 * sh_.b * qw, run.len, sh_.b, sh_.heads,
           sh_.groups, sh_.head_dim, sh_.rope_base, run.global_pos0);
  }
}

void TransformerLayer::RingForward(LayerCache* c,
                                   const cpu::DropoutSpec& drop) {
  const context_parallel::SequenceChunks chunks = ChunksOf(sh_, cp_);
  const cpu::AttentionChunkShape shape{sh_.b, sh_.heads, sh_.groups,
                                       sh_.head_dim};
  c->lse.resize(context_parallel::RingLseCount(chunks, shape));
  context_parallel::RingAttentionForward(c->qkv.data(), chunks, shape, cp_,
                                         c->attn.data(), c->lse.data(), &drop);
}

void TransformerLayer::RingBackward(const float* dattn, LayerCache* c,
                                    const cpu::DropoutSpec& drop, float* dqkv) {
  const context_parallel::SequenceChunks chunks = ChunksOf(sh_, cp_);
  const cpu::AttentionChunkShape shape{sh_.b, sh_.heads, sh_.groups,
                                       sh_.head_dim};
  if (selective_) {
    // Selective recompute: only qkv was kept; rerun the ring forward for
    // the log-sum-exp (Megatron checkpoints core attention, so its
    // recompute repeats TE's CP forward, ring included). Deterministic, so
    // the output equals c->attn.
    std::vector<float> out(c->attn.size());  // [n, heads·d]
    c->lse.resize(context_parallel::RingLseCount(chunks, shape));
    context_parallel::RingAttentionForward(c->qkv.data(), chunks, shape, cp_,
                                           out.data(), c->lse.data(), &drop);
  }
  context_parallel::RingAttentionBackward(dattn, c->qkv.data(), c->attn.data(),
                                          c->lse.data(), chunks, shape, cp_,
                                          dqkv, &drop);
}

void TransformerLayer::Norm(const float* x, int w, int b, float* out,
                            float* mean, float* rstd) const {
  const int64_t nl = sh_.local_rows();
  if (sh_.rmsnorm) {
    cpu::RmsNormForward(x, store_->param(w), out, rstd, nl, sh_.h, sh_.eps);
  } else {
    cpu::LayerNormForward(x, store_->param(w), store_->param(b), out, mean,
                          rstd, nl, sh_.h, sh_.eps);
  }
}

void TransformerLayer::NormBackward(const float* dout, const float* x, int w,
                                    int b, const float* mean, const float* rstd,
                                    float* dx) {
  const int64_t nl = sh_.local_rows();
  if (sh_.rmsnorm) {
    cpu::RmsNormBackward(dout, x, store_->param(w), rstd, dx, store_->grad(w),
                         nl, sh_.h);
  } else {
    cpu::LayerNormBackward(dout, x, store_->param(w), mean, rstd, dx,
                           store_->grad(w), store_->grad(b), nl, sh_.h);
  }
}

const float* TransformerLayer::GatherSequence(const float* in,
                                              std::vector<float>* out) {
  if (!sh_.sp) return in;  // already the full [n, h]
  // Rows are sequence-major, so rank r's shard is rows [r·nl, (r+1)·nl)
  // and a rank-major all-gather reassembles [n, h].
  const int64_t nl = sh_.local_rows(), h = sh_.h;
  out->resize(sh_.rows() * h);
  tp_->AllGather(in, out->data(), nl * h);
  return out->data();
}

void TransformerLayer::ReduceOverTp(std::vector<float>* partial,
                                    std::vector<float>* out) {
  const int64_t nl = sh_.local_rows(), h = sh_.h;
  out->resize(nl * h);
  if (sh_.sp) {
    tp_->ReduceScatterSum(partial->data(), out->data(), nl * h);
  } else {
    if (sh_.tp > 1) tp_->AllReduceSum(partial->data(), nl * h);
    out->swap(*partial);
  }
}

void TransformerLayer::ReduceRowParallel(std::vector<float>* partial, int bias,
                                         std::vector<float>* out) {
  ReduceOverTp(partial, out);
  if (bias >= 0) {
    const int64_t nl = sh_.local_rows(), h = sh_.h;
    const float* bv = store_->param(bias);
    for (int64_t r = 0; r < nl; ++r) {
      for (int64_t j = 0; j < h; ++j) (*out)[r * h + j] += bv[j];
    }
  }
}

void TransformerLayer::DenseMlpForward(LayerCache* c,
                                       std::vector<float>* partial,
                                       std::vector<float>* mlp_out) {
  const int64_t n = sh_.rows(), h = sh_.h;
  auto P = [&](int i) -> const float* {
    return i >= 0 ? store_->param(i) : nullptr;
  };
  std::vector<float> gathered;  // [n, h] under SP
  const float* ln2_full = GatherSequence(c->ln2.data(), &gathered);
  const int64_t fw = sh_.fc1_width();
  c->fc1.resize(n * fw);
  cpu::LinearForward(ln2_full, P(p_.fc1_w), P(p_.fc1_b), c->fc1.data(), n, h,
                     fw);
  c->act.resize(n * sh_.ffn);
  if (sh_.swiglu) {
    cpu::SwigluForward(c->fc1.data(), c->act.data(), n, sh_.ffn);
  } else {
    cpu::GeluForward(c->fc1.data(), c->act.data(), n * sh_.ffn);
  }
  partial->assign(n * h, 0.0f);
  cpu::LinearForward(c->act.data(), P(p_.fc2_w), nullptr, partial->data(), n,
                     sh_.ffn, h);
  ReduceRowParallel(partial, p_.fc2_b, mlp_out);
}

void TransformerLayer::DenseMlpBackward(const float* dmlp, LayerCache* c,
                                        std::vector<float>* dln2) {
  const int64_t n = sh_.rows(), nl = sh_.local_rows(), h = sh_.h;
  const int64_t fw = sh_.fc1_width();
  auto G = [&](int i) -> float* { return i >= 0 ? store_->grad(i) : nullptr; };
  if (p_.fc2_b >= 0) AccumulateBiasGrad(dmlp, G(p_.fc2_b), nl, h);
  std::vector<float> gathered;  // [n, h] under SP
  // Backward of the reduce-scatter is an all-gather.
  const float* dfull = GatherSequence(dmlp, &gathered);
  std::vector<float> dact(n * sh_.ffn);
  cpu::LinearBackward(dfull, c->act.data(), store_->param(p_.fc2_w),
                      dact.data(), G(p_.fc2_w), nullptr, n, sh_.ffn, h);
  std::vector<float> dfc1(n * fw);
  if (sh_.swiglu) {
    cpu::SwigluBackward(dact.data(), c->fc1.data(), dfc1.data(), n, sh_.ffn);
  } else {
    cpu::GeluBackward(dact.data(), c->fc1.data(), dfc1.data(), n * sh_.ffn);
  }
  // Re-gathered input of fc1 (Megatron keeps only the shard under SP).
  const float* ln2_full = GatherSequence(c->ln2.data(), &gathered);
  std::vector<float> dln2_full(n * h);
  cpu::LinearBackward(dfc1.data(), ln2_full, store_->param(p_.fc1_w),
                      dln2_full.data(), G(p_.fc1_w), G(p_.fc1_b), n, h, fw);
  ReduceOverTp(&dln2_full, dln2);
}

void TransformerLayer::Forward(const float* x, float* y, LayerCache* c,
                               int64_t first_sample) {
  const int64_t n = sh_.rows(), nl = sh_.local_rows(), h = sh_.h;
  const int64_t d = sh_.head_dim, qw = sh_.qkv_width();
  const int64_t aw = sh_.heads * d;
  auto P = [&](int i) -> const float* {
    return i >= 0 ? store_->param(i) : nullptr;
  };

  // Attention block.
  c->first_sample = first_sample;
  const cpu::DropoutSpec attn_drop = AttentionDropout(first_sample);
  c->x.assign(x, x + nl * h);
  c->ln1.resize(nl * h);
  c->ln1_mean.resize(nl);
  c->ln1_rstd.resize(nl);
  Norm(x, p_.ln1_w, p_.ln1_b, c->ln1.data(), c->ln1_mean.data(),
       c->ln1_rstd.data());
  std::vector<float> gathered;  // [n, h] under SP
  const float* ln1_full = GatherSequence(c->ln1.data(), &gathered);
  c->qkv.resize(n * qw);
  cpu::LinearForward(ln1_full, P(p_.qkv_w), P(p_.qkv_b), c->qkv.data(), n, h,
                     qw);
  if (sh_.rope) Rope(c->qkv.data(), /*forward=*/true);
  c->attn.resize(n * aw);
  if (sh_.cp > 1) {
    RingForward(c, attn_drop);
    if (selective_) c->lse.clear();  // the backward reruns the ring
  } else {
    if (!selective_) c->probs.resize(sh_.b * sh_.heads * sh_.s * sh_.s);
    cpu::AttentionForward(c->qkv.data(), c->attn.data(),
                          selective_ ? nullptr : c->probs.data(), sh_.s, sh_.b,
                          sh_.heads, sh_.groups, d, &attn_drop);
  }
  std::vector<float> partial(n * h);  // [n, h] partial sums over tp
  cpu::LinearForward(c->attn.data(), P(p_.proj_w), nullptr, partial.data(), n,
                     aw, h);
  std::vector<float> attn_out;  // [nl, h]
  ReduceRowParallel(&partial, p_.proj_b, &attn_out);
  // Megatron bias-dropout-add: x2 = x + dropout(proj + bias).
  HiddenDropout(attn_out.data(), cpu::DropoutSite::kAttentionOut, first_sample);
  c->x2.resize(nl * h);
  AddInto(x, attn_out.data(), c->x2.data(), nl * h);

  // MLP block.
  c->ln2.resize(nl * h);
  c->ln2_mean.resize(nl);
  c->ln2_rstd.resize(nl);
  Norm(c->x2.data(), p_.ln2_w, p_.ln2_b, c->ln2.data(), c->ln2_mean.data(),
       c->ln2_rstd.data());
  std::vector<float> mlp_out;  // [nl, h]
  if (moe_) {
    mlp_out.resize(nl * h);
    moe_->Forward(c->ln2.data(), MoeWeightsOf(*store_, p_), mlp_out.data(),
                  &c->moe);
  } else {
    DenseMlpForward(c, &partial, &mlp_out);
  }
  HiddenDropout(mlp_out.data(), cpu::DropoutSite::kMlpOut, first_sample);
  AddInto(c->x2.data(), mlp_out.data(), y, nl * h);
}

void TransformerLayer::Backward(const float* dy, float* dx, LayerCache* c) {
  const int64_t n = sh_.rows(), nl = sh_.local_rows(), h = sh_.h;
  const int64_t d = sh_.head_dim, qw = sh_.qkv_width();
  const int64_t aw = sh_.heads * d;
  auto G = [&](int i) -> float* { return i >= 0 ? store_->grad(i) : nullptr; };

  // MLP block: y = x2 + dropout(RowParallel(act) + b2).
  const int64_t first_sample = c->first_sample;
  const cpu::DropoutSpec attn_drop = AttentionDropout(first_sample);
  std::vector<float> dropped;  // [nl, h] masked gradient (dropout only)
  // Gradient of RowParallel + b2.
  const float* dmlp =
      DropoutGrad(dy, cpu::DropoutSite::kMlpOut, first_sample, &dropped);
  std::vector<float> dln2;  // [nl, h]
  if (moe_) {
    if (p_.expert_bias >= 0) {
      const std::vector<int64_t>& routed = c->moe.permutation.tokens_per_expert;
      routed_tokens_.resize(routed.size(), 0.0);
      for (size_t i = 0; i < routed.size(); ++i) routed_tokens_[i] += routed[i];
    }
    dln2.resize(nl * h);
    moe_->Backward(dmlp, c->ln2.data(), MoeWeightsOf(*store_, p_), MoeGradsOf(),
                   dln2.data(), &c->moe);
  } else {
    DenseMlpBackward(dmlp, c, &dln2);
  }
  std::vector<float> dx2(nl * h);
  NormBackward(dln2.data(), c->x2.data(), p_.ln2_w, p_.ln2_b,
               c->ln2_mean.data(), c->ln2_rstd.data(), dx2.data());
  for (int64_t i = 0; i < nl * h; ++i) dx2[i] += dy[i];

  // Attention block: x2 = x + dropout(RowParallel(attn) + b_proj).
  // Gradient of RowParallel + b_proj.
  const float* dproj = DropoutGrad(dx2.data(), cpu::DropoutSite::kAttentionOut,
                                   first_sample, &dropped);
  if (p_.proj_b >= 0) AccumulateBiasGrad(dproj, G(p_.proj_b), nl, h);
  std::vector<float> gathered;  // [n, h] under SP
  const float* dfull = GatherSequence(dproj, &gathered);
  std::vector<float> dattn(n * aw);
  cpu::LinearBackward(dfull, c->attn.data(), store_->param(p_.proj_w),
                      dattn.data(), G(p_.proj_w), nullptr, n, aw, h);
  std::vector<float> dqkv(n * qw);
  if (sh_.cp > 1) {
    RingBackward(dattn.data(), c, attn_drop, dqkv.data());
  } else {
    if (selective_) {
      // Selective recompute (Korthikanti et al. 2022 §5): the s² attention
      // probabilities were not kept; rebuild them from the saved qkv.
      c->probs.resize(sh_.b * sh_.heads * sh_.s * sh_.s);
      std::vector<float> scratch(n * aw);
      cpu::AttentionForward(c->qkv.data(), scratch.data(), c->probs.data(),
                            sh_.s, sh_.b, sh_.heads, sh_.groups, d);
    }
    cpu::AttentionBackward(dattn.data(), c->qkv.data(), c->probs.data(),
                           dqkv.data(), sh_.s, sh_.b, sh_.heads, sh_.groups, d,
                           &attn_drop);
  }
  if (sh_.rope) Rope(dqkv.data(), /*forward=*/false);
  const float* ln1_full = GatherSequence(c->ln1.data(), &gathered);
  std::vector<float> dln1_full(n * h);
  cpu::LinearBackward(dqkv.data(), ln1_full, store_->param(p_.qkv_w),
                      dln1_full.data(), G(p_.qkv_w), G(p_.qkv_b), n, h, qw);
  std::vector<float> dln1;
  ReduceOverTp(&dln1_full, &dln1);
  NormBackward(dln1.data(), c->x.data(), p_.ln1_w, p_.ln1_b, c->ln1_mean.data(),
               c->ln1_rstd.data(), dx);
  for (int64_t i = 0; i < nl * h; ++i) dx[i] += dx2[i];
  c->Clear();
}

}  // namespace meshtune::engine
