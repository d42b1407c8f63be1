// Engine kernel cases and their sweep (profiler/engine_ops.h).
#include "profiler/engine_ops.h"

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "profiler/report.h"
#include "profiler/stats.h"

namespace meshtune::profiler {

using search_spaces::Activation;
using search_spaces::Normalization;
using search_spaces::PositionEmbedding;

StatusOr<Sample> ProfilerBackend::TimeEngineOp(const EngineOpCase& c,
                                               bool /*backward*/,
                                               int /*warmup*/, int /*reps*/) {
  return Status::Unimplemented(
      "the " + Name() + " backend cannot time the engine kernel '" + c.op + "'",
      "build the engine's kernels for this backend, or profile without "
      "--model");
}

std::vector<EngineOpCase> TransformerEngineOps(
    const search_spaces::ModelSpec& model, int64_t tp, int64_t tokens) {
  tp = std::max<int64_t>(1, tp);
  tokens = std::max<int64_t>(1, tokens);
  const int64_t h = model.hidden_size;
  const int64_t heads = std::max<int64_t>(1, model.num_attention_heads);
  const int64_t groups = std::max<int64_t>(1, model.num_query_groups);
  const int64_t d = model.kv_channels > 0 ? model.kv_channels : h / heads;
  const int64_t f =
      model.is_moe() ? model.expert_ffn_hidden_size() : model.ffn_hidden_size;
  const int64_t seq =
      model.seq_length > 0 ? std::min(tokens, model.seq_length) : tokens;
  const int64_t batch = std::max<int64_t>(1, tokens / seq);
  const int64_t rows = seq * batch;
  auto per_rank = [tp](int64_t x) { return std::max<int64_t>(1, x / tp); };
  // Replicated activations are split over the tp ranks by SP.
  const int64_t sp_rows = per_rank(rows);
  const bool gpt = model.normalization == Normalization::kLayerNorm;
  const std::string tag = "tp" + std::to_string(tp) + ".";

  std::vector<EngineOpCase> cases;
  auto add = [&](const std::string& name, const std::string& op,
                 EngineKernel kernel, int64_t n, int64_t width) {
    EngineOpCase c;
    c.label = tag + name;
    c.op = op;
    c.kernel = kernel;
    c.rows = n;
    c.width = width;
    c.seq = seq;
    c.batch = batch;
    c.heads = per_rank(heads);
    c.groups = per_rank(groups);
    c.head_dim = d;
    c.elements = n * width;
    cases.push_back(c);
    return &cases.back();
  };
  add(gpt ? "layernorm" : "rmsnorm", "elem:norm",
      gpt ? EngineKernel::kLayerNorm : EngineKernel::kRmsNorm, sp_rows, h);
  add(gpt ? "bias_dropout_add" : "residual_add",
      gpt ? "elem:bias_dropout_add" : "elem:residual_add",
      EngineKernel::kResidualAdd, sp_rows, h);
  if (model.activation == Activation::kSwiglu) {
    add("swiglu", "elem:swiglu", EngineKernel::kSwiglu, rows, per_rank(f));
  } else {
    add("gelu", "elem:gelu", EngineKernel::kGelu, rows, per_rank(f));
  }
  if (model.position_embedding_type == PositionEmbedding::kRope) {
    // Rotated elements: the local q and k heads of every token.
    EngineOpCase* rope = add("rope", "elem:rope", EngineKernel::kRope, rows,
                             (per_rank(heads) + per_rank(groups)) * d);
    rope->elements = rows * rope->width;
  }
  add("cross_entropy", "elem:cross_entropy", EngineKernel::kCrossEntropy, rows,
      per_rank(model.vocab_size));
  EngineOpCase* emb =
      add("embedding", "elem:embedding", EngineKernel::kEmbedding, rows, h);
  emb->learned_positions =
      model.position_embedding_type == PositionEmbedding::kLearnedAbsolute;
  EngineOpCase* attn = add("attention", "attn", EngineKernel::kAttention, rows,
                           per_rank(heads) * d);
  attn->elements = batch * per_rank(heads);
  return cases;
}

StatusOr<std::vector<results::Measurement>> RunEngineOpSweep(
    ProfilerBackend& backend, const std::vector<EngineOpCase>& cases,
    const std::string& dtype, int warmup, int reps,
    const std::string& hardware_id, std::ostream& out, std::ostream& progress) {
  std::vector<const EngineOpCase*> unique;
  std::set<std::tuple<std::string, int64_t, int64_t, int64_t>> seen;
  for (const EngineOpCase& c : cases) {
    if (seen.insert({c.op, c.elements, c.seq, c.head_dim}).second) {
      unique.push_back(&c);
    }
  }
  std::vector<results::Measurement> rows;
  const int64_t total = 2 * static_cast<int64_t>(unique.size());
  int64_t i = 0;
  for (const EngineOpCase* c : unique) {
    for (bool backward : {false, true}) {
      const std::string op = c->op + (backward ? ":bwd" : ":fwd");
      PrintProgress(progress, ++i, total, op + " " + c->label);
      StatusOr<Sample> sample =
          backend.TimeEngineOp(*c, backward, warmup, reps);
      if (!sample.ok()) return sample.status();
      const TimingStats stats = Summarize(sample->times_s);
      PrintEngineOpRow(out, *c, backward, stats);
      results::Measurement row;
      row.hardware_id = hardware_id;
      row.op = op;
      row.dtype = dtype;
      row.m = c->elements;
      if (c->kernel == EngineKernel::kAttention) {
        row.n = c->seq;
        row.k = c->head_dim;
      }
      row.samples = stats.samples;
      row.median_s = stats.median_s;
      row.min_s = stats.min_s;
      row.p99_s = stats.p99_s;
      row.cv = stats.cv;
      row.timer = sample->timer;
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace meshtune::profiler
