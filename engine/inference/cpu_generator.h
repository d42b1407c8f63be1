// The CPU generator (engine/inference/generator.h): fp32, the CPU reference
// ops, every model the CPU engine trains (GPT, LLaMA, MoE with the MoE
// block), the KV cache of engine/inference/kv_cache.h. The reference the
// CUDA generator is checked against.
#ifndef MESHTUNE_ENGINE_INFERENCE_CPU_GENERATOR_H_
#define MESHTUNE_ENGINE_INFERENCE_CPU_GENERATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/inference/generator.h"
#include "engine/inference/kv_cache.h"
#include "engine/model_layout.h"
#include "engine/param_store.h"
#include "engine/process_groups.h"
#include "engine/train_config.h"
#include "search_spaces/status.h"

namespace meshtune::engine::inference {

class CpuGenerator : public Generator {
 public:
  // This rank's share of `config.model` (with its norm epsilon, rotary
  // base and seed; the parallel config, batch and dropout are replaced,
  // InferenceConfig) on the ranks of `world` (not owned; collective over
  // it), for `batch` sequences of up to `capacity` positions (prompt +
  // generated). Errors: CheckGenerator's.
  static StatusOr<std::unique_ptr<CpuGenerator>> Create(
      const TrainConfig& config, Communicator* world, int64_t batch,
      int64_t capacity);

  Status InitWeights() override;
  Status LoadCheckpoint(const std::string& dir) override;
  const ParamStore& params() const override { return store_; }
  int64_t kv_cache_bytes() const override { return cache_.bytes(); }

 protected:
  StatusOr<std::vector<float>> RunForward(const std::vector<int32_t>& tokens,
                                          int64_t t, LogitsOf which) override;

 private:
  CpuGenerator(const TrainConfig& config, Communicator* world, int64_t batch,
               int64_t capacity);
  void Embed(const int32_t* tokens, int64_t t, float* x);
  // One layer, x[t·b, h] in place.
  void Layer(int64_t layer, int64_t t, std::vector<float>* x);
  // The MLP (dense or MoE) of a layer on normed[rows, h] -> out[rows, h].
  void Mlp(const LayerParams& p, int64_t rows, const float* normed, float* out);
  void MoeMlp(const LayerParams& p, int64_t rows, const float* normed,
              float* out);
  void Norm(const float* x, int w, int b, int64_t rows, float* out) const;
  // Final norm, output layer and the tp gather of rows x[rows, h].
  std::vector<float> Head(const float* x, int64_t rows);
  void AllReduceTp(float* x, int64_t count);

  ProcessGroups groups_;
  ParamStore store_;
  ModelLayout layout_;
  LayerShape shape_;  // per-rank heads, groups, ffn (tp); s, b unused
  KvCache cache_;
};

}  // namespace meshtune::engine::inference

#endif  // MESHTUNE_ENGINE_INFERENCE_CPU_GENERATOR_H_
