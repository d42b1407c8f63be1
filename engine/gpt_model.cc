#include "engine/gpt_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "engine/cpu/ops.h"
#include "engine/param_init.h"
#include "search_spaces/pipeline_layout.h"

namespace meshtune::engine {

using search_spaces::PipelineLayout;
using search_spaces::PositionEmbedding;
using search_spaces::RecomputeGranularity;
using search_spaces::RecomputeMethod;

GptModel::GptModel(const TrainConfig& config, ProcessGroups* groups,
                   ParamStore* store)
    : config_(config),
      groups_(groups),
      store_(store),
      shape_(MakeLayerShape(config)) {
  const auto& m = config.model;
  const auto& par = config.parallel;
  const int tp = static_cast<int>(par.tp);
  const int tp_rank = groups->tp_rank();
  const int64_t pp = par.pp, vpp = par.vpp, stage = groups->pp_rank();
  padded_vocab_ = config.padded_vocab_size();
  vocab_local_ = padded_vocab_ / tp;
  vocab_start_ = tp_rank * vocab_local_;
  const PipelineLayout layout(m.num_layers, pp, vpp);
  const bool tied = !m.untie_embeddings_and_output_weights;

  auto vocab_param = [&](const std::string& name, bool first_copy) {
    ParamInfo info;
    info.name = name;
    info.global_shape = {m.vocab_size, m.hidden_size};
    info.split = TpSplit::kVocab;
    info.padded_rows = padded_vocab_;
    info.tp_rank = tp_rank;
    info.tp_size = tp;
    info.tied_embedding = tied && pp > 1;
    // The last stage's copy of a tied embedding is counted by the first.
    info.counts_in_norm = first_copy;
    return store->Add(std::move(info));
  };
  auto replicated = [&](const std::string& name, std::vector<int64_t> shape,
                        bool decay) {
    ParamInfo info;
    info.name = name;
    info.global_shape = std::move(shape);
    info.tp_rank = tp_rank;
    info.tp_size = tp;
    info.weight_decay = decay;
    info.sequence_parallel = shape_.sp;
    info.counts_in_norm = tp_rank == 0;
    return store->Add(std::move(info));
  };

  for (int64_t c = 0; c < vpp; ++c) {
    Chunk chunk;
    chunk.virtual_stage = c * pp + stage;
    for (int64_t v = 0; v < chunk.virtual_stage; ++v) {
      chunk.first_layer += layout.LayersInChunk(v % pp, v / pp);
    }
    if (chunk.virtual_stage == 0) {
      word_emb_ = vocab_param("embedding.word_embeddings.weight", true);
      if (m.position_embedding_type == PositionEmbedding::kLearnedAbsolute) {
        pos_emb_ = replicated("embedding.position_embeddings.weight",
                              {m.seq_length, m.hidden_size}, true);
      }
    }
    const int64_t count = layout.LayersInChunk(stage, c);
    for (int64_t l = 0; l < count; ++l) {
      chunk.layer_params.push_back(
          AddLayerParams(*store, config, chunk.first_layer + l, tp_rank));
    }
    // Full recompute (Megatron --recompute-method): uniform checkpoints
    // groups of num_layers layers; block checkpoints the first num_layers
    // layers of each chunk one by one and keeps the rest.
    const auto& rc = par.recompute;
    if (rc.granularity == RecomputeGranularity::kFull &&
        rc.method == RecomputeMethod::kUniform) {
      for (int64_t l = 0; l < count; l += rc.num_layers) {
        chunk.segments.push_back({l, std::min(count, l + rc.num_layers), true});
      }
    } else {
      const bool block = rc.granularity == RecomputeGranularity::kFull;
      for (int64_t l = 0; l < count; ++l) {
        chunk.segments.push_back({l, l + 1, block && l < rc.num_layers});
      }
    }
    if (chunk.virtual_stage == pp * vpp - 1) {
      final_w_ =
          replicated("decoder.final_layernorm.weight", {m.hidden_size}, false);
      if (!shape_.rmsnorm) {
        final_b_ =
            replicated("decoder.final_layernorm.bias", {m.hidden_size}, false);
      }
      if (!tied) {
        output_ = vocab_param("output_layer.weight", true);
      } else if (word_emb_ >= 0) {
        output_ = word_emb_;  // pp == 1: one tensor serves both ends
      } else {
        output_ = vocab_param("embedding.word_embeddings.weight", false);
      }
    }
    chunks_.push_back(std::move(chunk));
  }
}

void GptModel::Init() {
  const uint64_t seed = config_.seed;
  const float std = config_.init_method_std;
  if (word_emb_ >= 0)
    InitParam(*store_, word_emb_, InitKind::kNormal, std, seed);
  if (pos_emb_ >= 0) InitParam(*store_, pos_emb_, InitKind::kNormal, std, seed);
  if (output_ >= 0 && output_ != word_emb_) {
    InitParam(*store_, output_, InitKind::kNormal, std, seed);
  }
  if (final_w_ >= 0) InitParam(*store_, final_w_, InitKind::kOnes, 0, seed);
  if (final_b_ >= 0) InitParam(*store_, final_b_, InitKind::kZeros, 0, seed);
  for (Chunk& chunk : chunks_) {
    for (const LayerParams& lp : chunk.layer_params) {
      InitLayerParams(*store_, lp, config_);
    }
    chunk.layers.clear();
    for (size_t l = 0; l < chunk.layer_params.size(); ++l) {
      chunk.layers.push_back(std::make_unique<TransformerLayer>(
          shape_, chunk.layer_params[l], store_, groups_->tp.get(),
          config_.parallel.recompute.granularity ==
              RecomputeGranularity::kSelective,
          chunk.first_layer + static_cast<int64_t>(l)));
    }
  }
}

bool GptModel::HasEmbedding(int chunk) const {
  return chunks_[chunk].virtual_stage == 0;
}
bool GptModel::HasHead(int chunk) const {
  return chunks_[chunk].virtual_stage ==
         config_.parallel.pp * config_.parallel.vpp - 1;
}
int64_t GptModel::ActivationCount() const {
  return shape_.local_rows() * shape_.h;
}

void GptModel::Label(const std::string& label) const {
  if (CommLog* log = groups_->tp->log()) log->set_label(label);
}

void GptModel::EmbeddingDropout(float* x, int64_t first_sample) const {
  if (config_.hidden_dropout <= 0.0f) return;
  cpu::DropoutSpec d;
  d.p = config_.hidden_dropout;
  d.key = cpu::DropoutKey(config_.seed, -1, cpu::DropoutSite::kEmbedding);
  d.first_sample = first_sample;
  d.first_row = shape_.sp ? groups_->tp_rank() * shape_.local_rows() : 0;
  cpu::HiddenDropout(x, shape_.local_rows(), shape_.h, shape_.b, d);
}

void GptModel::EmbeddingForward(const int32_t* tokens, float* x,
                                int64_t first_sample) {
  const int64_t n = shape_.rows(), nl = shape_.local_rows(), h = shape_.h;
  Label("embedding.fwd");
  std::vector<float> full(n * h);
  cpu::EmbeddingForward(tokens, store_->param(word_emb_), full.data(), n, h,
                        vocab_start_, vocab_local_);
  // Vocab-parallel lookup: each rank contributes its rows; reduce (or
  // reduce-scatter to the sequence shards under SP).
  if (shape_.sp) {
    groups_->tp->ReduceScatterSum(full.data(), x, nl * h);
  } else {
    if (shape_.tp > 1) groups_->tp->AllReduceSum(full.data(), n * h);
    std::copy(full.begin(), full.end(), x);
  }
  if (pos_emb_ >= 0) {
    const int64_t s_local = nl / shape_.b;
    const int64_t offset = shape_.sp ? groups_->tp_rank() * s_local : 0;
    cpu::PositionEmbeddingForward(store_->param(pos_emb_), x, s_local, shape_.b,
                                  h, offset);
  }
  EmbeddingDropout(x, first_sample);
}

void GptModel::EmbeddingBackward(const int32_t* tokens, const float* dx_out,
                                 int64_t first_sample) {
  const int64_t n = shape_.rows(), nl = shape_.local_rows(), h = shape_.h;
  Label("embedding.bwd");
  // Gradient of the embedding sum before its dropout (no copy without).
  std::vector<float> dx_in;
  const float* dx = dx_out;
  if (config_.hidden_dropout > 0.0f) {
    dx_in.assign(dx_out, dx_out + nl * h);
    EmbeddingDropout(dx_in.data(), first_sample);
    dx = dx_in.data();
  }
  if (pos_emb_ >= 0) {
    const int64_t s_local = nl / shape_.b;
    const int64_t offset = shape_.sp ? groups_->tp_rank() * s_local : 0;
    cpu::PositionEmbeddingBackward(dx, store_->grad(pos_emb_), s_local,
                                   shape_.b, h, offset);
  }
  std::vector<float> full(n * h);
  if (shape_.sp) {
    groups_->tp->AllGather(dx, full.data(), nl * h);
  } else {
    std::copy(dx, dx + n * h, full.begin());
  }
  cpu::EmbeddingBackward(tokens, full.data(), store_->grad(word_emb_), n, h,
                         vocab_start_, vocab_local_);
}

void GptModel::HeadForward(const float* x, const int32_t* targets,
                           ChunkState* st, double* loss_sum) {
  const int64_t n = shape_.rows(), nl = shape_.local_rows(), h = shape_.h;
  Label("head.fwd");
  st->head_x.assign(x, x + nl * h);
  st->head_mean.resize(nl);
  st->head_rstd.resize(nl);
  std::vector<float> normed(nl * h);
  if (shape_.rmsnorm) {
    cpu::RmsNormForward(x, store_->param(final_w_), normed.data(),
                        st->head_rstd.data(), nl, h, shape_.eps);
  } else {
    cpu::LayerNormForward(x, store_->param(final_w_), store_->param(final_b_),
                          normed.data(), st->head_mean.data(),
                          st->head_rstd.data(), nl, h, shape_.eps);
  }
  st->head_full.resize(n * h);
  if (shape_.sp) {
    groups_->tp->AllGather(normed.data(), st->head_full.data(), nl * h);
  } else {
    std::copy(normed.begin(), normed.end(), st->head_full.begin());
  }
  // Column-parallel output layer over the vocabulary; the logits are never
  // gathered (Megatron vocab_parallel_cross_entropy).
  st->logits.resize(n * vocab_local_);
  cpu::LinearForward(st->head_full.data(), store_->param(output_), nullptr,
                     st->logits.data(), n, h, vocab_local_);
  st->row_max.resize(n);
  cpu::CrossEntropyLocalMax(st->logits.data(), st->row_max.data(), n,
                            vocab_local_, vocab_start_,
                            config_.model.vocab_size);
  groups_->tp->AllReduceMax(st->row_max.data(), n);
  std::vector<float> sums(2 * n);  // [sum_exp | target_logit]
  cpu::CrossEntropyLocalSums(st->logits.data(), targets, st->row_max.data(),
                             sums.data(), sums.data() + n, n, vocab_local_,
                             vocab_start_, config_.model.vocab_size);
  groups_->tp->AllReduceSum(sums.data(), 2 * n);
  st->sum_exp.assign(sums.begin(), sums.begin() + n);
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    total +=
        std::log(static_cast<double>(sums[i])) + st->row_max[i] - sums[n + i];
  }
  *loss_sum += total;
}

