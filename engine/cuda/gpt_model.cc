// The chunks of one rank on the GPU (engine/cuda/gpt_model.h). A chunk's
// forward: embedding (first virtual stage) or the received input, its
// layers segment by segment, then the head (last virtual stage: final norm,
// vocab-parallel output layer and cross-entropy) or the output buffer the
// trainer sends on. The backward mirrors it, rerunning each recomputed
// segment's forward from its saved input first.
#include "engine/cuda/gpt_model.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "engine/cuda/context_parallel/positions.h"
#include "engine/cuda/kernels/ops.h"

namespace meshtune::engine::cuda {

using search_spaces::RecomputeGranularity;

namespace {
constexpr size_t kBf = sizeof(Bf16), kF32 = sizeof(float);
}  // namespace

// One micro-batch's state in a chunk, from the receive of its input to the
// send of its input gradient.
struct CudaGptModel::Slot {
  int64_t first_sample = 0;
  DeviceBuffer tokens, targets;  // int32 [n] (first / last virtual stage)
  // Their uploads: asynchronous, so Forward never waits for the GPU.
  PinnedUpload tokens_upload, targets_upload;
  DeviceBuffer x_in, x_out;  // [nl, h] the chunk's input and output
  // Per layer, from the forward to the end of the backward: its activation
  // set from the rank's pool (null under full recompute).
  std::vector<LayerActivations*> acts;
  // Per layer: the input of a recomputed segment's first layer (l > 0), all
  // a recomputed segment keeps; empty elsewhere.
  std::vector<DeviceBuffer> segment_inputs;
  DeviceBuffer output_grad, input_grad;  // [nl, h]
  // Head: final-norm output [nl, h] and statistics [nl] (fp32), logits
  // [n, vocab_local] (dlogits in place in the backward), cross-entropy
  // statistics (fp32): row_max [n], stats [2n] = sum_exp | target_logit,
  // loss [n].
  DeviceBuffer final_out, final_mean, final_rstd, logits;
  DeviceBuffer row_max, stats, loss;
};

struct CudaGptModel::Chunk {
  int index = 0;
  int64_t first_layer = 0;
  std::vector<std::unique_ptr<CudaTransformerLayer>> layers;
  // Per layer (chunk index): full recompute, and its segment [begin, end).
  std::vector<bool> recompute;
  std::vector<int64_t> seg_begin, seg_end;
  std::vector<std::unique_ptr<Slot>> slots;
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
  auto kernel = ParseAttentionKernel(std::getenv("MESHTUNE_CUDA_ATTENTION"));
  if (!kernel.ok()) return kernel.status();
  const LayerShape sh = MakeLayerShape(config);
  if (config.parallel.cp > 1) {
    // Context parallelism: ring attention on the flash chunk kernels
    // (engine/cuda/context_parallel/), whose shape is one chunk's.
    if (kernel.value() == AttentionKernel::kUnfused) {
      return Status::InvalidArgument(
          "the CUDA engine runs context parallelism (cp=" +
              std::to_string(config.parallel.cp) +
              ") on the flash kernel only, not MESHTUNE_CUDA_ATTENTION=unfused",
          "unset MESHTUNE_CUDA_ATTENTION, or use --cp 1");
    }
    return DeviceRingAttention::CheckShape(
        context_parallel::SequenceChunks(
            config.seq(), static_cast<int>(config.parallel.cp), 0),
        sh.b, sh.heads, sh.groups, sh.head_dim);
  }
  if (kernel.value() == AttentionKernel::kUnfused) return Status::Ok();
  return FlashAttention::CheckShape(sh.s, sh.b, sh.heads, sh.groups,
                                    sh.head_dim);
}

StatusOr<std::unique_ptr<CudaGptModel>> CudaGptModel::Create(
    const TrainConfig& config, const ModelLayout& layout,
    const ParamStore& store, DeviceParams* params, DeviceCommunicator* tp,
    const std::vector<int>& slots, int64_t activation_sets,
    const CudaMoeComms& moe_comms, DeviceCommunicator* cp) {
  MESHTUNE_RETURN_IF_ERROR(CheckSupported(config));
  if (static_cast<int>(slots.size()) != layout.num_chunks()) {
    return Status::Internal("CUDA model: " + std::to_string(slots.size()) +
                            " slot counts for " +
                            std::to_string(layout.num_chunks()) + " chunks");
  }
  if (config.parallel.tp > 1 &&
      (tp == nullptr || tp->size() != config.parallel.tp)) {
    return Status::Internal("CUDA model: tp > 1 needs the tp communicator");
  }
  std::unique_ptr<CudaGptModel> m(new CudaGptModel());
  m->config_ = config;
  m->layout_ = &layout;
  m->store_ = &store;
  m->params_ = params;
  m->tp_ = tp;
  m->tp_rank_ = tp != nullptr ? tp->rank() : 0;
  m->sh_ = MakeLayerShape(config);
  m->vocab_start_ = layout.vocab_start();
  m->vocab_local_ = layout.vocab_local();
  const LayerShape& sh = m->sh_;

  MESHTUNE_ASSIGN_OR_RETURN(m->gemm_, GemmContext::Create());
  // Read once here: the kernel stays fixed for the model's lifetime.
  AttentionKernel kernel = AttentionKernel::kFlash;
  MESHTUNE_ASSIGN_OR_RETURN(
      kernel, ParseAttentionKernel(std::getenv("MESHTUNE_CUDA_ATTENTION")));
  if (sh.cp > 1) {
    // Context parallelism: the ring over `cp` replaces the flash kernel.
    if (cp == nullptr || cp->size() != sh.cp) {
      return Status::Internal("CUDA model: cp > 1 needs the cp communicator");
    }
    MESHTUNE_ASSIGN_OR_RETURN(
        m->ring_,
        DeviceRingAttention::Create(
            context_parallel::SequenceChunks(config.seq(), sh.cp, cp->rank()),
            sh.b, sh.heads, sh.groups, sh.head_dim, cp));
  } else if (kernel == AttentionKernel::kFlash) {
    MESHTUNE_ASSIGN_OR_RETURN(
        m->flash_,
        FlashAttention::Create(sh.s, sh.b, sh.heads, sh.groups, sh.head_dim));
  } else {
    MESHTUNE_ASSIGN_OR_RETURN(
        m->attention_, Attention::Create(m->gemm_.get(), sh.s, sh.b, sh.heads,
                                         sh.groups, sh.head_dim));
  }
  const AttentionKernels kernels{m->flash_.get(), m->attention_.get(),
                                 m->ring_.get()};
  const bool selective =
      config.parallel.recompute.granularity == RecomputeGranularity::kSelective;
  MESHTUNE_ASSIGN_OR_RETURN(
      m->scratch_, CudaTransformerLayer::AllocScratch(
                       sh, kernels, selective, config.hidden_dropout > 0));

  const bool moe = config.model.is_moe();
  if (moe) {
    if (moe_comms.tp_cp == nullptr || moe_comms.ep == nullptr ||
        moe_comms.etp == nullptr) {
      return Status::Internal("CUDA model: an MoE model needs its groups");
    }
    m->dispatcher_ = std::make_unique<DeviceTokenDispatcher>(
        moe_comms.ep_rows, moe_comms.etp_rows, moe_comms.ep->size(),
        moe_comms.etp->size(), moe_comms.etp->rank(), config.model.num_experts,
        sh.h);
  }
  const size_t n = static_cast<size_t>(sh.rows());
  const size_t nl = static_cast<size_t>(sh.local_rows()), h = sh.h;
  int64_t pool_size = 0;
  for (int c = 0; c < layout.num_chunks(); ++c) {
    auto chunk = std::make_unique<Chunk>();
    chunk->index = c;
    chunk->first_layer = layout.FirstLayer(c);
    const int64_t count = layout.NumLayers(c);
    chunk->recompute.assign(count, false);
    chunk->seg_begin.assign(count, 0);
    chunk->seg_end.assign(count, 0);
    for (const ModelLayout::Segment& seg : layout.Segments(c)) {
      for (int64_t l = seg.begin; l < seg.end; ++l) {
        chunk->recompute[l] = seg.recompute;
        chunk->seg_begin[l] = seg.begin;
        chunk->seg_end[l] = seg.end;
      }
      if (seg.recompute) pool_size = std::max(pool_size, seg.end - seg.begin);
    }
    for (int64_t l = 0; l < count; ++l) {
      const LayerParams& lp = layout.LayerParamsOf(c, l);
      chunk->layers.push_back(std::make_unique<CudaTransformerLayer>(
          sh, lp, chunk->first_layer + l, &store, params, m->gemm_.get(),
          kernels, tp, m->scratch_.get()));
      if (lp.moe) {
        CudaMoeComms comms = moe_comms;
        comms.tp = tp;
        m->moe_blocks_.push_back(std::make_unique<CudaMoeBlock>(
            MakeMoeShape(config), comms, m->gemm_.get(), m->dispatcher_.get()));
        if (lp.expert_bias >= 0) {
          m->moe_blocks_.back()->set_expert_bias(store.param(lp.expert_bias));
        }
        chunk->layers.back()->set_moe(m->moe_blocks_.back().get());
      }
    }
    const bool first = layout.HasEmbedding(c), last = layout.HasHead(c);
    for (int k = 0; k < slots[c]; ++k) {
      auto slot = std::make_unique<Slot>();
      if (first) {
        MESHTUNE_ASSIGN_BUFFER(slot->tokens, n * sizeof(int32_t));
        MESHTUNE_ASSIGN_OR_RETURN(slot->tokens_upload,
                                  PinnedUpload::Create(n * sizeof(int32_t)));
      }
      if (last) {
        MESHTUNE_ASSIGN_BUFFER(slot->targets, n * sizeof(int32_t));
        MESHTUNE_ASSIGN_OR_RETURN(slot->targets_upload,
                                  PinnedUpload::Create(n * sizeof(int32_t)));
      }
      MESHTUNE_ASSIGN_BUFFER(slot->x_in, nl * h * kBf);
      MESHTUNE_ASSIGN_BUFFER(slot->x_out, nl * h * kBf);
      slot->acts.assign(count, nullptr);
      slot->segment_inputs.resize(count);
      for (int64_t l = 1; l < count; ++l) {
        if (chunk->recompute[l] && l == chunk->seg_begin[l]) {
          MESHTUNE_ASSIGN_BUFFER(slot->segment_inputs[l], nl * h * kBf);
        }
      }
      if (!last) MESHTUNE_ASSIGN_BUFFER(slot->output_grad, nl * h * kBf);
      MESHTUNE_ASSIGN_BUFFER(slot->input_grad, nl * h * kBf);
      if (last) {
        MESHTUNE_ASSIGN_BUFFER(slot->final_out, nl * h * kBf);
        MESHTUNE_ASSIGN_BUFFER(slot->final_mean, nl * kF32);
        MESHTUNE_ASSIGN_BUFFER(slot->final_rstd, nl * kF32);
        MESHTUNE_ASSIGN_BUFFER(slot->logits,
                               n * static_cast<size_t>(m->vocab_local_) * kBf);
        MESHTUNE_ASSIGN_BUFFER(slot->row_max, n * kF32);
        MESHTUNE_ASSIGN_BUFFER(slot->stats, 2 * n * kF32);
        MESHTUNE_ASSIGN_BUFFER(slot->loss, n * kF32);
      }
      chunk->slots.push_back(std::move(slot));
    }
    m->chunks_.push_back(std::move(chunk));
  }
  // The kept layers' activation sets, shared by the chunks' micro-batches
  // in flight.
  for (int64_t k = 0; k < activation_sets; ++k) {
    std::unique_ptr<LayerActivations> set;
    MESHTUNE_ASSIGN_OR_RETURN(
        set, CudaTransformerLayer::AllocActivations(sh, kernels, !selective));
    if (moe) set->moe = std::make_unique<MoeActivations>();
    m->free_sets_.push_back(set.get());
    m->sets_.push_back(std::move(set));
  }
  // The recompute pool: one segment runs again at a time, on any chunk.
  for (int64_t k = 0; k < pool_size; ++k) {
    std::unique_ptr<LayerActivations> set;
    MESHTUNE_ASSIGN_OR_RETURN(
        set, CudaTransformerLayer::AllocActivations(sh, kernels, !selective));
    if (moe) set->moe = std::make_unique<MoeActivations>();
    m->pool_.push_back(std::move(set));
  }
  MESHTUNE_ASSIGN_BUFFER(m->grad_a_, nl * h * kBf);
  MESHTUNE_ASSIGN_BUFFER(m->grad_b_, nl * h * kBf);
  MESHTUNE_ASSIGN_BUFFER(m->scale_, n * kF32);
  MESHTUNE_ASSIGN_BUFFER(m->loss_sum_, sizeof(double));
  MESHTUNE_RETURN_IF_ERROR(m->loss_sum_.Zero());
  return StatusOr<std::unique_ptr<CudaGptModel>>(std::move(m));
}

Bf16* CudaGptModel::Input(int chunk, int slot) {
  return chunks_[chunk]->slots[slot]->x_in.as<Bf16>();
}
const Bf16* CudaGptModel::Output(int chunk, int slot) const {
  return chunks_[chunk]->slots[slot]->x_out.as<Bf16>();
}
Bf16* CudaGptModel::OutputGrad(int chunk, int slot) {
  return chunks_[chunk]->slots[slot]->output_grad.as<Bf16>();
}
const Bf16* CudaGptModel::InputGrad(int chunk, int slot) const {
  return chunks_[chunk]->slots[slot]->input_grad.as<Bf16>();
}

const Bf16* CudaGptModel::W(int i) const {
  return i >= 0 ? params_->weight(*store_, i) : nullptr;
}
float* CudaGptModel::G(int i) const {
  return i >= 0 ? params_->grad(*store_, i) : nullptr;
}

Bf16* CudaGptModel::LayerInput(Chunk& chunk, Slot& slot, int64_t l) {
  const int64_t count = static_cast<int64_t>(chunk.layers.size());
  if (l == 0) return slot.x_in.as<Bf16>();
  if (l == count) return slot.x_out.as<Bf16>();
  if (!chunk.recompute[l]) return slot.acts[l]->input.as<Bf16>();
  const int64_t k = l - chunk.seg_begin[l];
  return k == 0 ? slot.segment_inputs[l].as<Bf16>()
                : pool_[k]->input.as<Bf16>();
}

std::vector<int64_t> CudaGptModel::KeptLayers(const ModelLayout& layout) {
  std::vector<int64_t> kept(layout.num_chunks(), 0);
  for (int c = 0; c < layout.num_chunks(); ++c) {
    for (const ModelLayout::Segment& seg : layout.Segments(c)) {
      if (!seg.recompute) kept[c] += seg.end - seg.begin;
    }
  }
  return kept;
}

Bf16* CudaGptModel::LayerOutput(Chunk& chunk, Slot& slot, int64_t l) {
  return LayerInput(chunk, slot, l + 1);
}

cpu::DropoutSpec CudaGptModel::EmbeddingDropout(int64_t first_sample) const {
  cpu::DropoutSpec d;
  d.p = config_.hidden_dropout;
  d.key = cpu::DropoutKey(config_.seed, -1, cpu::DropoutSite::kEmbedding);
  d.first_sample = first_sample;
  d.first_row = sh_.sp ? tp_rank_ * sh_.local_rows() : 0;
  return d;
}

Status CudaGptModel::EmbeddingForward(Slot& slot) {
  const int64_t n = sh_.rows(), nl = sh_.local_rows(), h = sh_.h;
  Bf16* x0 = slot.x_in.as<Bf16>();
  // Vocab-parallel lookup: each rank contributes its rows; reduce (or
  // reduce-scatter to the sequence shards under SP).
  Bf16* full = sh_.sp ? scratch_->partial.as<Bf16>() : x0;
  MESHTUNE_RETURN_IF_ERROR(cuda::EmbeddingForward(
      slot.tokens.as<int32_t>(), W(layout_->word_embedding()), full, n, h,
      vocab_start_, vocab_local_, nullptr));
  // Reduced into x0 either way (in place without SP).
  MESHTUNE_RETURN_IF_ERROR(ReduceOverTp(sh_, tp_, full, x0).status());
  if (layout_->position_embedding() >= 0) {
    const int64_t s_local = nl / sh_.b;
    const int64_t offset = sh_.sp ? tp_rank_ * s_local : 0;
    // At the rows' global positions under cp (one run without).
    MESHTUNE_RETURN_IF_ERROR(PositionEmbeddingAt(
        Chunks(), W(layout_->position_embedding()), x0, nullptr, nullptr,
        offset, s_local, sh_.b, h, nullptr));
  }
  // Megatron's embedding_dropout (p = hidden_dropout).
  return HiddenDropoutAt(Chunks(), x0, nl, h, sh_.b,
                         EmbeddingDropout(slot.first_sample), nullptr);
}

const context_parallel::SequenceChunks* CudaGptModel::Chunks() const {
  return ring_ != nullptr ? &ring_->chunks() : nullptr;
}

Status CudaGptModel::EmbeddingBackward(Slot& slot, Bf16* dx) {
  const int64_t n = sh_.rows(), nl = sh_.local_rows(), h = sh_.h;
  // Through the embedding dropout, in place (dx is not needed after).
  MESHTUNE_RETURN_IF_ERROR(HiddenDropoutAt(Chunks(), dx, nl, h, sh_.b,
                                           EmbeddingDropout(slot.first_sample),
                                           nullptr));
  if (layout_->position_embedding() >= 0) {
    const int64_t s_local = nl / sh_.b;
    const int64_t offset = sh_.sp ? tp_rank_ * s_local : 0;
    MESHTUNE_RETURN_IF_ERROR(PositionEmbeddingAt(
        Chunks(), nullptr, nullptr, dx, G(layout_->position_embedding()),
        offset, s_local, sh_.b, h, nullptr));
  }
  const Bf16* full = nullptr;
  MESHTUNE_ASSIGN_OR_RETURN(
      full, GatherSequence(sh_, tp_, dx, scratch_->gathered.as<Bf16>()));
  return cuda::EmbeddingBackward(slot.tokens.as<int32_t>(), full,
                                 G(layout_->word_embedding()), n, h,
                                 vocab_start_, vocab_local_, nullptr);
}

Status CudaGptModel::HeadForward(Slot& slot, const Bf16* x) {
  const int64_t n = sh_.rows(), nl = sh_.local_rows(), h = sh_.h;
  const int fw = layout_->final_norm_weight();
  if (sh_.rmsnorm) {
    MESHTUNE_RETURN_IF_ERROR(
        RmsNormForward(x, nullptr, nullptr, W(fw), slot.final_out.as<Bf16>(),
                       slot.final_rstd.as<float>(), nl, h, sh_.eps, nullptr));
  } else {
    MESHTUNE_RETURN_IF_ERROR(LayerNormForward(
        x, nullptr, nullptr, W(fw), W(layout_->final_norm_bias()),
        slot.final_out.as<Bf16>(), slot.final_mean.as<float>(),
        slot.final_rstd.as<float>(), nl, h, sh_.eps, nullptr));
  }
  const Bf16* full = nullptr;
  MESHTUNE_ASSIGN_OR_RETURN(full,
                            GatherSequence(sh_, tp_, slot.final_out.as<Bf16>(),
                                           scratch_->gathered.as<Bf16>()));
  const int64_t v = vocab_local_, vocab = config_.model.vocab_size;
  Bf16* logits = slot.logits.as<Bf16>();
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearForward(
      full, W(layout_->output_weight()), nullptr, logits, n, h, v, nullptr));
  // Megatron's vocab-parallel cross-entropy: global max, then global sums.
  float* row_max = slot.row_max.as<float>();
  float* sum_exp = slot.stats.as<float>();
  float* target_logit = sum_exp + n;
  MESHTUNE_RETURN_IF_ERROR(CrossEntropyLocalMax(logits, row_max, n, v,
                                                vocab_start_, vocab, nullptr));
  if (sh_.tp > 1)
    MESHTUNE_RETURN_IF_ERROR(tp_->AllReduceMax(row_max, n, nullptr));
  MESHTUNE_RETURN_IF_ERROR(CrossEntropyLocalSums(
      logits, slot.targets.as<int32_t>(), row_max, sum_exp, target_logit, n, v,
      vocab_start_, vocab, nullptr));
  if (sh_.tp > 1) {
    MESHTUNE_RETURN_IF_ERROR(tp_->AllReduceSum(sum_exp, 2 * n, nullptr));
  }
  MESHTUNE_RETURN_IF_ERROR(CrossEntropyLoss(row_max, sum_exp, target_logit,
                                            slot.loss.as<float>(), n, nullptr));
  return CrossEntropyLossSum(slot.loss.as<float>(), n, loss_sum_.as<double>(),
                             nullptr);
}

