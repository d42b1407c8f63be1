#include "engine/inference/generator.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

namespace meshtune::engine::inference {
namespace {

using search_spaces::PositionEmbedding;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

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

Status CheckGenerator(const TrainConfig& c, int64_t batch, int64_t capacity) {
  if (batch < 1 || capacity < 1) {
    return Status::InvalidArgument(
        "generation needs at least one sequence and one position (batch " +
            std::to_string(batch) + ", capacity " + std::to_string(capacity) +
            ")",
        "pass a prompt and --max-new-tokens >= 1");
  }
  MESHTUNE_RETURN_IF_ERROR(c.Validate());
  // A GPT model's learned table has seq_length rows. RoPE has no table, but
  // the model was built (and trained) for seq_length positions: the
  // longest context served, as vLLM's max_model_len defaults to
  // max_position_embeddings. It also bounds the cache a prompt can make the
  // generator allocate.
  if (capacity > c.model.seq_length) {
    const std::string seq = std::to_string(c.model.seq_length);
    const bool learned =
        c.model.position_embedding_type == PositionEmbedding::kLearnedAbsolute;
    return Status::InvalidArgument(
        "prompt plus new tokens is " + std::to_string(capacity) +
            " positions, " +
            (learned
                 ? "but model " + c.model.name + " has learned positions for " +
                       seq
                 : "beyond model " + c.model.name + "'s seq_length of " + seq),
        "shorten the prompt or lower --max-new-tokens");
  }
  return Status::Ok();
}

std::vector<float> UnshardLogits(const std::vector<float>& gathered,
                                 int64_t rows, int64_t vl, int64_t vocab) {
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
  const int64_t b = batch();
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
  StatusOr<std::vector<float>> logits = RunForward(tokens, t, which);
  if (logits.ok()) position_ += t;
  return logits;
}

StatusOr<Generation> Generator::Generate(
    const std::vector<std::vector<int32_t>>& prompts, int64_t max_new_tokens,
    const SamplingOptions& sampling, int32_t stop_token,
    int64_t cached_prefix) {
  const int64_t b = batch();
  if (static_cast<int64_t>(prompts.size()) != b || prompts[0].empty() ||
      max_new_tokens < 1) {
    return Status::InvalidArgument(
        "generation needs " + std::to_string(b) +
            " non-empty prompts and at least one new token",
        "pass the prompts the generator was created for");
  }
  const int64_t t = static_cast<int64_t>(prompts[0].size());
  if (cached_prefix < 0 || cached_prefix >= t) {
    return Status::InvalidArgument(
        "a cached prefix of " + std::to_string(cached_prefix) +
            " positions leaves none of the " + std::to_string(t) +
            "-token prompts to prefill",
        "cache fewer positions than the prompt has");
  }
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
  // Rows are sequence-major: the prefix is the first cached_prefix · b.
  const auto split = tokens.begin() + cached_prefix * b;
  if (cached_prefix > 0) {
    const StatusOr<std::vector<float>> cached =
        Forward(std::vector<int32_t>(tokens.begin(), split), cached_prefix,
                LogitsOf::kLast);
    if (!cached.ok()) return cached.status();
  }
  const std::vector<int32_t> rest(split, tokens.end());
  auto start = std::chrono::steady_clock::now();
  StatusOr<std::vector<float>> logits =
      Forward(rest, t - cached_prefix, LogitsOf::kLast);
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
