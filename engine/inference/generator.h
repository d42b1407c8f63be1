// Generator: inference on the CPU engine. One rank's share of a GPT or
// LLaMA-style decoder (dense or MoE) under tensor parallelism, with a KV
// cache: a prefill runs the prompt's positions through every layer and
// caches their keys and values; each decode step runs one new position per
// sequence against the cache. The weights are the training model's: the
// same parameter names and TP splits (engine/model_layout.h), initialized
// as training initializes them or loaded from any `tune train --save`
// checkpoint (resharded to this tp).
//
// Layout: tp = the world's size; pp = cp = dp = ep = 1. Attention and the
// dense MLP are Megatron's column/row-parallel pairs with an all-reduce
// after each row-parallel linear (no sequence parallelism: inference rows
// are few). MoE layers run engine/moe/'s block as training does with tp > 1
// (sequence-parallel rows, experts split over etp = tp): their input rows
// are split over tp (padded with zero rows to a multiple of tp) and the
// output all-gathered; routing is dropless (capacity ignored, as vLLM and
// SGLang route) and adds no aux loss.
//
// Rows are sequence-major (engine/cpu/ops.h): row ti·b + bi is position
// past + ti of sequence bi. Every sequence of the batch advances together
// (prompts of one length). Logits come back gathered over tp and unpadded,
// [rows, vocab_size], identical on every rank.
//
// The check (tests/engine/inference/generator_test.cc): a prefill's logits
// equal the training forward's on the same tokens, and a decode step's equal
// a prefill of the longer sequence (fp32, 1e-5), for tp 1 and 2.
#ifndef MESHTUNE_ENGINE_INFERENCE_GENERATOR_H_
#define MESHTUNE_ENGINE_INFERENCE_GENERATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/inference/kv_cache.h"
#include "engine/inference/sampling.h"
#include "engine/model_layout.h"
#include "engine/param_store.h"
#include "engine/process_groups.h"
#include "engine/train_config.h"
#include "search_spaces/status.h"

namespace meshtune::engine::inference {

// Which rows' logits Forward returns.
enum class LogitsOf {
  kLast,  // the last new position of each sequence: [b, vocab]
  kAll,   // every new position: [t·b, vocab]
};

// What Generate produced and how long it took (this rank's wall clock).
struct Generation {
  // [b][new tokens]: the sampled continuation of each prompt.
  std::vector<std::vector<int32_t>> tokens;
  // Time to first token: the prefill and the first token's sampling.
  double prefill_s = 0;
  // Each later decode step (one token per sequence), in order.
  std::vector<double> decode_step_s;
};

class Generator {
 public:
  // This rank's share of `config.model` (with its norm epsilon, rotary
  // base and seed; the parallel config, batch and dropout are replaced) on
  // the ranks of `world` (not owned; collective over it), for `batch`
  // sequences of up to `capacity` positions (prompt + generated).
  // InvalidArgument: batch or capacity < 1, capacity above the learned
  // position table (model seq_length) for GPT models, a tp that does not
  // divide the heads, groups or FFN (TrainConfig::Validate's message);
  // Unimplemented: model features the engine does not build.
  static StatusOr<std::unique_ptr<Generator>> Create(const TrainConfig& config,
                                                     Communicator* world,
                                                     int64_t batch,
                                                     int64_t capacity);

  // The weights as training initializes them (engine/param_init.h).
  void InitWeights();
  // Collective. The newest checkpoint under `dir` (any saved layout).
  Status LoadCheckpoint(const std::string& dir);

  const ParamStore& params() const { return store_; }
  const TrainConfig& config() const { return config_; }
  int64_t batch() const { return cache_.batch(); }
  int64_t capacity() const { return cache_.capacity(); }
  int64_t position() const { return cache_.length(); }
  int64_t kv_cache_bytes() const { return cache_.bytes(); }

  // Forgets the cached positions (a new batch of prompts).
  void Reset() { cache_.Reset(); }
  // Collective. Runs tokens[t·b] (sequence-major) at positions
  // [position(), position() + t) and caches them; returns the logits of
  // `which` rows. InvalidArgument when the cache cannot hold t more
  // positions or a token is outside the vocabulary.
  StatusOr<std::vector<float>> Forward(const std::vector<int32_t>& tokens,
                                       int64_t t, LogitsOf which);
  // Collective. Resets, prefills `prompts` ([b][t], one length) and
  // decodes until each sequence has `max_new_tokens` new tokens, or until
  // every sequence has emitted `stop_token` (>= 0; the end-of-document
  // stop of Megatron's and vLLM's generation; a finished sequence keeps
  // producing tokens after it while others run, and they are returned).
  StatusOr<Generation> Generate(
      const std::vector<std::vector<int32_t>>& prompts, int64_t max_new_tokens,
      const SamplingOptions& sampling, int32_t stop_token = -1);

 private:
  Generator(const TrainConfig& config, Communicator* world, int64_t batch,
            int64_t capacity);
  void Embed(const int32_t* tokens, int64_t t, float* x);
  // One layer, x[t·b, h] in place.
  void Layer(int64_t layer, int64_t t, std::vector<float>* x);
  // The MLP (dense or MoE) of `layer` on normed[t·b, h] -> out[t·b, h].
  void Mlp(const LayerParams& p, int64_t rows, const float* normed, float* out);
  void MoeMlp(const LayerParams& p, int64_t rows, const float* normed,
              float* out);
  void Norm(const float* x, int w, int b, int64_t rows, float* out) const;
  // Final norm, output layer and the tp gather of rows x[rows, h].
  std::vector<float> Head(const float* x, int64_t rows);
  void AllReduceTp(float* x, int64_t count);

  TrainConfig config_;
  ProcessGroups groups_;
  ParamStore store_;
  ModelLayout layout_;
  LayerShape shape_;  // per-rank heads, groups, ffn (tp); s, b unused
  KvCache cache_;
};

}  // namespace meshtune::engine::inference

#endif  // MESHTUNE_ENGINE_INFERENCE_GENERATOR_H_
