#include "engine/cuda/generator.h"

#include <algorithm>
#include <map>
#include <utility>

#include "engine/checkpoint.h"
#include "engine/cuda/comm/device_communicator.h"
#include "engine/cuda/kernels/linear.h"
#include "engine/cuda/kernels/ops.h"
#include "engine/cuda/moe/moe_block.h"
#include "engine/cuda/moe/token_dispatcher.h"
#include "engine/cuda/runtime/bf16.h"
#include "engine/cuda/runtime/device.h"
#include "engine/cuda/transformer_layer.h"
#include "engine/model_layout.h"
#include "engine/process_groups.h"
#include "engine/transformer_layer.h"

namespace meshtune::engine::cuda {
namespace {

using inference::LogitsOf;

// Elements between tensor starts: 256 bytes of bf16 (DeviceParams'
// kAlignElements), cuBLASLt's vectorized alignment.
constexpr int64_t kAlign = 128;

// Scratch of one forward, sized for `rows` rows (grown, never shrunk).
struct Scratch {
  int64_t rows = 0;
  DeviceBuffer x, normed, qkv, attn, out, fc1, act, logits, gathered;
  DeviceBuffer mean, rstd, tokens;
};

class CudaGenerator : public inference::Generator {
 public:
  CudaGenerator(const TrainConfig& config, Communicator* world, int64_t batch,
                int64_t capacity)
      : Generator(config, batch, capacity),
        world_(world),
        groups_(MakeProcessGroups(world, config.parallel)),
        layout_(config_, groups_.tp_rank(), 0, &store_, groups_.ep->rank(),
                groups_.etp->rank()),
        shape_(MakeLayerShape(config_)) {
    store_.Finalize();
  }

  Status Init() {
    if (world_->size() > 1) {
      MESHTUNE_RETURN_IF_ERROR(SetDevice(world_->rank() % DeviceCount()));
    }
    bool shared = false;
    MESHTUNE_ASSIGN_OR_RETURN(shared, WorldSharesDevices(world_));
    if (shape_.tp > 1) {
      MESHTUNE_ASSIGN_OR_RETURN(
          tp_, CreateDeviceCommunicator(groups_.tp.get(), shared));
    }
    if (config_.model.is_moe()) {
      MESHTUNE_RETURN_IF_ERROR(InitMoe(shared));
    }
    MESHTUNE_ASSIGN_OR_RETURN(gemm_, GemmContext::Create());
    offsets_.resize(store_.size());
    int64_t at = 0;
    for (int i = 0; i < store_.size(); ++i) {
      offsets_[i] = at;
      at += (store_.info(i).numel + kAlign - 1) / kAlign * kAlign;
    }
    MESHTUNE_ASSIGN_BUFFER(weights_, std::max<int64_t>(at, 1) * sizeof(Bf16));
    MESHTUNE_RETURN_IF_ERROR(weights_.Zero());
    const int64_t cache = config_.model.num_layers * batch() * shape_.groups *
                          capacity() * shape_.head_dim;
    cache_per_layer_ = batch() * shape_.groups * capacity() * shape_.head_dim;
    MESHTUNE_ASSIGN_BUFFER(keys_, std::max<int64_t>(cache, 1) * sizeof(Bf16));
    MESHTUNE_ASSIGN_BUFFER(values_, std::max<int64_t>(cache, 1) * sizeof(Bf16));
    return Status::Ok();
  }

  Status InitWeights() override {
    layout_.Init(&store_);
    return Upload();
  }

  Status LoadCheckpoint(const std::string& dir) override {
    MESHTUNE_RETURN_IF_ERROR(
        LoadCheckpointParams(dir, config_.model.name, store_, *groups_.world));
    return Upload();
  }

  const ParamStore& params() const override { return store_; }
  int64_t kv_cache_bytes() const override {
    return static_cast<int64_t>(keys_.size_bytes() + values_.size_bytes());
  }

