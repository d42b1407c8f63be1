// The single-GPU decoder (engine/cuda/gpt_model.h). Forward per layer:
//   ln1 = Norm1(x); qkv = ln1·Wqkvᵀ + b; RoPE; attn = Attention(qkv)
//   proj = attn·Wprojᵀ + b; x2 = x + proj and ln2 = Norm2(x2) in one fused
//   pass; fc1 = ln2·W1ᵀ + b with GELU fused (or SwiGLU after it);
//   y = x2 + act·W2ᵀ + b.
// Backward mirrors it; Norm2's backward adds the residual gradient dy, and
// Norm1's adds dx2, so the residual adds cost no extra pass.
#include "engine/cuda/gpt_model.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "engine/cuda/ops.h"

namespace meshtune::engine::cuda {

using search_spaces::PositionEmbedding;
using search_spaces::RecomputeGranularity;

// One layer's saved activations (bf16 unless noted). Layers under full
// recompute share a pool of these: their activations exist only while
// their segment is recomputed in the backward.
struct CudaGptModel::Activations {
  DeviceBuffer mean1, rstd1, mean2, rstd2;  // fp32 [n]
  DeviceBuffer ln1;                         // [n, h]
  DeviceBuffer qkv;                         // [n, qkv_width], after RoPE
  // Unfused kernel: probabilities [b·heads, s, s] (empty under selective
  // recompute); flash kernel: fp32 log-sum-exp [b·heads, s] (always kept:
  // with flash, selective recompute saves nothing extra, as in Megatron).
  DeviceBuffer probs, lse;
  DeviceBuffer attn;     // [n, heads·d]
  DeviceBuffer x2, ln2;  // [n, h]
  DeviceBuffer fc1;      // [n, fc1_width] pre-activation
  DeviceBuffer act;      // [n, ffn]
};

// A layer's parameters, where its activations live and its recompute
// segment [seg_begin, seg_end) (one layer when not recomputed).
struct CudaGptModel::Layer {
  int64_t index = 0;  // global layer number (keys its dropout masks)
  LayerParams p;
  Activations* a = nullptr;
  bool recompute = false;
  int64_t seg_begin = 0, seg_end = 0;
};

CudaGptModel::~CudaGptModel() = default;

StatusOr<AttentionKernel> ParseAttentionKernel(const char* value) {
  if (value == nullptr || std::strcmp(value, "") == 0 ||
      std::strcmp(value, "flash") == 0) {
    return AttentionKernel::kFlash;
  }
  if (std::strcmp(value, "unfused") == 0) return AttentionKernel::kUnfused;
  return Status::InvalidArgument(std::string("MESHTUNE_CUDA_ATTENTION=") +
                                     value + " is not an attention kernel",
                                 "set it to flash or unfused, or unset it");
}

Status CudaGptModel::CheckSupported(const TrainConfig& config) {
  const auto& par = config.parallel;
  std::string missing;
  const int64_t model_parallel = par.tp * par.pp * par.cp;
  if (model_parallel != 1) {
    missing = "tp·pp·cp = " + std::to_string(model_parallel) +
              " (only data parallelism runs on GPUs so far)";
  } else if (par.dist_opt && par.dp > 1) {
    missing = "the distributed optimizer (use --no-dist-opt)";
  } else if (par.vpp != 1) {
    missing = "virtual pipeline stages";
  }
  if (missing.empty()) return Status::Ok();
  return Status::Unimplemented(
      "the CUDA backend does not support " + missing + " yet",
      "train this configuration with --backend cpu, or change it");
}

#define MESHTUNE_ASSIGN_BUFFER(target, expr)    \
  do {                                          \
    auto _buffer = (expr);                      \
    if (!_buffer.ok()) return _buffer.status(); \
    (target) = std::move(_buffer).value();      \
  } while (0)

StatusOr<std::unique_ptr<CudaGptModel::Activations>>
CudaGptModel::AllocActivations(bool keep_probs) {
  const LayerShape& sh = sh_;
  const size_t n = static_cast<size_t>(sh.rows()), h = sh.h;
  const size_t bf = sizeof(Bf16), f32 = sizeof(float);
  auto a = std::make_unique<Activations>();
  MESHTUNE_ASSIGN_BUFFER(a->mean1, DeviceBuffer::Allocate(n * f32));
  MESHTUNE_ASSIGN_BUFFER(a->rstd1, DeviceBuffer::Allocate(n * f32));
  MESHTUNE_ASSIGN_BUFFER(a->mean2, DeviceBuffer::Allocate(n * f32));
  MESHTUNE_ASSIGN_BUFFER(a->rstd2, DeviceBuffer::Allocate(n * f32));
  MESHTUNE_ASSIGN_BUFFER(a->ln1, DeviceBuffer::Allocate(n * h * bf));
  MESHTUNE_ASSIGN_BUFFER(a->qkv,
                         DeviceBuffer::Allocate(n * sh.qkv_width() * bf));
  if (flash_ != nullptr) {
    MESHTUNE_ASSIGN_BUFFER(
        a->lse, DeviceBuffer::Allocate(
                    static_cast<size_t>(flash_->lse_elements()) * f32));
  } else if (keep_probs) {
    MESHTUNE_ASSIGN_BUFFER(
        a->probs, DeviceBuffer::Allocate(
                      static_cast<size_t>(attention_->probs_elements()) * bf));
  }
  MESHTUNE_ASSIGN_BUFFER(
      a->attn, DeviceBuffer::Allocate(n * sh.heads * sh.head_dim * bf));
  MESHTUNE_ASSIGN_BUFFER(a->x2, DeviceBuffer::Allocate(n * h * bf));
  MESHTUNE_ASSIGN_BUFFER(a->ln2, DeviceBuffer::Allocate(n * h * bf));
  MESHTUNE_ASSIGN_BUFFER(a->fc1,
                         DeviceBuffer::Allocate(n * sh.fc1_width() * bf));
  MESHTUNE_ASSIGN_BUFFER(a->act, DeviceBuffer::Allocate(n * sh.ffn * bf));
  return StatusOr<std::unique_ptr<Activations>>(std::move(a));
}

StatusOr<std::unique_ptr<CudaGptModel>> CudaGptModel::Create(
    const TrainConfig& config, const ParamStore& store, DeviceParams* params) {
  MESHTUNE_RETURN_IF_ERROR(CheckSupported(config));
  std::unique_ptr<CudaGptModel> m(new CudaGptModel());
  m->config_ = config;
  m->store_ = &store;
  m->params_ = params;
  m->sh_ = MakeLayerShape(config);
  m->padded_vocab_ = config.padded_vocab_size();
  const LayerShape& sh = m->sh_;
  const auto& model = config.model;

  auto find = [&](const std::string& name, bool required) -> StatusOr<int> {
    const int i = store.Find(name);
    if (i < 0 && required) {
      return Status::Internal("CUDA model: parameter '" + name +
                              "' is not in the store");
    }
    return i;
  };
#define MESHTUNE_FIND(target, name, required) \
  do {                                        \
    auto _index = find((name), (required));   \
    if (!_index.ok()) return _index.status(); \
    (target) = _index.value();                \
  } while (0)
  MESHTUNE_FIND(m->word_emb_, "embedding.word_embeddings.weight", true);
  MESHTUNE_FIND(
      m->pos_emb_, "embedding.position_embeddings.weight",
      model.position_embedding_type == PositionEmbedding::kLearnedAbsolute);
  MESHTUNE_FIND(m->final_w_, "decoder.final_layernorm.weight", true);
  MESHTUNE_FIND(m->final_b_, "decoder.final_layernorm.bias", !sh.rmsnorm);
  m->output_ = m->word_emb_;
  if (model.untie_embeddings_and_output_weights) {
    MESHTUNE_FIND(m->output_, "output_layer.weight", true);
  }

  auto gemm = GemmContext::Create();
  if (!gemm.ok()) return gemm.status();
  m->gemm_ = std::move(gemm).value();
  // Read once here: the kernel stays fixed for the model's lifetime.
  auto kernel = ParseAttentionKernel(std::getenv("MESHTUNE_CUDA_ATTENTION"));
  if (!kernel.ok()) return kernel.status();
  if (kernel.value() == AttentionKernel::kFlash) {
    auto flash =
        FlashAttention::Create(sh.s, sh.b, sh.heads, sh.groups, sh.head_dim);
    if (!flash.ok()) return flash.status();
    m->flash_ = std::move(flash).value();
  } else {
    auto attention = Attention::Create(m->gemm_.get(), sh.s, sh.b, sh.heads,
                                       sh.groups, sh.head_dim);
    if (!attention.ok()) return attention.status();
    m->attention_ = std::move(attention).value();
  }

  const size_t n = static_cast<size_t>(sh.rows()), h = sh.h;
  const size_t bf = sizeof(Bf16), f32 = sizeof(float);
  const bool selective =
      config.parallel.recompute.granularity == RecomputeGranularity::kSelective;
  for (int64_t l = 0; l < model.num_layers; ++l) {
    auto layer = std::make_unique<Layer>();
    layer->index = l;
    const std::string prefix = "decoder.layers." + std::to_string(l) + ".";
    LayerParams& p = layer->p;
    MESHTUNE_FIND(p.ln1_w, prefix + "input_layernorm.weight", true);
    MESHTUNE_FIND(p.ln1_b, prefix + "input_layernorm.bias", !sh.rmsnorm);
    MESHTUNE_FIND(p.qkv_w, prefix + "self_attention.linear_qkv.weight", true);
    MESHTUNE_FIND(p.qkv_b, prefix + "self_attention.linear_qkv.bias", sh.bias);
    MESHTUNE_FIND(p.proj_w, prefix + "self_attention.linear_proj.weight", true);
    MESHTUNE_FIND(p.proj_b, prefix + "self_attention.linear_proj.bias",
                  sh.bias);
    MESHTUNE_FIND(p.ln2_w, prefix + "pre_mlp_layernorm.weight", true);
    MESHTUNE_FIND(p.ln2_b, prefix + "pre_mlp_layernorm.bias", !sh.rmsnorm);
    MESHTUNE_FIND(p.fc1_w, prefix + "mlp.linear_fc1.weight", true);
    MESHTUNE_FIND(p.fc1_b, prefix + "mlp.linear_fc1.bias", sh.bias);
    MESHTUNE_FIND(p.fc2_w, prefix + "mlp.linear_fc2.weight", true);
    MESHTUNE_FIND(p.fc2_b, prefix + "mlp.linear_fc2.bias", sh.bias);
    m->layers_.push_back(std::move(layer));
  }
  // Recompute segments, as the CPU model forms them (engine/gpt_model.cc):
  // uniform checkpoints groups of num_layers layers; block checkpoints the
  // first num_layers layers one by one and keeps the rest.
  const auto& rc = config.parallel.recompute;
  const int64_t count = model.num_layers;
  const bool full = rc.granularity == RecomputeGranularity::kFull;
  int64_t pool_size = 0;
  for (int64_t l = 0; l < count;) {
    int64_t end = l + 1;
    bool recompute = false;
    if (full && rc.method == search_spaces::RecomputeMethod::kUniform) {
      end = std::min(count, l + rc.num_layers);
      recompute = true;
    } else if (full) {
      recompute = l < rc.num_layers;
    }
    for (int64_t k = l; k < end; ++k) {
      Layer& L = *m->layers_[k];
      L.recompute = recompute;
      L.seg_begin = l;
      L.seg_end = end;
    }
    if (recompute) pool_size = std::max(pool_size, end - l);
    l = end;
  }
  // Activations: one set per kept layer, and a pool shared by the segments
  // under recompute (a segment's layers hold them only while it runs).
  for (int64_t k = 0; k < pool_size; ++k) {
    auto set = m->AllocActivations(!selective);
    if (!set.ok()) return set.status();
    m->activation_sets_.push_back(std::move(set).value());
  }
  for (auto& layer : m->layers_) {
    if (layer->recompute) {
      const int64_t slot = &layer - &m->layers_[layer->seg_begin];
      layer->a = m->activation_sets_[slot].get();
      continue;
    }
    auto set = m->AllocActivations(!selective);
    if (!set.ok()) return set.status();
    m->activation_sets_.push_back(std::move(set).value());
    layer->a = m->activation_sets_.back().get();
  }
#undef MESHTUNE_FIND
  m->x_.resize(model.num_layers + 1);
  for (DeviceBuffer& x : m->x_)
    MESHTUNE_ASSIGN_BUFFER(x, DeviceBuffer::Allocate(n * h * bf));
  MESHTUNE_ASSIGN_BUFFER(m->tokens_,
                         DeviceBuffer::Allocate(n * sizeof(int32_t)));
  MESHTUNE_ASSIGN_BUFFER(m->targets_,
                         DeviceBuffer::Allocate(n * sizeof(int32_t)));
  MESHTUNE_ASSIGN_BUFFER(m->final_out_, DeviceBuffer::Allocate(n * h * bf));
  MESHTUNE_ASSIGN_BUFFER(m->final_mean_, DeviceBuffer::Allocate(n * f32));
  MESHTUNE_ASSIGN_BUFFER(m->final_rstd_, DeviceBuffer::Allocate(n * f32));
  MESHTUNE_ASSIGN_BUFFER(m->logits_,
                         DeviceBuffer::Allocate(n * m->padded_vocab_ * bf));
  for (DeviceBuffer* b :
       {&m->row_max_, &m->sum_exp_, &m->target_logit_, &m->loss_, &m->scale_}) {
    MESHTUNE_ASSIGN_BUFFER(*b, DeviceBuffer::Allocate(n * f32));
  }
  MESHTUNE_ASSIGN_BUFFER(m->grad_a_, DeviceBuffer::Allocate(n * h * bf));
  MESHTUNE_ASSIGN_BUFFER(m->grad_b_, DeviceBuffer::Allocate(n * h * bf));
  if (selective && m->attention_ != nullptr) {
    const size_t probs = static_cast<size_t>(m->attention_->probs_elements());
    MESHTUNE_ASSIGN_BUFFER(m->probs_scratch_,
                           DeviceBuffer::Allocate(probs * bf));
    MESHTUNE_ASSIGN_BUFFER(
        m->attn_scratch_,
        DeviceBuffer::Allocate(n * sh.heads * sh.head_dim * bf));
  }
  MESHTUNE_ASSIGN_BUFFER(m->dqkv_,
                         DeviceBuffer::Allocate(n * sh.qkv_width() * bf));
  MESHTUNE_ASSIGN_BUFFER(
      m->dattn_, DeviceBuffer::Allocate(n * sh.heads * sh.head_dim * bf));
  MESHTUNE_ASSIGN_BUFFER(m->dfc1_,
                         DeviceBuffer::Allocate(n * sh.fc1_width() * bf));
  MESHTUNE_ASSIGN_BUFFER(m->dact_, DeviceBuffer::Allocate(n * sh.ffn * bf));
  MESHTUNE_ASSIGN_BUFFER(m->dln_, DeviceBuffer::Allocate(n * h * bf));
  MESHTUNE_ASSIGN_BUFFER(m->dx2_, DeviceBuffer::Allocate(n * h * bf));
  if (config.hidden_dropout > 0) {
    MESHTUNE_ASSIGN_BUFFER(m->drop_grad_, DeviceBuffer::Allocate(n * h * bf));
  }
  return StatusOr<std::unique_ptr<CudaGptModel>>(std::move(m));
}

#undef MESHTUNE_ASSIGN_BUFFER

cpu::DropoutSpec CudaGptModel::Hidden(int64_t layer,
                                      cpu::DropoutSite site) const {
  cpu::DropoutSpec d;
  d.p = config_.hidden_dropout;
  d.key = cpu::DropoutKey(config_.seed, layer, site);
  d.first_sample = first_sample_;
  return d;  // one GPU: no sequence or head offsets
}

cpu::DropoutSpec CudaGptModel::AttentionDrop(int64_t layer) const {
  cpu::DropoutSpec d;
  d.p = config_.attention_dropout;
  d.key =
      cpu::DropoutKey(config_.seed, layer, cpu::DropoutSite::kAttentionProbs);
  d.first_sample = first_sample_;
  return d;
}

StatusOr<const Bf16*> CudaGptModel::DropGrad(const Bf16* d, int64_t layer,
                                             cpu::DropoutSite site,
                                             DeviceBuffer& scratch) {
  const cpu::DropoutSpec spec = Hidden(layer, site);
  if (!spec.active()) return d;
  const int64_t n = sh_.rows(), h = sh_.h;
  MESHTUNE_RETURN_IF_ERROR(
      CopyDeviceToDevice(scratch.data(), d, sizeof(Bf16) * n * h, nullptr));
  MESHTUNE_RETURN_IF_ERROR(
      HiddenDropout(scratch.as<Bf16>(), n, h, sh_.b, spec, nullptr));
  return static_cast<const Bf16*>(scratch.as<Bf16>());
}

Status CudaGptModel::LayerForward(Layer& L, const Bf16* x, Bf16* y) {
  const LayerShape& sh = sh_;
  const ParamStore& st = *store_;
  const int64_t n = sh.rows(), h = sh.h, hd = sh.heads * sh.head_dim;
  const LayerParams& p = L.p;
  auto w = [&](int i) { return i >= 0 ? params_->weight(st, i) : nullptr; };
  // ln1 = Norm1(x)
  if (sh.rmsnorm) {
    MESHTUNE_RETURN_IF_ERROR(
        RmsNormForward(x, nullptr, nullptr, w(p.ln1_w), L.a->ln1.as<Bf16>(),
                       L.a->rstd1.as<float>(), n, h, sh.eps, nullptr));
  } else {
    MESHTUNE_RETURN_IF_ERROR(LayerNormForward(
        x, nullptr, nullptr, w(p.ln1_w), w(p.ln1_b), L.a->ln1.as<Bf16>(),
        L.a->mean1.as<float>(), L.a->rstd1.as<float>(), n, h, sh.eps, nullptr));
  }
  // qkv, RoPE, core attention, projection.
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearForward(L.a->ln1.as<Bf16>(), w(p.qkv_w),
                                                w(p.qkv_b), L.a->qkv.as<Bf16>(),
                                                n, h, sh.qkv_width(), nullptr));
  if (sh.rope) {
    MESHTUNE_RETURN_IF_ERROR(RopeForward(L.a->qkv.as<Bf16>(), sh.s, sh.b,
                                         sh.heads, sh.groups, sh.head_dim,
                                         sh.rope_base, 0, nullptr));
  }
  const cpu::DropoutSpec attention_dropout = AttentionDrop(L.index);
  if (flash_ != nullptr) {
    MESHTUNE_RETURN_IF_ERROR(
        flash_->Forward(L.a->qkv.as<Bf16>(), L.a->attn.as<Bf16>(),
                        L.a->lse.as<float>(), nullptr, &attention_dropout));
  } else {
    Bf16* probs = L.a->probs.size_bytes() > 0 ? L.a->probs.as<Bf16>()
                                              : probs_scratch_.as<Bf16>();
    MESHTUNE_RETURN_IF_ERROR(attention_->Forward(L.a->qkv.as<Bf16>(),
                                                 L.a->attn.as<Bf16>(), probs,
                                                 nullptr, &attention_dropout));
  }
  Bf16* proj = dln_.as<Bf16>();  // [n, h] scratch: free during forward
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearForward(
      L.a->attn.as<Bf16>(), w(p.proj_w), w(p.proj_b), proj, n, hd, h, nullptr));
  // Megatron's bias-dropout-add: dropout(proj + bias), then the residual.
  MESHTUNE_RETURN_IF_ERROR(
      HiddenDropout(proj, n, h, sh.b,
                    Hidden(L.index, cpu::DropoutSite::kAttentionOut), nullptr));
  // x2 = x + proj and ln2 = Norm2(x2), fused.
  if (sh.rmsnorm) {
    MESHTUNE_RETURN_IF_ERROR(RmsNormForward(
        proj, x, L.a->x2.as<Bf16>(), w(p.ln2_w), L.a->ln2.as<Bf16>(),
        L.a->rstd2.as<float>(), n, h, sh.eps, nullptr));
  } else {
    MESHTUNE_RETURN_IF_ERROR(
        LayerNormForward(proj, x, L.a->x2.as<Bf16>(), w(p.ln2_w), w(p.ln2_b),
                         L.a->ln2.as<Bf16>(), L.a->mean2.as<float>(),
                         L.a->rstd2.as<float>(), n, h, sh.eps, nullptr));
  }
  // MLP.
  if (sh.swiglu) {
    MESHTUNE_RETURN_IF_ERROR(gemm_->LinearForward(
        L.a->ln2.as<Bf16>(), w(p.fc1_w), w(p.fc1_b), L.a->fc1.as<Bf16>(), n, h,
        sh.fc1_width(), nullptr));
    MESHTUNE_RETURN_IF_ERROR(SwigluForward(
        L.a->fc1.as<Bf16>(), L.a->act.as<Bf16>(), n, sh.ffn, nullptr));
  } else {
    MESHTUNE_RETURN_IF_ERROR(gemm_->LinearGeluForward(
        L.a->ln2.as<Bf16>(), w(p.fc1_w), w(p.fc1_b), L.a->fc1.as<Bf16>(),
        L.a->act.as<Bf16>(), n, h, sh.ffn, nullptr));
  }
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearForward(
      L.a->act.as<Bf16>(), w(p.fc2_w), w(p.fc2_b), y, n, sh.ffn, h, nullptr));
  // y = x2 + dropout(fc2)
  MESHTUNE_RETURN_IF_ERROR(HiddenDropout(
      y, n, h, sh.b, Hidden(L.index, cpu::DropoutSite::kMlpOut), nullptr));
  return Add(L.a->x2.as<Bf16>(), y, n * h, nullptr);
}

