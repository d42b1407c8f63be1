// Optimizer: data-parallel gradient reduction, global-norm clipping and
// AdamW over a rank's ParamStore, with or without Megatron's distributed
// optimizer.
//
// Without it, every dp rank all-reduces (averages) the flat gradient buffer
// in buckets of ddp_bucket_size elements and keeps full AdamW state (m, v:
// 2 floats per local parameter). With it (ZeRO-1), the flat buffer is
// padded to a multiple of dp, gradients are reduce-scattered (averaged) so
// dp rank r owns the contiguous range [r·N/dp, (r+1)·N/dp), AdamW updates
// only that range with m, v of N/dp floats each, and the updated parameters
// are all-gathered. Either way the result is the same parameters.
//
// Gradient norm: Σ g² over elements with norm_mask = 1, summed over the
// model-parallel group (tp × pp), and over dp too when the state is sharded
// (each dp rank holds a different range), then √. Clipping multiplies all
// gradients by clip/(norm + 1e-6) when norm > clip (Megatron clip_grads).
//
// Expert parameters (ParamInfo::expert; the tail of the flat buffer) form a
// second region when expert parallelism changes who holds them (ep > 1 or
// etp != tp): their gradients are summed over the expert data-parallel
// group "edp" and scaled by 1/(dp·cp) like the dense ones (Megatron DDP's
// expert_gradient_scaling_factor: edp also spans tp ranks that saw other
// tokens), the distributed optimizer shards them over edp, and their
// squared norm is summed over "emp" (etp × ep × pp) before it joins the
// dense one. Otherwise (no MoE, or ep = 1 with etp = tp, where edp is the dp
// group) the whole buffer is one region, exactly as before.
#ifndef MESHTUNE_ENGINE_OPTIMIZER_H_
#define MESHTUNE_ENGINE_OPTIMIZER_H_

#include <cstdint>
#include <vector>

#include "engine/param_store.h"
#include "engine/process_groups.h"
#include "engine/train_config.h"

namespace meshtune::engine {

// Whether `store`'s expert parameters form a region of their own (above):
// the store has expert tensors and expert parallelism changes who holds
// them (ep > 1, or etp != tp). The CPU optimizer and the CUDA engine's
// device parameters and optimizer split by it.
bool ExpertsFormOwnRegion(const ParamStore& store, const ProcessGroups& groups);

// Whether expert gradients are reduced over groups of their own anywhere in
// the model: ep > 1, or etp != tp (only MoE models may set either,
// TrainConfig::Validate). A rank whose pipeline stage holds no expert (a
// dense first stage) has no expert region, yet "emp" spans the stages, so
// it still joins the expert norm's sums with zero; otherwise its stage
// peers would wait for it forever.
bool ExpertGroupsDiffer(const ProcessGroups& groups);

struct StepResult {
  float lr = 0;
  double grad_norm = 0;  // before clipping
  bool finite = true;    // false if the norm is NaN/Inf (step skipped)
};

class Optimizer {
 public:
  // `store` must be finalized; groups outlive the optimizer.
  Optimizer(const OptimizerConfig& config, bool distributed,
            int64_t train_iters, const ParamStore& store,
            ProcessGroups* groups);

  // One optimizer step for `iteration` (1-based). Expects the flat gradient
  // buffer to hold this rank's summed micro-batch gradients, already
  // finalized across tp (sequence-parallel params) and the embedding group.
  // Reduces over dp, clips, updates, and (distributed) all-gathers params.
  // A non-finite norm leaves parameters and state untouched.
  StepResult Step(ParamStore& store, int64_t iteration);

  bool distributed() const { return distributed_; }
  int64_t steps_taken() const { return steps_; }
  // Whether the expert parameters form a region of their own (above).
  bool expert_region() const { return regions_.size() > 1; }
  // With one region only (REQUIRES !expert_region()): the flat range
  // [shard_begin, shard_end) of the parameter buffer whose AdamW state this
  // rank holds ([0, numel) when not distributed), and that state: exp_avg
  // (m) and exp_avg_sq (v), each shard_end − shard_begin floats (elements
  // past numel are padding and stay 0).
  int64_t shard_begin() const;
  int64_t shard_end() const;
  std::vector<float>& exp_avg() { return m_; }
  std::vector<float>& exp_avg_sq() { return v_; }
  const std::vector<float>& exp_avg() const { return m_; }
  const std::vector<float>& exp_avg_sq() const { return v_; }
  void set_steps_taken(int64_t s) { steps_ = s; }
  // The AdamW state of every local parameter element, indexed like the
  // flat parameter buffer ([numel] each), for checkpoints: with the
  // distributed optimizer each region's shards are all-gathered over its
  // group (collective), otherwise the state is copied.
  void GatherFlatState(std::vector<float>* exp_avg,
                       std::vector<float>* exp_avg_sq) const;
  // Sets this rank's state from flat-indexed m, v ([numel] each): each
  // region's shard range is taken, padding set to 0. Not collective.
  void SetFlatState(const std::vector<float>& exp_avg,
                    const std::vector<float>& exp_avg_sq);

  // Bytes of optimizer state this rank holds (m and v, fp32).
  int64_t state_bytes() const;

 private:
  // A run [begin, end) of the flat buffer reduced over one group.
  struct Region {
    int64_t begin = 0, end = 0;     // flat elements
    Communicator* grads = nullptr;  // sums the gradients (dp or edp)
    Communicator* norm = nullptr;   // sums the squared norm (mp or emp)
    int64_t padded = 0;             // end − begin, padded to the group
    int64_t shard_begin = 0, shard_end = 0;  // flat, this rank's state
    int64_t state_offset = 0;                // into m_, v_
    std::vector<float> scratch;
  };
  void ReduceGrads(Region& r, ParamStore& store, float scale);
  void GatherParams(Region& r, ParamStore& store);

  OptimizerConfig config_;
  bool distributed_;
  int64_t train_iters_;
  ProcessGroups* groups_;
  int64_t numel_ = 0;
  std::vector<Region> regions_;
  int64_t steps_ = 0;
  std::vector<float> m_, v_;
};

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_OPTIMIZER_H_