 protected:
  StatusOr<std::vector<float>> RunForward(const std::vector<int32_t>& tokens,
                                          int64_t t, LogitsOf which) override {
    const int64_t b = batch(), n = t * b, h = shape_.h;
    MESHTUNE_RETURN_IF_ERROR(Reserve(n));
    Bf16* x = s_.x.as<Bf16>();
    MESHTUNE_RETURN_IF_ERROR(
        s_.tokens.CopyFromHost(tokens.data(), tokens.size() * sizeof(int32_t)));
    MESHTUNE_RETURN_IF_ERROR(EmbeddingForward(
        s_.tokens.as<int32_t>(), W(layout_.word_embedding()), x, n, h,
        layout_.vocab_start(), layout_.vocab_local(), nullptr));
    MESHTUNE_RETURN_IF_ERROR(AllReduce(x, n * h));
    if (layout_.position_embedding() >= 0) {
      MESHTUNE_RETURN_IF_ERROR(PositionEmbeddingForward(
          W(layout_.position_embedding()), x, t, b, h, position(), nullptr));
    }
    for (int64_t l = 0; l < config_.model.num_layers; ++l) {
      MESHTUNE_RETURN_IF_ERROR(Layer(l, t));
    }
    const int64_t rows = which == LogitsOf::kAll ? n : b;
    return Head(x + (n - rows) * h, rows);
  }

 private:
  const Bf16* W(int i) const {
    return i >= 0 ? weights_.as<Bf16>() + offsets_[i] : nullptr;
  }
  // The bias of a row-parallel linear, added before the tp sum by rank 0
  // only, so the sum holds it once.
  const Bf16* RowBias(int i) const {
    return groups_.tp_rank() == 0 ? W(i) : nullptr;
  }

  Status Upload() {
    std::vector<Bf16> host(weights_.size_bytes() / sizeof(Bf16),
                           FloatToBf16(0.0f));
    for (int i = 0; i < store_.size(); ++i) {
      const float* p = store_.param(i);
      for (int64_t e = 0; e < store_.info(i).numel; ++e) {
        host[offsets_[i] + e] = FloatToBf16(p[e]);
      }
    }
    return weights_.CopyFromHost(host.data(), weights_.size_bytes());
  }

  Status Reserve(int64_t rows) {
    if (rows <= s_.rows) return Status::Ok();
    const int64_t h = shape_.h, vl = layout_.vocab_local();
    auto bf16 = [&](DeviceBuffer* buf, int64_t width) -> Status {
      MESHTUNE_ASSIGN_BUFFER(*buf, rows * width * sizeof(Bf16));
      return Status::Ok();
    };
    MESHTUNE_RETURN_IF_ERROR(bf16(&s_.x, h));
    MESHTUNE_RETURN_IF_ERROR(bf16(&s_.normed, h));
    MESHTUNE_RETURN_IF_ERROR(bf16(&s_.qkv, shape_.qkv_width()));
    MESHTUNE_RETURN_IF_ERROR(bf16(&s_.attn, shape_.heads * shape_.head_dim));
    MESHTUNE_RETURN_IF_ERROR(bf16(&s_.out, h));
    MESHTUNE_RETURN_IF_ERROR(bf16(&s_.fc1, shape_.fc1_width()));
    MESHTUNE_RETURN_IF_ERROR(bf16(&s_.act, shape_.ffn));
    MESHTUNE_RETURN_IF_ERROR(bf16(&s_.logits, vl));
    MESHTUNE_RETURN_IF_ERROR(bf16(&s_.gathered, vl * shape_.tp));
    MESHTUNE_ASSIGN_BUFFER(s_.mean, rows * sizeof(float));
    MESHTUNE_ASSIGN_BUFFER(s_.rstd, rows * sizeof(float));
    MESHTUNE_ASSIGN_BUFFER(s_.tokens, rows * sizeof(int32_t));
    s_.rows = rows;
    return Status::Ok();
  }

