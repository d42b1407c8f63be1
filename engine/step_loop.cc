#include "engine/step_loop.h"

#include <chrono>

#include "engine/data/sampler.h"
#include "engine/stop_signal.h"

namespace meshtune::engine {

StepLoopTrainer::StepLoopTrainer(const TrainConfig& config,
                                 const data::TokenDataset* dataset,
                                 Communicator* world)
    : config_(config), dataset_(dataset), world_(world) {}

int64_t StepLoopTrainer::FirstSample(int64_t microbatch) const {
  const auto& par = config_.parallel;
  return data::PretrainingSampler(dataset_, par.mbs, par.dp, DataParallelRank())
      .FirstSample(consumed_samples_, microbatch);
}

void StepLoopTrainer::LoadMicroBatch(int64_t microbatch, int32_t* tokens,
                                     int32_t* targets) const {
  const auto& par = config_.parallel;
  data::PretrainingSampler(dataset_, par.mbs, par.dp, DataParallelRank())
      .Load(consumed_samples_, microbatch, tokens, targets);
}

Status StepLoopTrainer::SaveCheckpointObserved() {
  const bool report = world_->rank() == 0 && checkpoint_observer_;
  CheckpointEvent event;
  event.iteration = iteration_;
  event.dir = config_.save_dir;
  if (report) checkpoint_observer_(event);
  const auto t0 = std::chrono::steady_clock::now();
  MESHTUNE_RETURN_IF_ERROR(SaveCheckpointNow());
  if (report) {
    event.saved = true;
    event.elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    checkpoint_observer_(event);
  }
  return Status::Ok();
}

Status StepLoopTrainer::Run(
    const std::function<void(const IterationLog&)>& on_log) {
  using Clock = std::chrono::steady_clock;
  // Tokens whose losses one last-stage rank sums: its cp share of the
  // sequence (all of it without context parallelism).
  const double tokens_per_rank =
      static_cast<double>(config_.seq() / config_.parallel.cp *
                          config_.parallel.mbs * config_.num_microbatches());
  while (iteration_ < config_.train_iters) {
    const auto t0 = Clock::now();
    StepOutput out;
    MESHTUNE_ASSIGN_OR_RETURN(out, TrainStep(iteration_ + 1));

    // Mean LM loss over the global batch: the last stage's tp-rank-0 ranks
    // hold the sums of their dp shards (and, with cp > 1, of their cp
    // chunks: the world sum reduces over cp too, Megatron's all-reduce of
    // the loss over the context-parallel group). The third entry carries the
    // stop signals, so every rank decides to stop after the same iteration.
    // The fourth sums the ranks' partial MoE aux losses.
    double totals[4] = {0, 0, static_cast<double>(StopSignal()),
                        out.aux_loss_sum};
    if (groups_.last_stage() && groups_.tp_rank() == 0) {
      totals[0] = out.loss_sum;
      totals[1] = tokens_per_rank;
    }
    world_->AllReduceSum(totals, 4);
    const double loss = totals[0] / totals[1];
    ++iteration_;
    consumed_samples_ += config_.global_batch_size;
    const double step_s =
        std::chrono::duration<double>(Clock::now() - t0).count();

    IterationLog log =
        MakeIterationLog(config_, world_->size(), iteration_, out.result.lr,
                         loss, out.result.grad_norm, step_s, consumed_samples_);
    const int64_t moe_layers = config_.model.num_moe_layers();
    if (moe_layers > 0 && config_.moe_aux_loss_on()) {
      // Micro-batches of the global batch: gbs / mbs = dp · m.
      const double micro_batches =
          static_cast<double>(config_.global_batch_size / config_.parallel.mbs);
      log.load_balancing_loss =
          totals[3] / (micro_batches * static_cast<double>(moe_layers));
    }
    history_.push_back(log);
    MESHTUNE_RETURN_IF_ERROR(
        CheckFiniteStep(iteration_, loss, out.result.finite));
    if (world_->rank() == 0 && on_log) on_log(log);

    const bool at_end = iteration_ == config_.train_iters;
    const bool at_interval =
        config_.save_interval > 0 && iteration_ % config_.save_interval == 0;
    const bool stop = totals[2] > 0 && !at_end;
    if (!config_.save_dir.empty() && (at_end || at_interval || stop)) {
      MESHTUNE_RETURN_IF_ERROR(SaveCheckpointObserved());
    }
    if (stop) {
      return StopAtStepBoundary(iteration_, config_.train_iters,
                                config_.save_dir);
    }
  }
  return FinishRun();
}

}  // namespace meshtune::engine
