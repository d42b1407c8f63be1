// The CPU trainer (Trainer::Create, engine/trainer.h): one step of this
// rank's pipeline schedule on the CPU model (engine/gpt_model.h), in the
// loop both backends share (engine/step_loop.h).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/checkpoint.h"
#include "engine/context_parallel/sequence_chunks.h"
#include "engine/gpt_model.h"
#include "engine/heap_retention.h"
#include "engine/optimizer.h"
#include "engine/param_store.h"
#include "engine/process_groups.h"
#include "engine/step_loop.h"
#include "engine/trainer.h"
#include "search_spaces/pipeline_schedule.h"

namespace meshtune::engine {
namespace {

class TrainerImpl : public StepLoopTrainer {
 public:
  TrainerImpl(const TrainConfig& config, const data::TokenDataset* dataset,
              Communicator* world)
      : StepLoopTrainer(config, dataset, world) {}

  Status Init() {
    groups_ = MakeProcessGroups(world_, config_.parallel);
    // A second pipeline communicator carries gradients (backward) so they
    // never queue behind activations (forward) between the same two ranks:
    // with interleaving both directions of one pair carry both kinds, in
    // orders that differ between sender and receiver.
    pp_grad_ = groups_.pp->Split(0, groups_.pp->rank(), "pp");
    // The schedule (search_spaces::PipelineSchedule, the object the cost
    // model reads) is the same every step: this rank's steps, once.
    steps_ = search_spaces::PipelineSchedule(config_.parallel.pp,
                                             config_.parallel.vpp,
                                             config_.num_microbatches())
                 .StepsForRank(groups_.pp_rank());
    model_ = std::make_unique<GptModel>(config_, &groups_, &store_);
    store_.Finalize();
    model_->Init();
    optimizer_ = std::make_unique<Optimizer>(
        config_.optimizer, config_.parallel.dist_opt, config_.train_iters,
        store_, &groups_);
    if (!config_.load_dir.empty()) {
      CheckpointState state;
      Status s = LoadCheckpoint(config_.load_dir, config_, &state, store_,
                                *optimizer_, groups_);
      if (!s.ok()) return s;
      // The sampler reads up to consumed_samples plus what the remaining
      // steps take; the data must hold that many (GetSample checks it).
      MESHTUNE_RETURN_IF_ERROR(CheckResume(config_.load_dir, state, config_,
                                           dataset_->num_samples()));
      iteration_ = state.iteration;
      consumed_samples_ = state.consumed_samples;
    }
    return Status::Ok();
  }

  RankMemory memory() const override {
    RankMemory r;
    r.rank = world_->rank();
    r.tp_rank = groups_.tp_rank();
    r.pp_rank = groups_.pp_rank();
    r.dp_rank = DataParallelRank();
    r.cp_rank = groups_.cp_rank();
    r.ep_rank = groups_.ep->rank();
    r.etp_rank = groups_.etp->rank();
    r.num_params = store_.numel();
    r.param_bytes = 4 * store_.numel();
    r.grad_bytes = 4 * store_.numel();
    r.optimizer_bytes = optimizer_->state_bytes();
    return r;
  }

  const ParamStore& params() const override { return store_; }