StatusOr<double> CudaGptModel::TakeLossSum() {
  double sum = 0;
  MESHTUNE_RETURN_IF_ERROR(loss_sum_.CopyToHost(&sum, sizeof(double)));
  MESHTUNE_RETURN_IF_ERROR(loss_sum_.Zero());
  return sum;
}

Status CudaGptModel::HeadBackward(Slot& slot, const Bf16* x, float loss_scale,
                                  Bf16* dx) {
  const int64_t n = sh_.rows(), nl = sh_.local_rows(), h = sh_.h;
  if (loss_scale != scale_value_) {
    const std::vector<float> scale(n, loss_scale);
    MESHTUNE_RETURN_IF_ERROR(scale_.CopyFromHost(scale.data(), kF32 * n));
    scale_value_ = loss_scale;
  }
  const int64_t v = vocab_local_;
  Bf16* logits = slot.logits.as<Bf16>();
  // dlogits in place over the logits.
  MESHTUNE_RETURN_IF_ERROR(CrossEntropyBackward(
      logits, slot.targets.as<int32_t>(), slot.row_max.as<float>(),
      slot.stats.as<float>(), scale_.as<float>(), logits, n, v, vocab_start_,
      config_.model.vocab_size, nullptr));
  const Bf16* full = nullptr;
  MESHTUNE_ASSIGN_OR_RETURN(full,
                            GatherSequence(sh_, tp_, slot.final_out.as<Bf16>(),
                                           scratch_->gathered.as<Bf16>()));
  const int out = layout_->output_weight();
  Bf16* partial = scratch_->partial.as<Bf16>();
  MESHTUNE_RETURN_IF_ERROR(gemm_->LinearBackward(
      logits, full, W(out), partial, G(out), nullptr, n, h, v, nullptr));
  Bf16* dfinal = nullptr;
  MESHTUNE_ASSIGN_OR_RETURN(
      dfinal, ReduceOverTp(sh_, tp_, partial, scratch_->reduced.as<Bf16>()));
  const int fw = layout_->final_norm_weight();
  if (sh_.rmsnorm) {
    return RmsNormBackward(dfinal, x, W(fw), slot.final_rstd.as<float>(),
                           nullptr, dx, G(fw), nl, h, nullptr);
  }
  return LayerNormBackward(dfinal, x, W(fw), slot.final_mean.as<float>(),
                           slot.final_rstd.as<float>(), nullptr, dx, G(fw),
                           G(layout_->final_norm_bias()), nl, h, nullptr);
}

