#include "engine/inference/cpu_generator.h"

#include <algorithm>
#include <string>
#include <utility>

#include "engine/checkpoint.h"
#include "engine/cpu/attention_cached.h"
#include "engine/cpu/ops.h"
#include "engine/moe/moe_block.h"

namespace meshtune::engine::inference {

StatusOr<std::unique_ptr<CpuGenerator>> CpuGenerator::Create(
    const TrainConfig& config, Communicator* world, int64_t batch,
    int64_t capacity) {
  const TrainConfig c = InferenceConfig(config, world->size());
  MESHTUNE_RETURN_IF_ERROR(CheckGenerator(c, batch, capacity));
  return std::unique_ptr<CpuGenerator>(
      new CpuGenerator(c, world, batch, capacity));
}

CpuGenerator::CpuGenerator(const TrainConfig& config, Communicator* world,
                           int64_t batch, int64_t capacity)
    : Generator(config, batch, capacity),
      groups_(MakeProcessGroups(world, config.parallel)),
      layout_(config_, groups_.tp_rank(), 0, &store_, groups_.ep->rank(),
              groups_.etp->rank()),
      shape_(MakeLayerShape(config_)),
      cache_(config_.model.num_layers, batch, shape_.groups, capacity,
             shape_.head_dim) {
  store_.Finalize();
}

Status CpuGenerator::InitWeights() {
  layout_.Init(&store_);
  return Status::Ok();
}

Status CpuGenerator::LoadCheckpoint(const std::string& dir) {
  return LoadCheckpointParams(dir, config_.model.name, store_, *groups_.world);
}

void CpuGenerator::AllReduceTp(float* x, int64_t count) {
  if (shape_.tp > 1) groups_.tp->AllReduceSum(x, count);
}

void CpuGenerator::Norm(const float* x, int w, int b, int64_t rows,
                        float* out) const {
  std::vector<float> mean(rows), rstd(rows);
  if (shape_.rmsnorm) {
    cpu::RmsNormForward(x, store_.param(w), out, rstd.data(), rows, shape_.h,
                        shape_.eps);
  } else {
    cpu::LayerNormForward(x, store_.param(w), store_.param(b), out, mean.data(),
                          rstd.data(), rows, shape_.h, shape_.eps);
  }
}

void CpuGenerator::Embed(const int32_t* tokens, int64_t t, float* x) {
  const int64_t b = batch(), h = shape_.h;
  // Vocab-parallel lookup: each rank adds the rows it holds.
  cpu::EmbeddingForward(tokens, store_.param(layout_.word_embedding()), x,
                        t * b, h, layout_.vocab_start(), layout_.vocab_local());
  AllReduceTp(x, t * b * h);
  if (layout_.position_embedding() >= 0) {
    cpu::PositionEmbeddingForward(store_.param(layout_.position_embedding()), x,
                                  t, b, h, position());
  }
}

void CpuGenerator::Layer(int64_t layer, int64_t t, std::vector<float>* x) {
  const LayerParams& p = layout_.LayerParamsOf(0, layer);
  const int64_t b = batch(), n = t * b, h = shape_.h;
  const int64_t qw = shape_.qkv_width(), aw = shape_.heads * shape_.head_dim;
  auto P = [&](int i) -> const float* {
    return i >= 0 ? store_.param(i) : nullptr;
  };
  auto add_bias = [&](int bias, float* y) {
    if (bias < 0) return;
    const float* bv = store_.param(bias);
    for (int64_t r = 0; r < n; ++r) cpu::Add(bv, y + r * h, h);
  };
  // Attention: x += Proj(Attn(QKV(Norm1(x)))).
  std::vector<float> normed(n * h), qkv(n * qw), attn(n * aw), out(n * h);
  Norm(x->data(), p.ln1_w, p.ln1_b, n, normed.data());
  cpu::LinearForward(normed.data(), P(p.qkv_w), P(p.qkv_b), qkv.data(), n, h,
                     qw);
  if (shape_.rope) {
    cpu::RopeForward(qkv.data(), t, b, shape_.heads, shape_.groups,
                     shape_.head_dim, shape_.rope_base, position());
  }
  const cpu::AttentionChunkShape heads{b, shape_.heads, shape_.groups,
                                       shape_.head_dim};
  cpu::KvCacheAppend(qkv.data(), t, position(), capacity(), heads,
                     cache_.keys(layer), cache_.values(layer));
  cpu::AttentionCachedForward(qkv.data(), cache_.keys(layer),
                              cache_.values(layer), t, position(), capacity(),
                              heads, attn.data());
  cpu::LinearForward(attn.data(), P(p.proj_w), nullptr, out.data(), n, aw, h);
  AllReduceTp(out.data(), n * h);  // row-parallel: bias after the sum
  add_bias(p.proj_b, out.data());
  cpu::Add(out.data(), x->data(), n * h);
  // MLP: x += MLP(Norm2(x)).
  Norm(x->data(), p.ln2_w, p.ln2_b, n, normed.data());
  Mlp(p, n, normed.data(), out.data());
  cpu::Add(out.data(), x->data(), n * h);
}

void CpuGenerator::Mlp(const LayerParams& p, int64_t rows, const float* normed,
                       float* out) {
  if (p.moe) {
    MoeMlp(p, rows, normed, out);
    return;
  }
  const int64_t h = shape_.h, f = shape_.ffn, fw = shape_.fc1_width();
  auto P = [&](int i) -> const float* {
    return i >= 0 ? store_.param(i) : nullptr;
  };
  std::vector<float> fc1(rows * fw), act(rows * f);
  cpu::LinearForward(normed, P(p.fc1_w), P(p.fc1_b), fc1.data(), rows, h, fw);
  if (shape_.swiglu) {
    cpu::SwigluForward(fc1.data(), act.data(), rows, f);
  } else {
    cpu::GeluForward(fc1.data(), act.data(), rows * f);
  }
  std::fill(out, out + rows * h, 0.0f);
  cpu::LinearForward(act.data(), P(p.fc2_w), nullptr, out, rows, f, h);
  AllReduceTp(out, rows * h);
  if (p.fc2_b >= 0) {
    for (int64_t r = 0; r < rows; ++r) cpu::Add(P(p.fc2_b), out + r * h, h);
  }
}

void CpuGenerator::MoeMlp(const LayerParams& p, int64_t rows,
                          const float* normed, float* out) {
  const int64_t h = shape_.h, tp = shape_.tp;
  // Sequence-parallel rows, as training runs the block with tp > 1: rank r
  // routes rows [r·local, (r + 1)·local) of the padded rows.
  const int64_t padded = (rows + tp - 1) / tp * tp, local = padded / tp;
  moe::MoeShape sh = MakeMoeShape(config_);
  sh.n = padded;
  sh.nl = local;
  const moe::MoeComms comms{groups_.tp.get(), groups_.tp_cp.get(),
                            groups_.ep.get(), groups_.etp.get()};
  moe::MoeBlock block(sh, comms);
  std::vector<float> x(local * h, 0.0f), y(local * h);
  const int64_t first = groups_.tp_rank() * local;
  const int64_t mine = std::clamp<int64_t>(rows - first, 0, local);
  std::copy(normed + first * h, normed + (first + mine) * h, x.begin());
  moe::MoeCache cache;
  block.Forward(x.data(), MoeWeightsOf(store_, p), y.data(), &cache);
  if (tp == 1) {
    std::copy(y.begin(), y.end(), out);
    return;
  }
  std::vector<float> full(padded * h);
  groups_.tp->AllGather(y.data(), full.data(), local * h);
  std::copy(full.begin(), full.begin() + rows * h, out);
}

std::vector<float> CpuGenerator::Head(const float* x, int64_t rows) {
  const int64_t h = shape_.h, vl = layout_.vocab_local();
  const int64_t vocab = config_.model.vocab_size, tp = shape_.tp;
  std::vector<float> normed(rows * h), local(rows * vl);
  Norm(x, layout_.final_norm_weight(), layout_.final_norm_bias(), rows,
       normed.data());
  cpu::LinearForward(normed.data(), store_.param(layout_.output_weight()),
                     nullptr, local.data(), rows, h, vl);
  // Vocab-parallel logits: rank r holds columns [r·vl, (r + 1)·vl) of the
  // padded vocabulary; gather and drop the padding.
  std::vector<float> gathered(tp * rows * vl);
  if (tp > 1) {
    groups_.tp->AllGather(local.data(), gathered.data(), rows * vl);
  } else {
    gathered.swap(local);
  }
  return UnshardLogits(gathered, rows, vl, vocab);
}

StatusOr<std::vector<float>> CpuGenerator::RunForward(
    const std::vector<int32_t>& tokens, int64_t t, LogitsOf which) {
  const int64_t b = batch(), h = shape_.h;
  std::vector<float> x(t * b * h);
  Embed(tokens.data(), t, x.data());
  for (int64_t l = 0; l < config_.model.num_layers; ++l) Layer(l, t, &x);
  if (which == LogitsOf::kAll) return Head(x.data(), t * b);
  return Head(x.data() + (t - 1) * b * h, b);  // last position's rows
}

}  // namespace meshtune::engine::inference