  // MoE: the rows travel over ep and etp (device communicators for groups
  // of more than one, as the trainer's), through one dispatcher shared by
  // the layers.
  Status InitMoe(bool shared) {
    if (groups_.ep->size() > 1) {
      MESHTUNE_ASSIGN_OR_RETURN(
          ep_, CreateDeviceCommunicator(groups_.ep.get(), shared));
    }
    if (groups_.etp->size() > 1) {
      MESHTUNE_ASSIGN_OR_RETURN(
          etp_, CreateDeviceCommunicator(groups_.etp.get(), shared));
    }
    dispatcher_ = std::make_unique<DeviceTokenDispatcher>(
        ep_.get(), etp_.get(), groups_.ep->size(), groups_.etp->size(),
        groups_.etp->rank(), config_.model.num_experts, shape_.h);
    return Status::Ok();
  }

  // Layer `layer`'s MoE block for forwards of `padded` rows (its shape
  // holds them; prefill and decode each have theirs), made on first use.
  CudaMoeBlock* MoeBlockFor(int64_t layer, const LayerParams& p,
                            int64_t padded) {
    std::vector<std::unique_ptr<CudaMoeBlock>>& blocks = moe_blocks_[padded];
    blocks.resize(config_.model.num_layers);
    std::unique_ptr<CudaMoeBlock>& block = blocks[layer];
    if (!block) {
      moe::MoeShape sh = MakeMoeShape(config_);
      sh.n = padded;
      sh.nl = padded / shape_.tp;
      const CudaMoeComms comms{groups_.tp_cp.get(), groups_.ep.get(),
                               groups_.etp.get(),   tp_.get(),
                               ep_.get(),           etp_.get()};
      block = std::make_unique<CudaMoeBlock>(sh, comms, gemm_.get(),
                                             dispatcher_.get());
      if (p.expert_bias >= 0)
        block->set_expert_bias(store_.param(p.expert_bias));
    }
    return block.get();
  }

  // out[rows, h] = MoE(normed[rows, h]), as the CPU generator runs it:
  // with tp > 1 the block takes sequence-parallel rows (Megatron's MoE
  // with tp), rank r rows [r·local, (r + 1)·local) of the rows padded to a
  // multiple of tp, and the outputs are gathered over tp.
  Status MoeMlp(int64_t layer, const LayerParams& p, int64_t rows,
                const Bf16* normed, Bf16* out) {
    const int64_t h = shape_.h, tp = shape_.tp;
    const int64_t padded = (rows + tp - 1) / tp * tp, local = padded / tp;
    const size_t row_bytes = static_cast<size_t>(h) * sizeof(Bf16);
    MESHTUNE_RETURN_IF_ERROR(Grow(&moe_x_, local * row_bytes));
    MESHTUNE_RETURN_IF_ERROR(Grow(&moe_y_, local * row_bytes));
    MESHTUNE_RETURN_IF_ERROR(moe_x_.Zero());
    const int64_t first = groups_.tp_rank() * local;
    const int64_t mine = std::clamp<int64_t>(rows - first, 0, local);
    if (mine > 0) {
      MESHTUNE_RETURN_IF_ERROR(CopyDeviceToDevice(
          moe_x_.as<Bf16>(), normed + first * h, mine * row_bytes, nullptr));
    }
    MESHTUNE_RETURN_IF_ERROR(
        MoeBlockFor(layer, p, padded)
            ->Forward(moe_x_.as<Bf16>(),
                      CudaMoeWeightsOf(p, [this](int i) { return W(i); }),
                      moe_y_.as<Bf16>(), &moe_acts_));
    const Bf16* all = moe_y_.as<Bf16>();
    if (tp > 1) {
      MESHTUNE_RETURN_IF_ERROR(Grow(&moe_full_, padded * row_bytes));
      MESHTUNE_RETURN_IF_ERROR(tp_->AllGather(
          moe_y_.as<Bf16>(), moe_full_.as<Bf16>(), local * h, nullptr));
      all = moe_full_.as<Bf16>();
    }
    return CopyDeviceToDevice(out, all, rows * row_bytes, nullptr);
  }

