// Trainer: one rank's training loop. Builds the process groups, the model
// chunks this rank holds, the optimizer and the data order, then runs
// `train_iters` steps of the pipeline schedule (search_spaces::
// PipelineSchedule, the same object the cost model reads) with gradient
// accumulation, finalizes gradients (sequence-parallel norms over tp, tied
// embeddings over first/last stage), steps the optimizer and saves
// checkpoints.
//
// Every rank of the world constructs a Trainer with the same config and
// calls Run; rank 0 of the world receives the iteration logs.
#ifndef MESHTUNE_ENGINE_TRAINER_H_
#define MESHTUNE_ENGINE_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/data/dataset.h"
#include "engine/train_config.h"
#include "search_spaces/status.h"

namespace meshtune::engine {

// One line of Megatron's training log.
struct IterationLog {
  int64_t iteration = 0;  // 1-based
  float lr = 0;
  double loss = 0;  // mean LM loss over the global batch
  // MoE models with an aux loss: Megatron's load_balancing_loss, the
  // switch loss (coefficient included) averaged over the MoE layers and
  // the micro-batches of the global batch; unset otherwise.
  std::optional<double> load_balancing_loss;
  double grad_norm = 0;
  double step_s = 0;           // wall time of the whole step on this rank
  double tokens_per_s = 0;     // global tokens / step_s
  double tflops_per_rank = 0;  // model FLOPs (Megatron formula) / s / rank
  int64_t consumed_samples = 0;
};

// What this rank holds, reported at start-up (bytes). CPU engine: fp32
// weights and grads, AdamW m and v. CUDA engine (Megatron's bf16 terms):
// bf16 weights, fp32 main grads, and as optimizer state the fp32 master
// weights with m and v (of the rank's shard under the distributed
// optimizer).
struct RankMemory {
  int rank = 0, tp_rank = 0, pp_rank = 0, dp_rank = 0, cp_rank = 0;
  // The expert grid's coordinates (engine/process_groups.h): which experts
  // (ep) and which slice of each (etp) the rank holds; 0 for dense models.
  int ep_rank = 0, etp_rank = 0;
  int64_t num_params = 0;  // local parameter elements
  int64_t param_bytes = 0;
  int64_t grad_bytes = 0;
  int64_t optimizer_bytes = 0;
};

// The log of one finished step: Megatron's throughput fields from the
// config's global batch and model FLOPs (shared by the CPU and CUDA
// trainers).
IterationLog MakeIterationLog(const TrainConfig& config, int world_size,
                              int64_t iteration, float lr, double loss,
                              double grad_norm, double step_s,
                              int64_t consumed_samples);

// Every rank's RankMemory on every rank, in world rank order: `me` is this
// rank's. Collective over `world`.
std::vector<RankMemory> GatherRankMemory(Communicator* world,
                                         const RankMemory& me);

// OK, or the error that stops a run whose step `iteration` produced a
// non-finite loss or gradient norm (the last saved checkpoint stays valid).
Status CheckFiniteStep(int64_t iteration, double loss, bool grad_norm_finite);

// A checkpoint save as the loop reports it, before and after (world rank
// 0 only), so that a caller can say why the log pauses: a save of a large
// model takes as long as many steps.
struct CheckpointEvent {
  int64_t iteration = 0;  // the iteration the checkpoint holds
  std::string dir;        // TrainConfig::save_dir
  bool saved = false;     // false: about to save; true: saved
  double elapsed_s = 0;   // when saved: how long the save took
};

class Trainer {
 public:
  // The CPU trainer (engine/cpu_trainer.cc; the CUDA one is
  // engine/cuda/trainer.h, both behind engine/backends/registry.h).
  // Collective over `world` (size == config.parallel.world()). `dataset`
  // and `world` are not owned and must outlive the trainer.
  static StatusOr<std::unique_ptr<Trainer>> Create(
      const TrainConfig& config, const data::TokenDataset* dataset,
      Communicator* world);
  virtual ~Trainer() = default;

  // Runs from the current iteration (0, or the loaded checkpoint's) up to
  // config.train_iters. on_log is called on world rank 0 after every
  // iteration (may be empty). A non-finite loss stops the run with an
  // error naming the iteration; the last saved checkpoint stays valid.
  virtual Status Run(
      const std::function<void(const IterationLog&)>& on_log) = 0;

  // Called on world rank 0 around every checkpoint save of later Run calls
  // (may be empty, the default).
  virtual void SetCheckpointObserver(
      std::function<void(const CheckpointEvent&)> observer) = 0;

  // Iterations completed so far and their logs (world rank 0 has the loss;
  // every rank has timings).
  virtual const std::vector<IterationLog>& history() const = 0;
  // This rank's memory report, and all ranks' (gathered; world rank 0).
  virtual RankMemory memory() const = 0;
  virtual std::vector<RankMemory> all_memory() = 0;

  // Access for tests: flat parameters of this rank with their names.
  virtual const class ParamStore& params() const = 0;
};

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_TRAINER_H_