void GptModel::HeadBackward(ChunkState* st, float loss_scale, float* dx) {
  const int64_t n = shape_.rows(), nl = shape_.local_rows(), h = shape_.h;
  Label("head.bwd");
  std::vector<float> scale(n, loss_scale);
  std::vector<float> dlogits(n * vocab_local_);
  cpu::CrossEntropyBackward(st->logits.data(), st->targets.data(),
                            st->row_max.data(), st->sum_exp.data(),
                            scale.data(), dlogits.data(), n, vocab_local_,
                            vocab_start_, config_.model.vocab_size);
  std::vector<float> dfull(n * h);
  cpu::LinearBackward(dlogits.data(), st->head_full.data(),
                      store_->param(output_), dfull.data(),
                      store_->grad(output_), nullptr, n, h, vocab_local_);
  std::vector<float> dnormed(nl * h);
  if (shape_.sp) {
    groups_->tp->ReduceScatterSum(dfull.data(), dnormed.data(), nl * h);
  } else {
    if (shape_.tp > 1) groups_->tp->AllReduceSum(dfull.data(), n * h);
    std::copy(dfull.begin(), dfull.end(), dnormed.begin());
  }
  if (shape_.rmsnorm) {
    cpu::RmsNormBackward(dnormed.data(), st->head_x.data(),
                         store_->param(final_w_), st->head_rstd.data(), dx,
                         store_->grad(final_w_), nl, h);
  } else {
    cpu::LayerNormBackward(dnormed.data(), st->head_x.data(),
                           store_->param(final_w_), st->head_mean.data(),
                           st->head_rstd.data(), dx, store_->grad(final_w_),
                           store_->grad(final_b_), nl, h);
  }
}

