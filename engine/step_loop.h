// StepLoopTrainer: the training loop both backends run, so that the CPU
// trainer (engine/trainer.cc) and the CUDA trainer (engine/cuda/trainer.cc)
// differ only in how one step runs and how a checkpoint is written. The
// loop owns what Megatron's train() does around train_step: the data order
// (data::PretrainingSampler), the mean LM loss over the global batch, the
// iteration log, the non-finite stop, checkpoints at --save-interval and at
// the end, and the stop signals (engine/stop_signal.h), decided together
// so that every rank stops after the same iteration.
#ifndef MESHTUNE_ENGINE_STEP_LOOP_H_
#define MESHTUNE_ENGINE_STEP_LOOP_H_

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/data/dataset.h"
#include "engine/optimizer.h"
#include "engine/process_groups.h"
#include "engine/train_config.h"
#include "engine/trainer.h"
#include "search_spaces/status.h"

namespace meshtune::engine {

class StepLoopTrainer : public Trainer {
 public:
  // Runs iterations iteration_ + 1 .. config_.train_iters (Trainer::Run).
  Status Run(const std::function<void(const IterationLog&)>& on_log) final;
  void SetCheckpointObserver(
      std::function<void(const CheckpointEvent&)> observer) final {
    checkpoint_observer_ = std::move(observer);
  }
  const std::vector<IterationLog>& history() const final { return history_; }
  std::vector<RankMemory> all_memory() final {
    return GatherRankMemory(world_, memory());
  }

 protected:
  // `dataset` and `world` are not owned; `world` may be replaced by the
  // backend before Run (the CUDA trainer's single-process world).
  StepLoopTrainer(const TrainConfig& config, const data::TokenDataset* dataset,
                  Communicator* world);

  // What one step of this rank returns to the loop.
  struct StepOutput {
    // This rank's sum of the LM loss over its micro-batches' tokens
    // (meaningful on the last pipeline stage's tp-rank-0 ranks).
    double loss_sum = 0;
    // This rank's sum of its MoE layers' (partial) aux losses over its
    // micro-batches; the sum over all ranks covers every layer and
    // micro-batch once.
    double aux_loss_sum = 0;
    StepResult result;  // the optimizer step's lr, grad norm, finiteness
  };

  // The backend's step `iteration` (1-based): every schedule step of this
  // pipeline rank for the global batch at consumed_samples_, the gradients
  // finalized and the optimizer stepped.
  virtual StatusOr<StepOutput> TrainStep(int64_t iteration) = 0;
  // Saves a checkpoint of iteration_ and consumed_samples_ to
  // config_.save_dir (collective).
  virtual Status SaveCheckpointNow() = 0;
  // After the last iteration, before Run returns (the CUDA trainer gathers
  // the final weights into the host store).
  virtual Status FinishRun() { return Status::Ok(); }

  // The first sample of `microbatch` in the current global batch, and its
  // tokens and targets [seq · mbs], sequence-major (data::PretrainingSampler).
  int64_t FirstSample(int64_t microbatch) const;
  // This rank's data-parallel rank: which share of the global batch it
  // reads. groups_.dp spans dp·cp when cp > 1, ranked cp fastest (RankGrid
  // order tp-cp-ep-dp-pp), and the cp ranks of one data-parallel rank read
  // the same samples, each keeping its own chunks (Megatron's
  // get_data_parallel_rank() without context parallelism).
  int DataParallelRank() const {
    return groups_.dp_rank() / groups_.cp->size();
  }
  void LoadMicroBatch(int64_t microbatch, int32_t* tokens,
                      int32_t* targets) const;

  TrainConfig config_;
  const data::TokenDataset* dataset_;
  Communicator* world_;
  ProcessGroups groups_;
  int64_t iteration_ = 0;         // completed iterations
  int64_t consumed_samples_ = 0;  // samples of the completed iterations

 private:
  // Saves a checkpoint, telling checkpoint_observer_ (rank 0) before and
  // after.
  Status SaveCheckpointObserved();

  std::vector<IterationLog> history_;
  std::function<void(const CheckpointEvent&)> checkpoint_observer_;
};

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_STEP_LOOP_H_
