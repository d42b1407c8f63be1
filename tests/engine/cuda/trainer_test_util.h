// The small GPT and LLaMA configurations the CUDA trainer tests train
// (tests/engine/cuda/trainer_test.cc, trainer_parallel_test.cc): 4 layers,
// hidden 128, head_dim 32, vocab 500, seq 64, global batch 8 in micro-
// batches of 4, 20 steps of AdamW with warm-up and clipping.
#ifndef MESHTUNE_TESTS_ENGINE_CUDA_TRAINER_TEST_UTIL_H_
#define MESHTUNE_TESTS_ENGINE_CUDA_TRAINER_TEST_UTIL_H_

#include <vector>

#include "engine/train_config.h"
#include "engine/trainer.h"

namespace meshtune::engine::cuda {

inline TrainConfig SmallTrainConfig(bool llama) {
  TrainConfig c;
  auto& m = c.model;
  m.name = llama ? "llama-gpu-test" : "gpt-gpu-test";
  m.num_layers = 4;
  m.hidden_size = 128;
  m.num_attention_heads = 4;
  m.num_query_groups = llama ? 2 : 4;
  m.kv_channels = 32;
  m.ffn_hidden_size = llama ? 352 : 512;
  m.vocab_size = 500;
  m.seq_length = 64;
  if (llama) {
    m.normalization = search_spaces::Normalization::kRMSNorm;
    m.activation = search_spaces::Activation::kSwiglu;
    m.position_embedding_type = search_spaces::PositionEmbedding::kRope;
    m.untie_embeddings_and_output_weights = true;
  }
  c.global_batch_size = 8;
  c.parallel.mbs = 4;  // two micro-batches: gradient accumulation
  c.train_iters = 20;
  c.optimizer.lr = 1e-3f;
  c.optimizer.min_lr = 1e-4f;
  c.optimizer.lr_warmup_iters = 2;
  c.optimizer.clip_grad = 1.0f;
  return c;
}

// The mean LM loss of every iteration (world rank 0's history).
inline std::vector<double> Losses(const Trainer& trainer) {
  std::vector<double> out;
  for (const IterationLog& log : trainer.history()) out.push_back(log.loss);
  return out;
}

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_TESTS_ENGINE_CUDA_TRAINER_TEST_UTIL_H_
