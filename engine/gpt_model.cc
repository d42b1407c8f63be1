#include "engine/gpt_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "engine/context_parallel/sequence_chunks.h"
#include "engine/cpu/ops.h"

namespace meshtune::engine {

using search_spaces::RecomputeGranularity;

namespace {

// Runs of consecutive global positions in this rank's local rows [nl, h]:
// under context parallelism the rank holds two chunks of the sequence
// (engine/context_parallel/sequence_chunks.h), and under SP its tp shard of
// them, which starts at local position tp_rank·nl/b.
std::vector<context_parallel::PositionRun> LocalRuns(const LayerShape& sh,
                                                     const ProcessGroups& g) {
  const int64_t s_local = sh.local_rows() / sh.b;
  const int64_t first = sh.sp ? g.tp_rank() * s_local : 0;
  return context_parallel::SequenceChunks(sh.s * sh.cp, sh.cp, g.cp_rank())
      .Runs(first, s_local);
}

}  // namespace

GptModel::GptModel(const TrainConfig& config, ProcessGroups* groups,
                   ParamStore* store)
    : config_(config),
      groups_(groups),
      store_(store),
      shape_(MakeLayerShape(config)),
      layout_(config, groups->tp_rank(), groups->pp_rank(), store,
              groups->ep->rank(), groups->etp->rank()) {}

void GptModel::Init() {
  layout_.Init(store_);
  layers_.clear();
  layers_.resize(layout_.num_chunks());
  for (int c = 0; c < layout_.num_chunks(); ++c) {
    for (int64_t l = 0; l < layout_.NumLayers(c); ++l) {
      const LayerParams& params = layout_.LayerParamsOf(c, l);
      std::unique_ptr<moe::MoeBlock> moe;
      if (params.moe) {
        const moe::MoeComms comms{groups_->tp.get(), groups_->tp_cp.get(),
                                  groups_->ep.get(), groups_->etp.get()};
        moe = std::make_unique<moe::MoeBlock>(MakeMoeShape(config_), comms);
      }
      layers_[c].push_back(std::make_unique<TransformerLayer>(
          shape_, params, store_, groups_->tp.get(),
          config_.parallel.recompute.granularity ==
              RecomputeGranularity::kSelective,
          layout_.FirstLayer(c) + l, groups_->cp.get(), std::move(moe)));
    }
  }
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
  if (shape_.cp == 1) {
    cpu::HiddenDropout(x, shape_.local_rows(), shape_.h, shape_.b, d);
    return;
  }
  // Per run of global positions: the single-rank run's masks.
  const std::vector<context_parallel::PositionRun> runs =
      LocalRuns(shape_, *groups_);
  for (const context_parallel::PositionRun& run : runs) {
    cpu::DropoutSpec part = d;
    part.first_row = run.global_pos0 * shape_.b;
    cpu::HiddenDropout(
        x + (run.local_pos0 - runs.front().local_pos0) * shape_.b * shape_.h,
        run.len * shape_.b, shape_.h, shape_.b, part);
  }
}

void GptModel::EmbeddingForward(const int32_t* tokens, float* x,
                                int64_t first_sample) {
  const int64_t n = shape_.rows(), nl = shape_.local_rows(), h = shape_.h;
  Label("embedding.fwd");
  std::vector<float> full(n * h);
  cpu::EmbeddingForward(tokens, store_->param(layout_.word_embedding()),
                        full.data(), n, h, layout_.vocab_start(),
                        layout_.vocab_local());
  // Vocab-parallel lookup: each rank contributes its rows; reduce (or
  // reduce-scatter to the sequence shards under SP).
  if (shape_.sp) {
    groups_->tp->ReduceScatterSum(full.data(), x, nl * h);
  } else {
    if (shape_.tp > 1) groups_->tp->AllReduceSum(full.data(), n * h);
    std::copy(full.begin(), full.end(), x);
  }
  if (layout_.position_embedding() >= 0) {
    // Learned absolute positions at the rows' global positions (one run
    // without context parallelism; Megatron passes each cp rank its
    // chunks' position_ids).
    const std::vector<context_parallel::PositionRun> runs =
        LocalRuns(shape_, *groups_);
    for (const context_parallel::PositionRun& run : runs) {
      cpu::PositionEmbeddingForward(
          store_->param(layout_.position_embedding()),
          x + (run.local_pos0 - runs.front().local_pos0) * shape_.b * h,
          run.len, shape_.b, h, run.global_pos0);
    }
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
  if (layout_.position_embedding() >= 0) {
    const std::vector<context_parallel::PositionRun> runs =
        LocalRuns(shape_, *groups_);
    for (const context_parallel::PositionRun& run : runs) {
      cpu::PositionEmbeddingBackward(
          dx + (run.local_pos0 - runs.front().local_pos0) * shape_.b * h,
          store_->grad(layout_.position_embedding()), run.len, shape_.b, h,
          run.global_pos0);
    }
  }
  std::vector<float> full(n * h);
  if (shape_.sp) {
    groups_->tp->AllGather(dx, full.data(), nl * h);
  } else {
    std::copy(dx, dx + n * h, full.begin());
  }
  cpu::EmbeddingBackward(tokens, full.data(),
                         store_->grad(layout_.word_embedding()), n, h,
                         layout_.vocab_start(), layout_.vocab_local());
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
    cpu::RmsNormForward(x, store_->param(layout_.final_norm_weight()),
                        normed.data(), st->head_rstd.data(), nl, h, shape_.eps);
  } else {
    cpu::LayerNormForward(x, store_->param(layout_.final_norm_weight()),
                          store_->param(layout_.final_norm_bias()),
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
  st->logits.resize(n * layout_.vocab_local());
  cpu::LinearForward(st->head_full.data(),
                     store_->param(layout_.output_weight()), nullptr,
                     st->logits.data(), n, h, layout_.vocab_local());
  st->row_max.resize(n);
  cpu::CrossEntropyLocalMax(st->logits.data(), st->row_max.data(), n,
                            layout_.vocab_local(), layout_.vocab_start(),
                            config_.model.vocab_size);
  groups_->tp->AllReduceMax(st->row_max.data(), n);
  std::vector<float> sums(2 * n);  // [sum_exp | target_logit]
  cpu::CrossEntropyLocalSums(st->logits.data(), targets, st->row_max.data(),
                             sums.data(), sums.data() + n, n,
                             layout_.vocab_local(), layout_.vocab_start(),
                             config_.model.vocab_size);
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
  std::vector<float> dlogits(n * layout_.vocab_local());
  cpu::CrossEntropyBackward(
      st->logits.data(), st->targets.data(), st->row_max.data(),
      st->sum_exp.data(), scale.data(), dlogits.data(), n,
      layout_.vocab_local(), layout_.vocab_start(), config_.model.vocab_size);
  std::vector<float> dfull(n * h);
  cpu::LinearBackward(dlogits.data(), st->head_full.data(),
                      store_->param(layout_.output_weight()), dfull.data(),
                      store_->grad(layout_.output_weight()), nullptr, n, h,
                      layout_.vocab_local());
  std::vector<float> dnormed(nl * h);
  if (shape_.sp) {
    groups_->tp->ReduceScatterSum(dfull.data(), dnormed.data(), nl * h);
  } else {
    if (shape_.tp > 1) groups_->tp->AllReduceSum(dfull.data(), n * h);
    std::copy(dfull.begin(), dfull.end(), dnormed.begin());
  }
  if (shape_.rmsnorm) {
    cpu::RmsNormBackward(dnormed.data(), st->head_x.data(),
                         store_->param(layout_.final_norm_weight()),
                         st->head_rstd.data(), dx,
                         store_->grad(layout_.final_norm_weight()), nl, h);
  } else {
    cpu::LayerNormBackward(dnormed.data(), st->head_x.data(),
                           store_->param(layout_.final_norm_weight()),
                           st->head_mean.data(), st->head_rstd.data(), dx,
                           store_->grad(layout_.final_norm_weight()),
                           store_->grad(layout_.final_norm_bias()), nl, h);
  }
}

void GptModel::Forward(int chunk_index, const int32_t* tokens,
                       const int32_t* targets, const float* input,
                       float* output, ChunkState* st, double* loss_sum) {
  const std::vector<ModelLayout::Segment>& segments =
      layout_.Segments(chunk_index);
  const int64_t first_layer = layout_.FirstLayer(chunk_index);
  auto& layers = layers_[chunk_index];
  const int64_t count = ActivationCount();
  const int64_t n = shape_.rows();
  std::vector<float> cur(count), next(count);
  if (layout_.HasEmbedding(chunk_index)) {
    st->tokens.assign(tokens, tokens + n);
    EmbeddingForward(tokens, cur.data(), st->first_sample);
  } else {
    std::copy(input, input + count, cur.begin());
  }
  st->caches.assign(layers.size(), LayerCache());
  st->segment_inputs.assign(segments.size(), {});
  for (size_t si = 0; si < segments.size(); ++si) {
    const ModelLayout::Segment& seg = segments[si];
    if (seg.recompute) st->segment_inputs[si] = cur;
    for (int64_t l = seg.begin; l < seg.end; ++l) {
      Label("layer" + std::to_string(first_layer + l) + ".fwd");
      layers[l]->Forward(cur.data(), next.data(), &st->caches[l],
                         st->first_sample);
      aux_loss_sum_ += st->caches[l].moe.aux_loss;
      if (seg.recompute) st->caches[l].Clear();  // keep only the input
      cur.swap(next);
    }
  }
  if (layout_.HasHead(chunk_index)) {
    st->targets.assign(targets, targets + n);
    HeadForward(cur.data(), targets, st, loss_sum);
  } else {
    std::copy(cur.begin(), cur.end(), output);
  }
}

void GptModel::UpdateExpertBias(float rate) {
  if (!config_.model.moe_router_enable_expert_bias) return;
  // tp, then dp·cp ("dp" holds the cp ranks too when cp > 1): every rank
  // of this pipeline stage once.
  const std::vector<Communicator*> groups = {groups_->tp.get(),
                                             groups_->dp.get()};
  for (auto& chunk : layers_) {
    for (auto& layer : chunk) layer->UpdateExpertBias(groups, rate);
  }
}

double GptModel::TakeAuxLossSum() {
  const double sum = aux_loss_sum_;
  aux_loss_sum_ = 0;
  return sum;
}

void GptModel::Backward(int chunk_index, const float* doutput, float* dinput,
                        ChunkState* st, float loss_scale) {
  const std::vector<ModelLayout::Segment>& segments =
      layout_.Segments(chunk_index);
  const int64_t first_layer = layout_.FirstLayer(chunk_index);
  auto& layers = layers_[chunk_index];
  const int64_t count = ActivationCount();
  std::vector<float> dcur(count), dnext(count);
  if (layout_.HasHead(chunk_index)) {
    HeadBackward(st, loss_scale, dcur.data());
  } else {
    std::copy(doutput, doutput + count, dcur.begin());
  }
  for (size_t si = segments.size(); si-- > 0;) {
    const ModelLayout::Segment& seg = segments[si];
    if (seg.recompute) {
      // Rerun the segment's forward from its saved input, keeping every
      // activation this time (Megatron CheckpointFunction).
      std::vector<float> cur = st->segment_inputs[si], next(count);
      for (int64_t l = seg.begin; l < seg.end; ++l) {
        Label("layer" + std::to_string(first_layer + l) + ".recompute");
        layers[l]->Forward(cur.data(), next.data(), &st->caches[l],
                           st->first_sample);
        cur.swap(next);
      }
      st->segment_inputs[si].clear();
    }
    for (int64_t l = seg.end; l-- > seg.begin;) {
      Label("layer" + std::to_string(first_layer + l) + ".bwd");
      layers[l]->Backward(dcur.data(), dnext.data(), &st->caches[l]);
      dcur.swap(dnext);
    }
  }
  if (layout_.HasEmbedding(chunk_index)) {
    EmbeddingBackward(st->tokens.data(), dcur.data(), st->first_sample);
  } else {
    std::copy(dcur.begin(), dcur.end(), dinput);
  }
  *st = ChunkState();
}

}  // namespace meshtune::engine