Status CudaGptModel::Forward(int c, int k, const std::vector<int32_t>& tokens,
                             const std::vector<int32_t>& targets,
                             int64_t first_sample) {
  Chunk& chunk = *chunks_[c];
  Slot& slot = *chunk.slots[k];
  const int64_t n = sh_.rows();
  slot.first_sample = first_sample;
  if (HasEmbedding(c)) {
    MESHTUNE_CHECK(static_cast<int64_t>(tokens.size()) == n);
    MESHTUNE_RETURN_IF_ERROR(slot.tokens_upload.Copy(
        tokens.data(), slot.tokens.data(), 4 * n, nullptr));
    MESHTUNE_RETURN_IF_ERROR(EmbeddingForward(slot));
  }
  const int64_t count = static_cast<int64_t>(chunk.layers.size());
  // The kept layers' activation sets, held until the backward ends.
  for (int64_t l = 0; l < count; ++l) {
    if (chunk.recompute[l]) continue;
    MESHTUNE_CHECK(!free_sets_.empty());  // sized for the schedule's peak
    slot.acts[l] = free_sets_.back();
    free_sets_.pop_back();
  }
  for (int64_t l = 0; l < count; ++l) {
    LayerActivations* a =
        chunk.recompute[l] ? pool_[l - chunk.seg_begin[l]].get() : slot.acts[l];
    MESHTUNE_RETURN_IF_ERROR(
        chunk.layers[l]->Forward(LayerInput(chunk, slot, l),
                                 LayerOutput(chunk, slot, l), a, first_sample));
    // Counted here, once per micro-batch: a recomputed forward repeats it.
    if (a->moe != nullptr && chunk.layers[l]->params().moe) {
      aux_loss_sum_ += a->moe->aux_loss;
    }
  }
  if (count == 0) {  // a stage of embedding or loss only
    MESHTUNE_RETURN_IF_ERROR(
        CopyDeviceToDevice(slot.x_out.as<Bf16>(), slot.x_in.as<Bf16>(),
                           kBf * ActivationCount(), nullptr));
  }
  if (!HasHead(c)) return Status::Ok();
  MESHTUNE_CHECK(static_cast<int64_t>(targets.size()) == n);
  MESHTUNE_RETURN_IF_ERROR(slot.targets_upload.Copy(
      targets.data(), slot.targets.data(), 4 * n, nullptr));
  return HeadForward(slot, slot.x_out.as<Bf16>());
}

