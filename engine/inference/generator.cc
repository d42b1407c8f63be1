#include "engine/inference/generator.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "engine/checkpoint.h"
#include "engine/cpu/attention_cached.h"
#include "engine/cpu/ops.h"
#include "engine/moe/moe_block.h"

namespace meshtune::engine::inference {
namespace {

using search_spaces::PositionEmbedding;

// The training config of the inference layout (generator.h): tp ranks, no
// other parallelism, one sequence per "micro-batch", no dropout, dropless
// MoE routing without an aux loss.
TrainConfig InferenceConfig(const TrainConfig& in, int64_t tp) {
  TrainConfig c = in;
  search_spaces::ParallelConfig p;
  p.tp = tp;
  // Megatron requires SP for MoE with tp > 1; the MoE block runs that way.
  p.sp = c.model.is_moe() && tp > 1;
  c.parallel = p;
  c.global_batch_size = 1;
  c.train_iters = 1;  // Validate checks a training run's fields too
  c.hidden_dropout = 0;
  c.attention_dropout = 0;
  c.model.moe_expert_capacity_factor = 0;
  c.moe_aux_loss_coeff = 0;
  c.save_dir.clear();
  c.load_dir.clear();
  return c;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

StatusOr<std::unique_ptr<Generator>> Generator::Create(
    const TrainConfig& config, Communicator* world, int64_t batch,
    int64_t capacity) {
  if (batch < 1 || capacity < 1) {
    return Status::InvalidArgument(
        "generation needs at least one sequence and one position (batch " +
            std::to_string(batch) + ", capacity " + std::to_string(capacity) +
            ")",
        "pass a prompt and --max-new-tokens >= 1");
  }
  const TrainConfig c = InferenceConfig(config, world->size());
  MESHTUNE_RETURN_IF_ERROR(c.Validate());
  if (c.model.position_embedding_type == PositionEmbedding::kLearnedAbsolute &&
      capacity > c.model.seq_length) {
    return Status::InvalidArgument(
        "prompt plus new tokens is " + std::to_string(capacity) +
            " positions, but model " + c.model.name +
            " has learned positions for " + std::to_string(c.model.seq_length),
        "shorten the prompt or lower --max-new-tokens");
  }
  return std::unique_ptr<Generator>(new Generator(c, world, batch, capacity));
}

Generator::Generator(const TrainConfig& config, Communicator* world,
                     int64_t batch, int64_t capacity)
    : config_(config),
      groups_(MakeProcessGroups(world, config.parallel)),
      layout_(config_, groups_.tp_rank(), 0, &store_, groups_.ep->rank(),
              groups_.etp->rank()),
      shape_(MakeLayerShape(config_)),
      cache_(config_.model.num_layers, batch, shape_.groups, capacity,
             shape_.head_dim) {
  store_.Finalize();
}

void Generator::InitWeights() { layout_.Init(&store_); }

Status Generator::LoadCheckpoint(const std::string& dir) {
  return LoadCheckpointParams(dir, config_.model.name, store_, *groups_.world);
}

void Generator::AllReduceTp(float* x, int64_t count) {
  if (shape_.tp > 1) groups_.tp->AllReduceSum(x, count);
}

void Generator::Norm(const float* x, int w, int b, int64_t rows,
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

void Generator::Embed(const int32_t* tokens, int64_t t, float* x) {
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

void Generator::Layer(int64_t layer, int64_t t, std::vector<float>* x) {
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

void Generator::Mlp(const LayerParams& p, int64_t rows, const float* normed,
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

void Generator::MoeMlp(const LayerParams& p, int64_t rows, const float* normed,
                       float* out) {
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

std::vector<float> Generator::Head(const float* x, int64_t rows) {
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
  std::vector<float> logits(rows * vocab);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t v = 0; v < vocab; ++v) {
      logits[r * vocab + v] = gathered[(v / vl) * rows * vl + r * vl + v % vl];
    }
  }
  return logits;
}

StatusOr<std::vector<float>> Generator::Forward(
    const std::vector<int32_t>& tokens, int64_t t, LogitsOf which) {
  const int64_t b = batch(), h = shape_.h;
  if (t < 1 || static_cast<int64_t>(tokens.size()) != t * b) {
    return Status::InvalidArgument(
        "a forward of " + std::to_string(t) + " positions for " +
            std::to_string(b) + " sequences needs " + std::to_string(t * b) +
            " tokens, got " + std::to_string(tokens.size()),
        "pass one token per sequence and position, sequence-major");
  }
  if (position() + t > capacity()) {
    return Status::InvalidArgument(
        "the KV cache holds " + std::to_string(capacity()) + " positions; " +
            std::to_string(position()) + " are filled and " +
            std::to_string(t) + " more do not fit",
        "create the generator with a larger capacity (prompt + new tokens)");
  }
  for (int32_t id : tokens) {
    if (id < 0 || id >= config_.model.vocab_size) {
      return Status::InvalidArgument(
          "token id " + std::to_string(id) + " is outside model " +
              config_.model.name + "'s vocabulary of " +
              std::to_string(config_.model.vocab_size),
          "encode the prompt with the tokenizer the model was trained with");
    }
  }
  std::vector<float> x(t * b * h);
  Embed(tokens.data(), t, x.data());
  for (int64_t l = 0; l < config_.model.num_layers; ++l) Layer(l, t, &x);
  cache_.Advance(t);
  if (which == LogitsOf::kAll) return Head(x.data(), t * b);
  return Head(x.data() + (t - 1) * b * h, b);  // last position's rows
}

StatusOr<Generation> Generator::Generate(
    const std::vector<std::vector<int32_t>>& prompts, int64_t max_new_tokens,
    const SamplingOptions& sampling, int32_t stop_token) {
  const int64_t b = batch();
  if (static_cast<int64_t>(prompts.size()) != b || prompts[0].empty() ||
      max_new_tokens < 1) {
    return Status::InvalidArgument(
        "generation needs " + std::to_string(b) +
            " non-empty prompts and at least one new token",
        "pass the prompts the generator was created for");
  }
  const int64_t t = static_cast<int64_t>(prompts[0].size());
  std::vector<int32_t> tokens(t * b);
  for (int64_t bi = 0; bi < b; ++bi) {
    if (static_cast<int64_t>(prompts[bi].size()) != t) {
      return Status::InvalidArgument(
          "the prompts of one batch must have one length (" +
              std::to_string(t) + " and " + std::to_string(prompts[bi].size()) +
              " tokens)",
          "generate them in separate batches");
    }
    for (int64_t ti = 0; ti < t; ++ti) tokens[ti * b + bi] = prompts[bi][ti];
  }
  Reset();
  Generation g;
  g.tokens.assign(b, {});
  const int64_t vocab = config_.model.vocab_size;
  std::vector<bool> stopped(b, false);
  auto start = std::chrono::steady_clock::now();
  StatusOr<std::vector<float>> logits = Forward(tokens, t, LogitsOf::kLast);
  for (int64_t step = 0;; ++step) {
    if (!logits.ok()) return logits.status();
    const std::vector<int32_t> next =
        SampleTokens(*logits, b, vocab, sampling, step);
    for (int64_t bi = 0; bi < b; ++bi) {
      g.tokens[bi].push_back(next[bi]);
      if (next[bi] == stop_token) stopped[bi] = true;
    }
    if (step == 0) {
      g.prefill_s = SecondsSince(start);
    } else {
      g.decode_step_s.push_back(SecondsSince(start));
    }
    if (step + 1 == max_new_tokens ||
        std::all_of(stopped.begin(), stopped.end(), [](bool s) { return s; })) {
      break;
    }
    start = std::chrono::steady_clock::now();
    logits = Forward(next, 1, LogitsOf::kLast);
  }
  return g;
}

}  // namespace meshtune::engine::inference
