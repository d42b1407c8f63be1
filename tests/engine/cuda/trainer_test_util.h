// The small GPT and LLaMA configurations the CUDA trainer tests train, and
// the thread-rank runner of their parallel layouts
// (tests/engine/cuda/trainer_test.cc, trainer_parallel_test.cc,
// moe/moe_trainer_test.cc): 4 layers,
// hidden 128, head_dim 32, vocab 500, seq 64, global batch 8 in micro-
// batches of 4, 20 steps of AdamW with warm-up and clipping.
#ifndef MESHTUNE_TESTS_ENGINE_CUDA_TRAINER_TEST_UTIL_H_
#define MESHTUNE_TESTS_ENGINE_CUDA_TRAINER_TEST_UTIL_H_

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/comm/local_communicator.h"
#include "engine/cuda/trainer.h"
#include "engine/data/dataset.h"
#include "engine/param_store.h"
#include "engine/train_config.h"
#include "engine/trainer.h"
#include "gtest/gtest.h"

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

// Runs `config` on config.parallel.world() thread ranks (CUDA trainers
// over MakeLocalWorld, all on the current GPU(s)); returns every
// rank's trainer in world rank order (rank 0's history holds the global
// losses), or an empty vector with *error set.
inline std::vector<std::unique_ptr<Trainer>> RunCudaRanks(
    const TrainConfig& config, const data::TokenDataset& dataset,
    std::string* error) {
  const int n = static_cast<int>(config.parallel.world());
  auto world = MakeLocalWorld(n);
  std::vector<std::unique_ptr<Trainer>> trainers(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto t = CreateCudaTrainer(config, &dataset, world[r].get());
      if (!t.ok()) {
        errors[r] = t.status().message();
        return;
      }
      trainers[r] = std::move(t).value();
      const Status st = trainers[r]->Run({});
      if (!st.ok()) errors[r] = st.message();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    if (!errors[r].empty()) {
      *error = "rank " + std::to_string(r) + ": " + errors[r];
      return {};
    }
  }
  return trainers;
}

// Every replicated tensor (TpSplit::kReplicated) of `a` is in `b` with
// bitwise equal values (the tp ranks' copies after a run); fails the test
// otherwise, and when there is none to compare.
inline void ExpectReplicatedTensorsEqual(const ParamStore& a,
                                         const ParamStore& b) {
  int compared = 0;
  for (int i = 0; i < a.size(); ++i) {
    if (a.info(i).split != TpSplit::kReplicated) continue;
    const int j = b.Find(a.info(i).name);
    if (j < 0) {
      ADD_FAILURE() << a.info(i).name << " is missing from the other rank";
      continue;
    }
    const std::vector<float> x(a.param(i), a.param(i) + a.info(i).numel);
    const std::vector<float> y(b.param(j), b.param(j) + b.info(j).numel);
    EXPECT_EQ(x, y) << a.info(i).name;
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

// The mean LM loss of every iteration (world rank 0's history).
inline std::vector<double> Losses(const Trainer& trainer) {
  std::vector<double> out;
  for (const IterationLog& log : trainer.history()) out.push_back(log.loss);
  return out;
}

}  // namespace meshtune::engine::cuda

#endif  // MESHTUNE_TESTS_ENGINE_CUDA_TRAINER_TEST_UTIL_H_