Status CudaGptModel::Backward(
    int c, int k, float loss_scale,
    const std::function<Status(int64_t)>& on_layer_done) {
  Chunk& chunk = *chunks_[c];
  Slot& slot = *chunk.slots[k];
  const int64_t count = static_cast<int64_t>(chunk.layers.size());
  const int64_t fs = slot.first_sample;
  Bf16* dy = slot.output_grad.as<Bf16>();
  if (HasHead(c)) {
    dy = grad_a_.as<Bf16>();
    MESHTUNE_RETURN_IF_ERROR(
        HeadBackward(slot, slot.x_out.as<Bf16>(), loss_scale, dy));
  }
  Bf16* input_grad = slot.input_grad.as<Bf16>();
  for (int64_t l = count - 1; l >= 0; --l) {
    if (chunk.recompute[l] && l == chunk.seg_end[l] - 1) {
      // Full recompute: the segment's forward again from its saved input
      // (rewriting the later inputs, whose backward is done, with the same
      // values), then its backward.
      for (int64_t j = chunk.seg_begin[l]; j < chunk.seg_end[l]; ++j) {
        MESHTUNE_RETURN_IF_ERROR(chunk.layers[j]->Forward(
            LayerInput(chunk, slot, j), LayerOutput(chunk, slot, j),
            pool_[j - chunk.seg_begin[j]].get(), fs));
      }
    }
    const LayerActivations& a =
        chunk.recompute[l] ? *pool_[l - chunk.seg_begin[l]] : *slot.acts[l];
    Bf16* dx = l == 0 ? input_grad
                      : (dy == grad_a_.as<Bf16>() ? grad_b_.as<Bf16>()
                                                  : grad_a_.as<Bf16>());
    MESHTUNE_RETURN_IF_ERROR(
        chunk.layers[l]->Backward(LayerInput(chunk, slot, l), dy, dx, a, fs));
    if (on_layer_done) {
      MESHTUNE_RETURN_IF_ERROR(on_layer_done(chunk.first_layer + l));
    }
    dy = dx;  // this layer's input gradient feeds the one below
  }
  if (dy != input_grad) {  // a chunk without layers
    MESHTUNE_RETURN_IF_ERROR(
        CopyDeviceToDevice(input_grad, dy, kBf * ActivationCount(), nullptr));
  }
  for (LayerActivations*& a : slot.acts) {
    if (a == nullptr) continue;
    free_sets_.push_back(a);  // later work is ordered after this backward
    a = nullptr;
  }
  if (HasEmbedding(c)) return EmbeddingBackward(slot, input_grad);
  return Status::Ok();
}