  // `buf` of at least `bytes` (reallocated when smaller).
  static Status Grow(DeviceBuffer* buf, size_t bytes) {
    if (buf->size_bytes() >= bytes) return Status::Ok();
    MESHTUNE_ASSIGN_BUFFER(*buf, bytes);
    return Status::Ok();
  }

  Status AllReduce(Bf16* data, int64_t count) {
    return tp_ ? tp_->AllReduceSum(data, count, nullptr) : Status::Ok();
  }

  Status Norm(const Bf16* x, int w, int b, int64_t rows, Bf16* out) {
    if (shape_.rmsnorm) {
      return RmsNormForward(x, nullptr, nullptr, W(w), out, s_.rstd.as<float>(),
                            rows, shape_.h, shape_.eps, nullptr);
    }
    return LayerNormForward(x, nullptr, nullptr, W(w), W(b), out,
                            s_.mean.as<float>(), s_.rstd.as<float>(), rows,
                            shape_.h, shape_.eps, nullptr);
  }

  Status Layer(int64_t layer, int64_t t) {
    const LayerParams& p = layout_.LayerParamsOf(0, layer);
    const int64_t b = batch(), n = t * b, h = shape_.h, d = shape_.head_dim;
    const int64_t qw = shape_.qkv_width(), aw = shape_.heads * d;
    Bf16 *x = s_.x.as<Bf16>(), *normed = s_.normed.as<Bf16>();
    Bf16 *qkv = s_.qkv.as<Bf16>(), *attn = s_.attn.as<Bf16>();
    Bf16* out = s_.out.as<Bf16>();
    Bf16* k_cache = keys_.as<Bf16>() + layer * cache_per_layer_;
    Bf16* v_cache = values_.as<Bf16>() + layer * cache_per_layer_;
    // Attention: x += Proj(Attn(QKV(Norm1(x)))).
    MESHTUNE_RETURN_IF_ERROR(Norm(x, p.ln1_w, p.ln1_b, n, normed));
    MESHTUNE_RETURN_IF_ERROR(gemm_->LinearForward(
        normed, W(p.qkv_w), W(p.qkv_b), qkv, n, h, qw, nullptr));
    if (shape_.rope) {
      MESHTUNE_RETURN_IF_ERROR(RopeForward(qkv, t, b, shape_.heads,
                                           shape_.groups, d, shape_.rope_base,
                                           position(), nullptr));
    }
    MESHTUNE_RETURN_IF_ERROR(
        KvCacheAppend(qkv, t, b, shape_.heads, shape_.groups, d, position(),
                      capacity(), k_cache, v_cache, nullptr));
    MESHTUNE_RETURN_IF_ERROR(AttentionCachedForward(
        qkv, k_cache, v_cache, t, b, shape_.heads, shape_.groups, d, position(),
        capacity(), attn, nullptr));
    MESHTUNE_RETURN_IF_ERROR(gemm_->LinearForward(
        attn, W(p.proj_w), RowBias(p.proj_b), out, n, aw, h, nullptr));
    MESHTUNE_RETURN_IF_ERROR(AllReduce(out, n * h));
    MESHTUNE_RETURN_IF_ERROR(Add(out, x, n * h, nullptr));
    // MLP: x += FC2(Act(FC1(Norm2(x)))), or the layer's MoE block.
    MESHTUNE_RETURN_IF_ERROR(Norm(x, p.ln2_w, p.ln2_b, n, normed));
    if (p.moe) {
      MESHTUNE_RETURN_IF_ERROR(MoeMlp(layer, p, n, normed, out));
      return Add(out, x, n * h, nullptr);
    }
    Bf16 *fc1 = s_.fc1.as<Bf16>(), *act = s_.act.as<Bf16>();
    MESHTUNE_RETURN_IF_ERROR(gemm_->LinearForward(normed, W(p.fc1_w),
                                                  W(p.fc1_b), fc1, n, h,
                                                  shape_.fc1_width(), nullptr));
    if (shape_.swiglu) {
      MESHTUNE_RETURN_IF_ERROR(SwigluForward(fc1, act, n, shape_.ffn, nullptr));
    } else {
      MESHTUNE_RETURN_IF_ERROR(GeluForward(fc1, act, n * shape_.ffn, nullptr));
    }
    MESHTUNE_RETURN_IF_ERROR(gemm_->LinearForward(
        act, W(p.fc2_w), RowBias(p.fc2_b), out, n, shape_.ffn, h, nullptr));
    MESHTUNE_RETURN_IF_ERROR(AllReduce(out, n * h));
    return Add(out, x, n * h, nullptr);
  }