Status CudaGptModel::LayerBackward(Layer& L, const Bf16* x, const Bf16* dy,
                                   Bf16* dx) {
  const LayerShape& sh = sh_;
  const ParamStore& st = *store_;
  const int64_t n = sh.rows(), h = sh.h, hd = sh.heads * sh.head_dim;
  const LayerParams& p = L.p;
  auto w = [&](int i) { return i >= 0 ? params_->weight(st, i) : nullptr; };
  auto g = [&](int i) { return i >= 0 ? params_->grad(st, i) : nullptr; };
  // MLP: dact = D(dy)·W2; dfc1 = act'(fc1)·dact; dln2 = dfc1·W1.
  StatusOr<const Bf16*> dmlp =
      DropGrad(dy, L.index, cpu::DropoutSite::kMlpOut, drop_grad_);
  if (!dmlp.ok()) return dmlp.status();
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearBackward(
      dmlp.value(), L.a->act.as<Bf16>(), w(p.fc2_w), dact_.as<Bf16>(),
      g(p.fc2_w), g(p.fc2_b), n, sh.ffn, h, nullptr));
  if (sh.swiglu) {
    MESHTUNE_RETURN_IF_ERROR(
        SwigluBackward(dact_.as<Bf16>(), L.a->fc1.as<Bf16>(), dfc1_.as<Bf16>(),
                       n, sh.ffn, nullptr));
  } else {
    MESHTUNE_RETURN_IF_ERROR(GeluBackward(dact_.as<Bf16>(), L.a->fc1.as<Bf16>(),
                                          dfc1_.as<Bf16>(), n * sh.ffn,
                                          nullptr));
  }
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearBackward(
      dfc1_.as<Bf16>(), L.a->ln2.as<Bf16>(), w(p.fc1_w), dln_.as<Bf16>(),
      g(p.fc1_w), g(p.fc1_b), n, h, sh.fc1_width(), nullptr));
  // dx2 = Norm2'(dln2) + dy (the residual branch).
  Bf16* dx2 = dx2_.as<Bf16>();
  if (sh.rmsnorm) {
    MESHTUNE_RETURN_IF_ERROR(RmsNormBackward(
        dln_.as<Bf16>(), L.a->x2.as<Bf16>(), w(p.ln2_w), L.a->rstd2.as<float>(),
        dy, dx2, g(p.ln2_w), n, h, nullptr));
  } else {
    MESHTUNE_RETURN_IF_ERROR(
        LayerNormBackward(dln_.as<Bf16>(), L.a->x2.as<Bf16>(), w(p.ln2_w),
                          L.a->mean2.as<float>(), L.a->rstd2.as<float>(), dy,
                          dx2, g(p.ln2_w), g(p.ln2_b), n, h, nullptr));
  }
  // Attention: dattn = D(dx2)·Wproj; dqkv = Attention'(dattn); dln1 =
  // dqkv·Wqkv.
  StatusOr<const Bf16*> dproj =
      DropGrad(dx2, L.index, cpu::DropoutSite::kAttentionOut, drop_grad_);
  if (!dproj.ok()) return dproj.status();
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearBackward(
      dproj.value(), L.a->attn.as<Bf16>(), w(p.proj_w), dattn_.as<Bf16>(),
      g(p.proj_w), g(p.proj_b), n, hd, h, nullptr));
  const cpu::DropoutSpec attention_dropout = AttentionDrop(L.index);
  if (flash_ != nullptr) {
    // The flash backward recomputes P tile by tile from the saved
    // log-sum-exp whatever the recompute setting: with flash attention,
    // selective recompute has no probabilities to drop (Megatron's
    // selective recompute with flash attention saves nothing extra either).
    MESHTUNE_RETURN_IF_ERROR(flash_->Backward(
        dattn_.as<Bf16>(), L.a->qkv.as<Bf16>(), L.a->attn.as<Bf16>(),
        L.a->lse.as<float>(), dqkv_.as<Bf16>(), nullptr, &attention_dropout));
  } else {
    const Bf16* probs = L.a->probs.as<Bf16>();
    if (L.a->probs.size_bytes() == 0) {  // selective: recompute them
      MESHTUNE_RETURN_IF_ERROR(attention_->Forward(
          L.a->qkv.as<Bf16>(), attn_scratch_.as<Bf16>(),
          probs_scratch_.as<Bf16>(), nullptr, &attention_dropout));
      probs = probs_scratch_.as<Bf16>();
    }
    MESHTUNE_RETURN_IF_ERROR(
        attention_->Backward(dattn_.as<Bf16>(), L.a->qkv.as<Bf16>(), probs,
                             dqkv_.as<Bf16>(), nullptr, &attention_dropout));
  }
  if (sh.rope) {
    MESHTUNE_RETURN_IF_ERROR(RopeBackward(dqkv_.as<Bf16>(), sh.s, sh.b,
                                          sh.heads, sh.groups, sh.head_dim,
                                          sh.rope_base, 0, nullptr));
  }
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearBackward(
      dqkv_.as<Bf16>(), L.a->ln1.as<Bf16>(), w(p.qkv_w), dln_.as<Bf16>(),
      g(p.qkv_w), g(p.qkv_b), n, h, sh.qkv_width(), nullptr));
  // dx = Norm1'(dln1) + dx2 (the residual branch).
  if (sh.rmsnorm) {
    return RmsNormBackward(dln_.as<Bf16>(), x, w(p.ln1_w),
                           L.a->rstd1.as<float>(), dx2, dx, g(p.ln1_w), n, h,
                           nullptr);
  }
  return LayerNormBackward(dln_.as<Bf16>(), x, w(p.ln1_w),
                           L.a->mean1.as<float>(), L.a->rstd1.as<float>(), dx2,
                           dx, g(p.ln1_w), g(p.ln1_b), n, h, nullptr);
}

