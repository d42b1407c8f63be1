// Choosing the next token from the logits of a decode step: greedy (argmax)
// or sampled with a temperature and top-k, from a seeded generator, so a
// run is reproducible and every tensor-parallel rank (which holds the same
// gathered logits) picks the same token without a broadcast.
#ifndef MESHTUNE_ENGINE_INFERENCE_SAMPLING_H_
#define MESHTUNE_ENGINE_INFERENCE_SAMPLING_H_

#include <cstdint>
#include <vector>

namespace meshtune::engine::inference {

struct SamplingOptions {
  // 0: greedy, the largest logit (the lowest id on ties). > 0: sample from
  // softmax(logits / temperature) (vLLM/Hugging Face `temperature`).
  double temperature = 0;
  // With temperature > 0, keep only the top_k largest logits (0 = all;
  // vLLM `top_k`, where -1 means all).
  int64_t top_k = 0;
  uint64_t seed = 0;
  // Only ids below this are chosen (0 = the whole vocabulary): a model
  // whose vocabulary is larger than its tokenizer's (the byte tokenizer's
  // 257 ids under gpt-tiny's 4096) never emits an id the tokenizer cannot
  // decode.
  int64_t vocab_limit = 0;
};

// The next token of each of the `rows` sequences from logits[rows, vocab].
// `step` (the decode step, from 0) and the row index select the random
// stream, so the same seed gives the same tokens whatever the batch order
// of the calls.
std::vector<int32_t> SampleTokens(const std::vector<float>& logits,
                                  int64_t rows, int64_t vocab,
                                  const SamplingOptions& options, int64_t step);

}  // namespace meshtune::engine::inference

#endif  // MESHTUNE_ENGINE_INFERENCE_SAMPLING_H_