  StatusOr<std::vector<float>> Head(const Bf16* x, int64_t rows) {
    const int64_t h = shape_.h, vl = layout_.vocab_local(), tp = shape_.tp;
    Bf16 *normed = s_.normed.as<Bf16>(), *logits = s_.logits.as<Bf16>();
    MESHTUNE_RETURN_IF_ERROR(Norm(x, layout_.final_norm_weight(),
                                  layout_.final_norm_bias(), rows, normed));
    MESHTUNE_RETURN_IF_ERROR(
        gemm_->LinearForward(normed, W(layout_.output_weight()), nullptr,
                             logits, rows, h, vl, nullptr));
    const Bf16* all = logits;
    if (tp_) {
      MESHTUNE_RETURN_IF_ERROR(
          tp_->AllGather(logits, s_.gathered.as<Bf16>(), rows * vl, nullptr));
      all = s_.gathered.as<Bf16>();
    }
    std::vector<Bf16> host(tp * rows * vl);
    MESHTUNE_RETURN_IF_ERROR(
        CopyDeviceToHost(host.data(), all, host.size() * sizeof(Bf16)));
    return inference::UnshardLogits(ToFloat(host), rows, vl,
                                    config_.model.vocab_size);
  }

  Communicator* world_;
  ProcessGroups groups_;
  ParamStore store_;
  ModelLayout layout_;
  LayerShape shape_;
  std::unique_ptr<DeviceCommunicator> tp_, ep_, etp_;
  std::unique_ptr<GemmContext> gemm_;
  // MoE: the dispatcher, each layer's block per padded row count (null for
  // a dense layer), the routing of the forward running, and the block's
  // rows in [local, h] and out gathered [padded, h], bf16.
  std::unique_ptr<DeviceTokenDispatcher> dispatcher_;
  std::map<int64_t, std::vector<std::unique_ptr<CudaMoeBlock>>> moe_blocks_;
  MoeActivations moe_acts_;
  DeviceBuffer moe_x_, moe_y_, moe_full_;
  std::vector<int64_t> offsets_;  // device offset of each tensor
  DeviceBuffer weights_;          // bf16, every tensor at offsets_
  // [layers, b, groups, capacity, d] bf16 each.
  DeviceBuffer keys_, values_;
  int64_t cache_per_layer_ = 0;
  Scratch s_;
};

}  // namespace

Status CheckCudaGenerator(const TrainConfig& config) {
  const int64_t d =
      config.model.kv_channels > 0
          ? config.model.kv_channels
          : config.model.hidden_size / config.model.num_attention_heads;
  if (d > 256) {
    return Status::Unimplemented(
        "the CUDA generator's attention takes head_dim up to 256, model " +
            config.model.name + " has " + std::to_string(d),
        "generate with the cpu backend");
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<inference::Generator>> CreateCudaGenerator(
    const TrainConfig& config, Communicator* world, int64_t batch,
    int64_t capacity) {
  const TrainConfig c = inference::InferenceConfig(config, world->size());
  MESHTUNE_RETURN_IF_ERROR(inference::CheckGenerator(c, batch, capacity));
  MESHTUNE_RETURN_IF_ERROR(CheckCudaGenerator(c));
  MESHTUNE_RETURN_IF_ERROR(RequireDevice());
  auto gen = std::make_unique<CudaGenerator>(c, world, batch, capacity);
  MESHTUNE_RETURN_IF_ERROR(gen->Init());
  return std::unique_ptr<inference::Generator>(std::move(gen));
}

}  // namespace meshtune::engine::cuda
