// Generator: inference on the engine. One rank's share of a GPT or
// LLaMA-style decoder under tensor parallelism, with a KV cache: a prefill runs
// the prompt's positions through every layer and caches their keys and values;
// each decode step runs one new position per sequence against the cache. The
// weights are the training model's: the same parameter names and TP splits
// (engine/model_layout.h), initialized as training initializes them or loaded
// from any `tune train --save` checkpoint (resharded to this tp).
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
// The check (tests/engine/inference/generator_test.cc): the CPU generator's
// prefill logits equal the training forward's on the same tokens, and a
// decode step's equal a prefill of the longer sequence (fp32, 1e-5), for
// tp 1 and 2; the CUDA generator's equal the CPU's within bf16
// (tests/engine/cuda/generator_test.cc).
#ifndef MESHTUNE_ENGINE_INFERENCE_GENERATOR_H_
#define MESHTUNE_ENGINE_INFERENCE_GENERATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/inference/sampling.h"
#include "engine/param_store.h"
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
  // Time to first token: the prefill (of the positions after a cached
  // prefix) and the first token's sampling.
  double prefill_s = 0;
  // Each later decode step (one token per sequence), in order.
  std::vector<double> decode_step_s;
};

// The generator of one rank. Backends (engine/inference/cpu_generator.h,
// engine/cuda/generator.h; by name: engine/backends/registry.h) implement
// the forward; the generation loop and sampling are shared.
class Generator {
 public:
  virtual ~Generator() = default;

  // The weights as training initializes them (engine/param_init.h).
  virtual Status InitWeights() = 0;
  // Collective. The newest checkpoint under `dir` (any saved layout).
  virtual Status LoadCheckpoint(const std::string& dir) = 0;

  // This rank's parameters (fp32, the training layout's tensors).
  virtual const ParamStore& params() const = 0;
  const TrainConfig& config() const { return config_; }
  int64_t batch() const { return batch_; }
  int64_t capacity() const { return capacity_; }
  int64_t position() const { return position_; }
  virtual int64_t kv_cache_bytes() const = 0;

  // Forgets the cached positions (a new batch of prompts).
  void Reset() { position_ = 0; }
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
  // The first `cached_prefix` positions of the prompts (0 <= cached_prefix
  // < their length) run before the clock starts, as a prefix cache would
  // have kept them: prefill_s times the rest, attending to them. The tokens
  // are those of the whole prefill.
  StatusOr<Generation> Generate(
      const std::vector<std::vector<int32_t>>& prompts, int64_t max_new_tokens,
      const SamplingOptions& sampling, int32_t stop_token = -1,
      int64_t cached_prefix = 0);

 protected:
  // `config`: InferenceConfig's.
  Generator(const TrainConfig& config, int64_t batch, int64_t capacity)
      : config_(config), batch_(batch), capacity_(capacity) {}
  // The backend's forward of checked tokens at positions [position(),
  // position() + t): the logits [rows, vocab_size] of `which` rows.
  virtual StatusOr<std::vector<float>> RunForward(
      const std::vector<int32_t>& tokens, int64_t t, LogitsOf which) = 0;

  TrainConfig config_;

 private:
  int64_t batch_, capacity_;
  int64_t position_ = 0;
};

// The training config of the inference layout (above) for `tp` ranks:
// the model and its options from `config`, tp ranks, no other
// parallelism, one sequence per micro-batch, no dropout, dropless MoE
// routing without an aux loss.
TrainConfig InferenceConfig(const TrainConfig& config, int64_t tp);

// Checks a generator of `config` (InferenceConfig's) for `batch` sequences
// of `capacity` positions: the errors Create functions return
// (cpu_generator.h).
Status CheckGenerator(const TrainConfig& config, int64_t batch,
                      int64_t capacity);

// The logits [rows, vocab] of the padded vocab-parallel shards gathered
// rank-major ([tp][rows, vocab_local]), the padding dropped.
std::vector<float> UnshardLogits(const std::vector<float>& gathered,
                                 int64_t rows, int64_t vocab_local,
                                 int64_t vocab);

}  // namespace meshtune::engine::inference

#endif  // MESHTUNE_ENGINE_INFERENCE_GENERATOR_H_
