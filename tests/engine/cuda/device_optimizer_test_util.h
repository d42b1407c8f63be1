// Shared by the DeviceOptimizer tests: a small hand-built ParamStore with
// both weight-decay groups and a tensor left out of the norm, the gradients
// each dp rank feeds, and the CPU Optimizer's run they are compared with.
#ifndef MESHTUNE_TESTS_ENGINE_CUDA_DEVICE_OPTIMIZER_TEST_UTIL_H_
#define MESHTUNE_TESTS_ENGINE_CUDA_DEVICE_OPTIMIZER_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/comm/local_communicator.h"
#include "engine/optimizer.h"
#include "engine/param_store.h"
#include "engine/process_groups.h"
#include "engine/train_config.h"

namespace meshtune::engine::cuda::testing {

// weight [5, 60] (decayed; 300 elements, so at dp = 3 a shard edge cuts
// it), bias [5] and norm weight [7] (not decayed), and a replicated copy
// [9] that another rank counts in the norm (counts_in_norm = false).
inline ParamStore MakeOptimizerStore() {
  ParamStore store;
  ParamInfo w;
  w.name = "decoder.layers.0.mlp.linear_fc1.weight";
  w.global_shape = {5, 60};
  store.Add(w);
  ParamInfo b;
  b.name = "decoder.layers.0.mlp.linear_fc1.bias";
  b.global_shape = {5};
  b.weight_decay = false;
  store.Add(b);
  ParamInfo n;
  n.name = "decoder.final_layernorm.weight";
  n.global_shape = {7};
  n.weight_decay = false;
  store.Add(n);
  ParamInfo copy;
  copy.name = "decoder.layers.0.self_attention.linear_proj.bias";
  copy.global_shape = {9};
  copy.weight_decay = false;
  copy.counts_in_norm = false;
  store.Add(copy);
  store.Finalize();
  for (int64_t i = 0; i < store.numel(); ++i) {
    store.flat_params()[i] = 0.1f * std::cos(0.5f * static_cast<float>(i));
  }
  return store;
}

// The gradient dp rank `rank` produced at `step`: distinct per rank, so the
// average matters; the norm is about 6, so clip 1.0 is active.
inline float OptimizerTestGrad(int rank, int64_t step, int64_t i) {
  return 0.5f * std::sin(0.37f * static_cast<float>(i) + 1.3f * rank +
                         0.71f * static_cast<float>(step));
}

inline TrainConfig OptimizerTestConfig(bool clip, bool distributed) {
  TrainConfig config;
  config.train_iters = 10;
  OptimizerConfig& c = config.optimizer;
  c.lr = 1e-2f;
  c.min_lr = 1e-3f;
  c.lr_warmup_iters = 2;
  c.weight_decay = 0.1f;
  c.clip_grad = clip ? 1.0f : 0.0f;
  config.parallel.dist_opt = distributed;
  return config;
}

struct CpuRun {
  std::vector<float> params, m, v;  // full, store order
  std::vector<StepResult> steps;
};

// `steps` CPU optimizer steps on one rank, each fed the average over
// `grad_ranks` ranks' OptimizerTestGrad (summed in rank order, then ×1/n,
// as the dp reduction forms it).
inline CpuRun RunCpuOptimizer(const TrainConfig& config, int64_t steps,
                              int grad_ranks) {
  CpuRun r;
  RunLocalRanks(1, [&](Communicator& world) {
    ProcessGroups groups =
        MakeProcessGroups(&world, search_spaces::ParallelConfig{});
    ParamStore store = MakeOptimizerStore();
    Optimizer opt(config.optimizer, false, config.train_iters, store, &groups);
    for (int64_t it = 1; it <= steps; ++it) {
      for (int64_t i = 0; i < store.numel(); ++i) {
        float sum = 0.0f;
        for (int q = 0; q < grad_ranks; ++q) sum += OptimizerTestGrad(q, it, i);
        store.flat_grads()[i] =
            grad_ranks == 1 ? sum
                            : sum * (1.0f / static_cast<float>(grad_ranks));
      }
      r.steps.push_back(opt.Step(store, it));
    }
    r.params = store.flat_params();
    r.m = opt.exp_avg();
    r.v = opt.exp_avg_sq();
  });
  return r;
}

}  // namespace meshtune::engine::cuda::testing

#endif  // MESHTUNE_TESTS_ENGINE_CUDA_DEVICE_OPTIMIZER_TEST_UTIL_H_