void GptModel::Forward(int chunk_index, const int32_t* tokens,
                       const int32_t* targets, const float* input,
                       float* output, ChunkState* st, double* loss_sum) {
  Chunk& chunk = chunks_[chunk_index];
  const int64_t count = ActivationCount();
  const int64_t n = shape_.rows();
  std::vector<float> cur(count), next(count);
  if (HasEmbedding(chunk_index)) {
    st->tokens.assign(tokens, tokens + n);
    EmbeddingForward(tokens, cur.data(), st->first_sample);
  } else {
    std::copy(input, input + count, cur.begin());
  }
  st->caches.assign(chunk.layers.size(), LayerCache());
  st->segment_inputs.assign(chunk.segments.size(), {});
  for (size_t si = 0; si < chunk.segments.size(); ++si) {
    const Segment& seg = chunk.segments[si];
    if (seg.recompute) st->segment_inputs[si] = cur;
    for (int64_t l = seg.begin; l < seg.end; ++l) {
      Label("layer" + std::to_string(chunk.first_layer + l) + ".fwd");
      chunk.layers[l]->Forward(cur.data(), next.data(), &st->caches[l],
                               st->first_sample);
      if (seg.recompute) st->caches[l].Clear();  // keep only the input
      cur.swap(next);
    }
  }
  if (HasHead(chunk_index)) {
    st->targets.assign(targets, targets + n);
    HeadForward(cur.data(), targets, st, loss_sum);
  } else {
    std::copy(cur.begin(), cur.end(), output);
  }
}