StatusOr<double> CudaGptModel::Forward(const std::vector<int32_t>& tokens,
                                       const std::vector<int32_t>& targets,
                                       int64_t first_sample) {
  first_sample_ = first_sample;
  const LayerShape& sh = sh_;
  const ParamStore& st = *store_;
  const int64_t n = sh.rows(), h = sh.h, v = padded_vocab_;
  MESHTUNE_CHECK(static_cast<int64_t>(tokens.size()) == n &&
                 static_cast<int64_t>(targets.size()) == n);
  MESHTUNE_RETURN_IF_ERROR(tokens_.CopyFromHost(tokens.data(), 4 * n));
  MESHTUNE_RETURN_IF_ERROR(targets_.CopyFromHost(targets.data(), 4 * n));
  Bf16* x0 = x_[0].as<Bf16>();
  MESHTUNE_RETURN_IF_ERROR(EmbeddingForward(tokens_.as<int32_t>(),
                                            params_->weight(st, word_emb_), x0,
                                            n, h, 0, v, nullptr));
  if (pos_emb_ >= 0) {
    MESHTUNE_RETURN_IF_ERROR(PositionEmbeddingForward(
        params_->weight(st, pos_emb_), x0, sh.s, sh.b, h, 0, nullptr));
  }
  // Megatron's embedding_dropout (p = hidden_dropout).
  MESHTUNE_RETURN_IF_ERROR(HiddenDropout(
      x0, n, h, sh.b, Hidden(-1, cpu::DropoutSite::kEmbedding), nullptr));
  for (size_t l = 0; l < layers_.size(); ++l) {
    MESHTUNE_RETURN_IF_ERROR(
        LayerForward(*layers_[l], x_[l].as<Bf16>(), x_[l + 1].as<Bf16>()));
  }
  const Bf16* last = x_.back().as<Bf16>();
  const Bf16* fw = params_->weight(st, final_w_);
  if (sh.rmsnorm) {
    MESHTUNE_RETURN_IF_ERROR(
        RmsNormForward(last, nullptr, nullptr, fw, final_out_.as<Bf16>(),
                       final_rstd_.as<float>(), n, h, sh.eps, nullptr));
  } else {
    MESHTUNE_RETURN_IF_ERROR(LayerNormForward(
        last, nullptr, nullptr, fw, params_->weight(st, final_b_),
        final_out_.as<Bf16>(), final_mean_.as<float>(), final_rstd_.as<float>(),
        n, h, sh.eps, nullptr));
  }
  MESHTUNE_RETURN_IF_ERROR(
      gemm_->LinearForward(final_out_.as<Bf16>(), params_->weight(st, output_),
                           nullptr, logits_.as<Bf16>(), n, h, v, nullptr));
  const int64_t vocab = config_.model.vocab_size;
  MESHTUNE_RETURN_IF_ERROR(CrossEntropyLocalMax(
      logits_.as<Bf16>(), row_max_.as<float>(), n, v, 0, vocab, nullptr));
  MESHTUNE_RETURN_IF_ERROR(CrossEntropyLocalSums(
      logits_.as<Bf16>(), targets_.as<int32_t>(), row_max_.as<float>(),
      sum_exp_.as<float>(), target_logit_.as<float>(), n, v, 0, vocab,
      nullptr));
  MESHTUNE_RETURN_IF_ERROR(CrossEntropyLoss(
      row_max_.as<float>(), sum_exp_.as<float>(), target_logit_.as<float>(),
      loss_.as<float>(), n, nullptr));
  std::vector<float> losses(n);
  MESHTUNE_RETURN_IF_ERROR(loss_.CopyToHost(losses.data(), 4 * n));
  double sum = 0.0;
  for (float l : losses) sum += l;
  return sum;
}