 private:
  // Every schedule step of this pipeline rank (search_spaces::
  // PipelineSchedule, the object the cost model reads) with its
  // point-to-point transfers, then the gradients finalized and the
  // optimizer stepped.
  StatusOr<StepOutput> TrainStep(int64_t iteration) override {
    const auto& par = config_.parallel;
    const int64_t m = config_.num_microbatches();
    const int pp = static_cast<int>(par.pp), pp_rank = groups_.pp_rank();
    const int next = (pp_rank + 1) % pp, prev = (pp_rank + pp - 1) % pp;
    const int64_t n = config_.seq() * par.mbs;
    const int64_t count = model_->ActivationCount();
    // This cp rank's chunks of the sequence (the whole of it when cp == 1).
    const context_parallel::SequenceChunks chunks(
        config_.seq(), static_cast<int>(par.cp), groups_.cp_rank());
    const int64_t n_local = chunks.local_len() * par.mbs;
    // Per-token gradient of the loss: 1/(tokens of this rank's m
    // micro-batches). Without cp that is the mean over the micro-batches'
    // tokens. With cp each rank's loss covers its own s/cp positions
    // (Megatron pretrain_gpt.py loss_func returns loss × cp_size with the
    // loss averaged over the whole sequence), and the gradient average over
    // dp·cp (the optimizer's "dp_cp" group, DDP's gradient_scaling_factor
    // 1/dp_cp) turns the cp ranks' sum back into the single-rank mean.
    const float loss_scale = 1.0f / static_cast<float>(n_local * m);

    store_.ZeroGrads();
    std::vector<ChunkState> states(m * par.vpp);
    std::vector<float> buf(count), dbuf(count);  // [count] activations
    std::vector<int32_t> tokens(n), targets(n);  // [seq·b], sequence-major
    // [s_local·b]: this cp rank's rows of tokens and targets (cp > 1).
    std::vector<int32_t> local_tokens(n_local), local_targets(n_local);
    StepOutput out;
    for (const auto& step : steps_) {
      const int c = static_cast<int>(step.chunk);
      ChunkState& st = states[step.microbatch * par.vpp + c];
      const bool first = model_->layout().HasEmbedding(c),
                 last = model_->layout().HasHead(c);
      if (step.kind == search_spaces::PipelineSchedule::Step::Kind::kForward) {
        const bool cp = par.cp > 1;
        if (first || last) {
          LoadMicroBatch(step.microbatch, tokens.data(), targets.data());
          if (cp) {
            // Megatron get_batch_on_this_cp_rank: chunks r and 2·cp−1−r.
            chunks.SelectRows(tokens.data(), local_tokens.data(), par.mbs, 1);
            chunks.SelectRows(targets.data(), local_targets.data(), par.mbs, 1);
          }
        }
        st.first_sample = FirstSample(step.microbatch);
        if (!first) groups_.pp->Recv(buf.data(), count, prev);
        model_->Forward(c, cp ? local_tokens.data() : tokens.data(),
                        cp ? local_targets.data() : targets.data(), buf.data(),
                        dbuf.data(), &st, &out.loss_sum);
        if (!last) groups_.pp->Send(dbuf.data(), count, next);
      } else {
        if (!last) pp_grad_->Recv(dbuf.data(), count, next);
        model_->Backward(c, dbuf.data(), buf.data(), &st, loss_scale);
        if (!first) pp_grad_->Send(buf.data(), count, prev);
      }
    }
    out.aux_loss_sum = model_->TakeAuxLossSum();
    FinalizeGrads();
    out.result = optimizer_->Step(store_, iteration);
    // After the step, as Megatron's finalize_model_grads does before it: the
    // optimizer never changes the bias (no gradient reaches it).
    model_->UpdateExpertBias(
        static_cast<float>(config_.moe_router_bias_update_rate));
    return out;
  }

  Status SaveCheckpointNow() override {
    const CheckpointState state{iteration_, consumed_samples_};
    return SaveCheckpoint(config_.save_dir, config_, state, store_, *optimizer_,
                          groups_);
  }

  // Megatron finalize_model_grads: sum the per-rank partial gradients of
  // sequence-parallel replicated params over tp, and the two copies of a
  // tied embedding over the first/last-stage group.
  void FinalizeGrads() {
    if (config_.parallel.sp && config_.parallel.tp > 1) {
      ReduceFlagged(groups_.tp.get(),
                    [](const ParamInfo& p) { return p.sequence_parallel; });
    }
    if (groups_.embd) {
      ReduceFlagged(groups_.embd.get(),
                    [](const ParamInfo& p) { return p.tied_embedding; });
    }
  }

  template <typename Pred>
  void ReduceFlagged(Communicator* comm, Pred pred) {
    std::vector<float> packed;
    for (int i = 0; i < store_.size(); ++i) {
      if (!pred(store_.info(i))) continue;
      packed.insert(packed.end(), store_.grad(i),
                    store_.grad(i) + store_.info(i).numel);
    }
    if (packed.empty()) return;
    comm->AllReduceSum(packed.data(), static_cast<int64_t>(packed.size()));
    size_t at = 0;
    for (int i = 0; i < store_.size(); ++i) {
      if (!pred(store_.info(i))) continue;
      std::copy_n(packed.begin() + at, store_.info(i).numel, store_.grad(i));
      at += store_.info(i).numel;
    }
  }

  std::unique_ptr<Communicator> pp_grad_;
  ParamStore store_;
  std::unique_ptr<GptModel> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<search_spaces::PipelineSchedule::Step> steps_;  // this pp rank's
};

}  // namespace

StatusOr<std::unique_ptr<Trainer>> Trainer::Create(
    const TrainConfig& config, const data::TokenDataset* dataset,
    Communicator* world) {
  Status s = config.Validate();
  if (!s.ok()) return s;
  if (world->size() != config.parallel.world()) {
    return Status::InvalidArgument(
        "the configuration needs " + std::to_string(config.parallel.world()) +
            " ranks (tp·pp·cp·dp) but " + std::to_string(world->size()) +
            " were started",
        "start tp·pp·cp·dp ranks (tune train --nproc N)");
  }
  if (dataset->seq_length() != config.seq()) {
    return Status::Internal(
        "dataset sequence length does not match the config");
  }
  // Every group split from the world inherits it (communicator.h).
  world->set_timeout_s(config.distributed_timeout_s);
  // Each step frees and reallocates its activations and collective
  // scratch; keeping that memory spares a page fault per 4 KiB per
  // micro-batch (engine/heap_retention.h).
  RetainFreedHeapMemory();
  auto trainer = std::make_unique<TrainerImpl>(config, dataset, world);
  s = trainer->Init();
  if (!s.ok()) return s;
  return std::unique_ptr<Trainer>(std::move(trainer));
}

}  // namespace meshtune::engine