void GptModel::Backward(int chunk_index, const float* doutput, float* dinput,
                        ChunkState* st, float loss_scale) {
  Chunk& chunk = chunks_[chunk_index];
  const int64_t count = ActivationCount();
  std::vector<float> dcur(count), dnext(count);
  if (HasHead(chunk_index)) {
    HeadBackward(st, loss_scale, dcur.data());
  } else {
    std::copy(doutput, doutput + count, dcur.begin());
  }
  for (size_t si = chunk.segments.size(); si-- > 0;) {
    const Segment& seg = chunk.segments[si];
    if (seg.recompute) {
      // Rerun the segment's forward from its saved input, keeping every
      // activation this time (Megatron CheckpointFunction).
      std::vector<float> cur = st->segment_inputs[si], next(count);
      for (int64_t l = seg.begin; l < seg.end; ++l) {
        Label("layer" + std::to_string(chunk.first_layer + l) + ".recompute");
        chunk.layers[l]->Forward(cur.data(), next.data(), &st->caches[l],
                                 st->first_sample);
        cur.swap(next);
      }
      st->segment_inputs[si].clear();
    }
    for (int64_t l = seg.end; l-- > seg.begin;) {
      Label("layer" + std::to_string(chunk.first_layer + l) + ".bwd");
      chunk.layers[l]->Backward(dcur.data(), dnext.data(), &st->caches[l]);
      dcur.swap(dnext);
    }
  }
  if (HasEmbedding(chunk_index)) {
    EmbeddingBackward(st->tokens.data(), dcur.data(), st->first_sample);
  } else {
    std::copy(dcur.begin(), dcur.end(), dinput);
  }
  *st = ChunkState();
}

}  // namespace meshtune::engine
