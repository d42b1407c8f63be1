// Helpers for engine tests: tiny GPT/LLaMA configs, a synthetic token
// dataset, and a runner that trains a config on in-process ranks and
// returns the loss curve and the final weights gathered into global
// tensors (by ParamInfo::Blocks), so any two layouts can be compared.
#ifndef MESHTUNE_TESTS_ENGINE_ENGINE_TEST_UTIL_H_
#define MESHTUNE_TESTS_ENGINE_ENGINE_TEST_UTIL_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/comm/local_communicator.h"
#include "engine/data/dataset.h"
#include "engine/data/synthetic_dataset.h"
#include "engine/param_store.h"
#include "engine/train_config.h"
#include "engine/trainer.h"

namespace meshtune::engine::testing {

// The engine's synthetic token stream (engine/data/synthetic_dataset.h),
// 2^20 samples.
class SyntheticDataset : public data::SyntheticDataset {
 public:
  SyntheticDataset(int64_t seq, int64_t vocab)
      : data::SyntheticDataset(seq, vocab, int64_t{1} << 20) {}
};

inline TrainConfig TinyConfig(bool llama) {
  TrainConfig c;
  auto& m = c.model;
  m.name = llama ? "llama-test" : "gpt-test";
  m.num_layers = 4;
  m.hidden_size = 32;
  m.num_attention_heads = 4;
  m.num_query_groups = llama ? 2 : 4;
  m.kv_channels = 8;
  m.ffn_hidden_size = llama ? 48 : 64;
  m.vocab_size = 100;  // padded to 128·tp: padding columns are masked
  m.seq_length = 16;
  if (llama) {
    m.normalization = search_spaces::Normalization::kRMSNorm;
    m.activation = search_spaces::Activation::kSwiglu;
    m.position_embedding_type = search_spaces::PositionEmbedding::kRope;
    m.untie_embeddings_and_output_weights = true;
  }
  c.global_batch_size = 8;
  c.train_iters = 10;
  c.optimizer.lr = 3e-3f;
  c.optimizer.min_lr = 3e-4f;
  c.optimizer.lr_warmup_iters = 2;
  c.optimizer.weight_decay = 0.1f;
  c.optimizer.clip_grad = 1.0f;
  return c;
}

// TinyConfig(llama) with MoE layers of the DeepSeek / Qwen3 kind: a dense
// first layer, then 4 routed experts (top-2, softmax) of FFN 16 and a
// shared expert of 16, aux loss 0.01.
inline TrainConfig TinyMoeConfig(double capacity_factor = 0) {
  TrainConfig c = TinyConfig(/*llama=*/true);
  auto& m = c.model;
  m.name = "moe-test";
  m.num_experts = 4;
  m.moe_router_topk = 2;
  m.moe_ffn_hidden_size = 16;
  m.moe_shared_expert_intermediate_size = 16;
  m.moe_layer_pattern = {0, 1, 1, 1};
  m.moe_expert_capacity_factor = capacity_factor;
  c.moe_aux_loss_coeff = 0.01;
  return c;
}

struct RunResult {
  std::vector<double> losses;
  std::vector<double> grad_norms;
  std::vector<double> load_balancing_losses;          // MoE with an aux loss
  std::map<std::string, std::vector<float>> weights;  // global tensors
  std::vector<RankMemory> memory;
  // Every world rank's flat parameter buffer at the end, and where its
  // dense part ends (ParamStore::dense_numel): replicas must be bitwise
  // equal.
  std::vector<std::vector<float>> rank_params;
  std::vector<int64_t> rank_dense_numel;
};

// Copies rank-local shards into global tensors (row-major global shape).
inline void GatherInto(const ParamStore& store,
                       std::map<std::string, std::vector<float>>* out,
                       std::mutex* mu) {
  std::lock_guard<std::mutex> lock(*mu);
  for (const ParamInfo& info : store.infos()) {
    const int64_t rows = info.global_shape[0];
    const int64_t cols =
        info.global_shape.size() > 1 ? info.global_shape[1] : 1;
    const int64_t local_cols =
        info.local_shape.size() > 1 ? info.local_shape[1] : 1;
    auto& t = (*out)[info.name];
    t.resize(rows * cols);
    const float* p = store.flat_params().data() + info.offset;
    for (const ParamInfo::Block& b : info.Blocks()) {
      for (int64_t r = 0; r < b.rows; ++r) {
        for (int64_t c = 0; c < b.cols; ++c) {
          t[(b.global_row0 + r) * cols + b.global_col0 + c] =
              p[(b.local_row0 + r) * local_cols + b.local_col0 + c];
        }
      }
    }
  }
}

inline RunResult TrainLocally(const TrainConfig& config,
                              CommLog* log = nullptr) {
  SyntheticDataset data(config.seq(), config.model.vocab_size);
  RunResult result;
  result.rank_params.resize(config.parallel.world());
  result.rank_dense_numel.resize(config.parallel.world());
  std::mutex mu;
  RunLocalRanks(
      static_cast<int>(config.parallel.world()),
      [&](Communicator& world) {
        auto trainer = Trainer::Create(config, &data, &world);
        if (!trainer.ok()) throw std::runtime_error(trainer.status().message());
        auto memory = (*trainer)->all_memory();
        Status s = (*trainer)->Run({});
        if (!s.ok()) throw std::runtime_error(s.message());
        GatherInto((*trainer)->params(), &result.weights, &mu);
        result.rank_params[world.rank()] = (*trainer)->params().flat_params();
        result.rank_dense_numel[world.rank()] =
            (*trainer)->params().dense_numel();
        if (world.rank() == 0) {
          result.memory = memory;
          for (const IterationLog& l : (*trainer)->history()) {
            result.losses.push_back(l.loss);
            result.grad_norms.push_back(l.grad_norm);
            if (l.load_balancing_loss.has_value()) {
              result.load_balancing_losses.push_back(*l.load_balancing_loss);
            }
          }
        }
      },
      log);
  return result;
}

}  // namespace meshtune::engine::testing

#endif  // MESHTUNE_TESTS_ENGINE_ENGINE_TEST_UTIL_H_