void CudaGptModel::UpdateExpertBias(float rate, ProcessGroups* groups,
                                    ParamStore* store) {
  if (!config_.model.moe_router_enable_expert_bias) return;
  // tp, then dp·cp ("dp" holds the cp ranks too): every rank of the stage.
  const std::vector<Communicator*> sum_over = {groups->tp.get(),
                                               groups->dp.get()};
  size_t block = 0;
  for (const auto& chunk : chunks_) {
    for (const auto& layer : chunk->layers) {
      const LayerParams& p = layer->params();
      if (!p.moe) continue;
      CudaMoeBlock* moe = moe_blocks_[block++].get();
      if (p.expert_bias >= 0) {
        moe->UpdateExpertBias(sum_over, rate, store->param(p.expert_bias));
      }
    }
  }
}

std::vector<int> CudaGptModel::ExpertBiasTensors() const {
  std::vector<int> out;
  for (const auto& chunk : chunks_) {
    for (const auto& layer : chunk->layers) {
      if (layer->params().expert_bias >= 0) {
        out.push_back(layer->params().expert_bias);
      }
    }
  }
  return out;
}

double CudaGptModel::TakeAuxLossSum() {
  const double sum = aux_loss_sum_;
  aux_loss_sum_ = 0;
  return sum;
}

std::pair<int, int> CudaGptModel::LayerTensors(int64_t layer) const {
  for (const auto& chunk : chunks_) {
    const int64_t l = layer - chunk->first_layer;
    if (l < 0 || l >= static_cast<int64_t>(chunk->layers.size())) continue;
    const LayerParams& p = chunk->layers[l]->params();
    int lo = p.ln1_w, hi = p.ln1_w;
    for (int i : {p.ln1_w, p.ln1_b, p.qkv_w, p.qkv_b, p.proj_w, p.proj_b,
                  p.ln2_w, p.ln2_b, p.fc1_w, p.fc1_b, p.fc2_w, p.fc2_b}) {
      if (i < 0) continue;
      lo = std::min(lo, i);
      hi = std::max(hi, i);
    }
    return {lo, hi};
  }
  MESHTUNE_CHECK(false);
  return {-1, -1};
}

}  // namespace meshtune::engine::cuda