std::pair<int, int> CudaGptModel::LayerTensors(int64_t layer) const {
  const LayerParams& p = layers_[layer]->p;
  int lo = p.ln1_w, hi = p.ln1_w;
  for (int i : {p.ln1_w, p.ln1_b, p.qkv_w, p.qkv_b, p.proj_w, p.proj_b, p.ln2_w,
                p.ln2_b, p.fc1_w, p.fc1_b, p.fc2_w, p.fc2_b}) {
    if (i < 0) continue;
    lo = std::min(lo, i);
    hi = std::max(hi, i);
  }
  return {lo, hi};
}

Status CudaGptModel::Backward(
    float loss_scale, const std::function<Status(int64_t)>& on_layer_done) {
  const LayerShape& sh = sh_;
  const ParamStore& st = *store_;
  const int64_t n = sh.rows(), h = sh.h, v = padded_vocab_;
  if (loss_scale != scale_value_) {
    const std::vector<float> scale(n, loss_scale);
    MESHTUNE_RETURN_IF_ERROR(scale_.CopyFromHost(scale.data(), 4 * n));
    scale_value_ = loss_scale;
  }
  // dlogits in place over the logits; then the head and the final norm.
  MESHTUNE_RETURN_IF_ERROR(CrossEntropyBackward(
      logits_.as<Bf16>(), targets_.as<int32_t>(), row_max_.as<float>(),
      sum_exp_.as<float>(), scale_.as<float>(), logits_.as<Bf16>(), n, v, 0,
      config_.model.vocab_size, nullptr));
  Bf16* dfinal = grad_a_.as<Bf16>();
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearBackward(
      logits_.as<Bf16>(), final_out_.as<Bf16>(), params_->weight(st, output_),
      dfinal, params_->grad(st, output_), nullptr, n, h, v, nullptr));
  Bf16* dy = grad_b_.as<Bf16>();
  const Bf16* last = x_.back().as<Bf16>();
  if (sh.rmsnorm) {
    MESHTUNE_RETURN_IF_ERROR(RmsNormBackward(
        dfinal, last, params_->weight(st, final_w_), final_rstd_.as<float>(),
        nullptr, dy, params_->grad(st, final_w_), n, h, nullptr));
  } else {
    MESHTUNE_RETURN_IF_ERROR(LayerNormBackward(
        dfinal, last, params_->weight(st, final_w_), final_mean_.as<float>(),
        final_rstd_.as<float>(), nullptr, dy, params_->grad(st, final_w_),
        params_->grad(st, final_b_), n, h, nullptr));
  }
  Bf16* dx = grad_a_.as<Bf16>();
  for (int64_t l = static_cast<int64_t>(layers_.size()) - 1; l >= 0; --l) {
    Layer& L = *layers_[l];
    if (L.recompute && l == L.seg_end - 1) {
      // Full recompute: the segment's forward again from its saved input
      // (rewriting x_ inside it with the same values), then its backward.
      for (int64_t k = L.seg_begin; k < L.seg_end; ++k) {
        MESHTUNE_RETURN_IF_ERROR(
            LayerForward(*layers_[k], x_[k].as<Bf16>(), x_[k + 1].as<Bf16>()));
      }
    }
    MESHTUNE_RETURN_IF_ERROR(LayerBackward(L, x_[l].as<Bf16>(), dy, dx));
    if (on_layer_done) MESHTUNE_RETURN_IF_ERROR(on_layer_done(l));
    std::swap(dx, dy);  // this layer's input gradient feeds the one below
  }
  // Through the embedding dropout (in place: dy is not needed after).
  MESHTUNE_RETURN_IF_ERROR(HiddenDropout(
      dy, n, h, sh.b, Hidden(-1, cpu::DropoutSite::kEmbedding), nullptr));
  if (pos_emb_ >= 0) {
    MESHTUNE_RETURN_IF_ERROR(PositionEmbeddingBackward(
        dy, params_->grad(st, pos_emb_), sh.s, sh.b, h, 0, nullptr));
  }
  return EmbeddingBackward(tokens_.as<int32_t>(), dy,
                           params_->grad(st, word_emb_), n, h, 0, v, nullptr);
}

}  // namespace meshtune::engine::cuda
