#include "engine/cuda/trainer.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/checkpoint.h"
#include "engine/comm/local_communicator.h"
#include "engine/context_parallel/sequence_chunks.h"
#include "engine/cuda/comm/device_communicator.h"
#include "engine/cuda/device_optimizer.h"
#include "engine/cuda/device_params.h"
#include "engine/cuda/gpt_model.h"
#include "engine/cuda/kernels/ops.h"
#include "engine/cuda/runtime/device.h"
#include "engine/model_layout.h"
#include "engine/optimizer.h"
#include "engine/param_store.h"
#include "engine/pipeline/p2p.h"
#include "engine/pipeline/slots.h"
#include "engine/process_groups.h"
#include "engine/step_loop.h"
#include "search_spaces/pipeline_schedule.h"

namespace meshtune::engine::cuda {
namespace {

using Step = search_spaces::PipelineSchedule::Step;

// This process's rank on its node, from the launcher's environment (Open
// MPI, MPICH/Intel MPI, SLURM, torchrun), else the world rank (one node).
int LocalRank(int world_rank) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                           "SLURM_LOCALID", "LOCAL_RANK"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return world_rank;
}

class CudaTrainer : public StepLoopTrainer {
 public:
  CudaTrainer(const TrainConfig& config, const data::TokenDataset* dataset,
              Communicator* world)
      : StepLoopTrainer(config, dataset, world),
        schedule_(config.parallel.pp, config.parallel.vpp,
                  config.num_microbatches()) {}

  Status Init() {
    if (world_ == nullptr) {
      own_world_ = MakeLocalWorld(1);
      world_ = own_world_[0].get();
    }
    // One GPU per rank where there are enough: the node-local rank picks
    // it. Ranks that share a GPU get staged device communicators.
    if (world_->size() > 1) {
      MESHTUNE_RETURN_IF_ERROR(
          SetDevice(LocalRank(world_->rank()) % DeviceCount()));
    }
    // The layout registers and initializes the parameters as for the CPU
    // model (the same weights on every rank and in every layout); the GPU
    // model runs its chunks.
    const auto& par = config_.parallel;
    groups_ = MakeProcessGroups(world_, par);
    // MoE layers hold this rank's experts (its ep rank) and their shard
    // (its etp rank), as the CPU model registers them.
    layout_ = std::make_unique<ModelLayout>(
        config_, groups_.tp_rank(), groups_.pp_rank(), &store_,
        groups_.ep->rank(), groups_.etp->rank());
    store_.Finalize();
    layout_->Init(&store_);
    // Device communicators of the groups that carry device data. A second
    // pipeline communicator carries gradients so they never queue behind
    // activations between the same two ranks (engine/pipeline/p2p.h).
    // The kind is decided once for the world: staged for every group when
    // any two ranks share a GPU (WorldSharesDevices says why).
    bool shared = false;
    MESHTUNE_ASSIGN_OR_RETURN(shared, WorldSharesDevices(world_));
    if (par.tp > 1) {
      MESHTUNE_ASSIGN_OR_RETURN(
          tp_, CreateDeviceCommunicator(groups_.tp.get(), shared));
    }
    if (par.pp > 1) {
      pp_grad_host_ = groups_.pp->Split(0, groups_.pp->rank(), "pp");
      MESHTUNE_ASSIGN_OR_RETURN(
          pp_act_, CreateDeviceCommunicator(groups_.pp.get(), shared));
      MESHTUNE_ASSIGN_OR_RETURN(
          pp_grad_, CreateDeviceCommunicator(pp_grad_host_.get(), shared));
    }
    // groups_.dp spans dp·cp: gradients are averaged over both (the CPU
    // trainer's "dp_cp" group, Megatron DDP with context parallelism).
    if (groups_.dp->size() > 1) {
      MESHTUNE_ASSIGN_OR_RETURN(
          dp_, CreateDeviceCommunicator(groups_.dp.get(), shared));
    }
    // Context parallelism: the ring attention's K/V and dK/dV messages.
    if (par.cp > 1) {
      MESHTUNE_ASSIGN_OR_RETURN(
          cp_, CreateDeviceCommunicator(groups_.cp.get(), shared));
    }
    // MoE: the rows travel over ep and etp, expert gradients over edp.
    if (config_.model.is_moe()) {
      if (groups_.ep->size() > 1) {
        MESHTUNE_ASSIGN_OR_RETURN(
            ep_, CreateDeviceCommunicator(groups_.ep.get(), shared));
      }
      if (groups_.etp->size() > 1) {
        MESHTUNE_ASSIGN_OR_RETURN(
            etp_, CreateDeviceCommunicator(groups_.etp.get(), shared));
      }
      if (groups_.edp->size() > 1) {
        MESHTUNE_ASSIGN_OR_RETURN(
            edp_, CreateDeviceCommunicator(groups_.edp.get(), shared));
      }
    }
    if (groups_.embd != nullptr && groups_.embd->size() > 1) {
      MESHTUNE_ASSIGN_OR_RETURN(
          embd_, CreateDeviceCommunicator(groups_.embd.get(), shared));
    }
    // Expert tensors get a region of their own, sharded over edp, when
    // their replicas are not the dp replicas (engine/optimizer.h).
    const ExpertSharding experts{groups_.edp->size(), groups_.edp->rank()};
    MESHTUNE_ASSIGN_OR_RETURN(
        params_,
        DeviceParams::Create(
            store_, groups_.dp->size(), groups_.dp_rank(), par.dist_opt,
            ExpertsFormOwnRegion(store_, groups_) ? &experts : nullptr));
    const int pp_rank = groups_.pp_rank();
    steps_ = schedule_.StepsForRank(pp_rank);
    plan_ = MakeP2pPlan(schedule_, pp_rank);
    MESHTUNE_CHECK(plan_.size() == steps_.size() + 1);
    // Slots for what moves between stages, per chunk, and the pool of
    // saved activations at the schedule's peak (engine/pipeline/slots.h).
    MESHTUNE_ASSIGN_OR_RETURN(
        model_,
        CudaGptModel::Create(
            config_, *layout_, store_, params_.get(), tp_.get(),
            CountPipelineSlots(schedule_, pp_rank),
            PeakInFlightLayers(schedule_, pp_rank,
                               CudaGptModel::KeptLayers(*layout_)),
            CudaMoeComms{groups_.tp_cp.get(), groups_.ep.get(),
                         groups_.etp.get(), nullptr, ep_.get(), etp_.get()},
            cp_.get()));
    MESHTUNE_ASSIGN_OR_RETURN(
        optimizer_, DeviceOptimizer::Create(config_, store_, params_.get(),
                                            &groups_, dp_.get(), edp_.get()));
    if (!config_.save_dir.empty() || !config_.load_dir.empty()) {
      // Checkpoints are the CPU engine's files (Megatron layout, loadable
      // by either backend and any layout): a host optimizer holds the full
      // moments while they are written or read.
      host_optimizer_ = std::make_unique<Optimizer>(
          config_.optimizer, false, config_.train_iters, store_, &groups_);
    }
    if (!config_.load_dir.empty()) {
      CheckpointState state;
      MESHTUNE_RETURN_IF_ERROR(LoadCheckpoint(config_.load_dir, config_, &state,
                                              store_, *host_optimizer_,
                                              groups_));
      // As the CPU trainer: the data must hold what the resumed steps read.
      MESHTUNE_RETURN_IF_ERROR(CheckResume(config_.load_dir, state, config_,
                                           dataset_->num_samples()));
      MESHTUNE_RETURN_IF_ERROR(
          optimizer_->ScatterState(store_, host_optimizer_->exp_avg().data(),
                                   host_optimizer_->exp_avg_sq().data()));
      optimizer_->set_steps_taken(host_optimizer_->steps_taken());
      iteration_ = state.iteration;
      consumed_samples_ = state.consumed_samples;
    }
    return Status::Ok();
  }

  // Megatron's bf16 accounting, the cost model's terms: bf16 weights and
  // fp32 main grads of every local parameter; fp32 master weights and
  // AdamW m, v of the rank's shard (all of them without the distributed
  // optimizer).
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
    // Allocated sizes, alignment padding included, like optimizer_bytes.
    r.param_bytes = 2 * params_->padded_numel();
    r.grad_bytes = 4 * params_->padded_numel();
    r.optimizer_bytes = optimizer_->state_bytes();
    return r;
  }
  // The fp32 master weights: the initial ones before Run, the final ones
  // after it (Run gathers them).
  const ParamStore& params() const override { return store_; }

 private:
  // Every schedule step of this pipeline rank, each after the point-to-
  // point group the plan posts before it (engine/pipeline/p2p.h), then the
  // gradients finalized and the optimizer stepped.
  StatusOr<StepOutput> TrainStep(int64_t iteration) override {
    const int64_t m = config_.num_microbatches();
    const int64_t n = config_.seq() * config_.parallel.mbs;
    // This cp rank's chunks of the sequence (the whole of it when cp == 1).
    const context_parallel::SequenceChunks chunks(
        config_.seq(), static_cast<int>(config_.parallel.cp),
        groups_.cp_rank());
    const int64_t n_local = chunks.local_len() * config_.parallel.mbs;
    // Per-token gradient of the loss: 1/(tokens of this rank's m
    // micro-batches), as the CPU trainer: with cp each rank's loss covers
    // its own s/cp positions (Megatron's loss_func returns loss × cp) and
    // the optimizer's average over dp·cp turns the cp ranks' sum back into
    // the single-rank gradient.
    const float loss_scale = 1.0f / static_cast<float>(n_local * m);
    // The data-parallel reduction of each layer starts during the last
    // micro-batch's backward of its chunk, as soon as its gradients are
    // final (Megatron DDP's overlap_grad_reduce, one bucket per layer).
    // With an expert region the optimizer reduces tensor by tensor over
    // dp or edp at Step (DeviceOptimizer::Create).
    std::function<Status(int64_t)> reduce_layer =
        [this](int64_t layer) -> Status {
      const auto [first, last] = model_->LayerTensors(layer);
      const auto [begin, end] = params_->Range(first, last);
      return optimizer_->ReduceBucket(begin, end);
    };
    if (optimizer_->expert_region()) reduce_layer = nullptr;
    MESHTUNE_RETURN_IF_ERROR(params_->ZeroGrads());
    PipelineSlots slots(model_->num_chunks());
    slots_ = &slots;
    for (size_t i = 0; i <= steps_.size(); ++i) {
      MESHTUNE_RETURN_IF_ERROR(RunP2pGroup(plan_[i]));
      if (i == steps_.size()) break;
      const Step& step = steps_[i];
      const int c = static_cast<int>(step.chunk);
      const int slot = slots.Take(step.microbatch, c);
      if (step.kind == Step::Kind::kForward) {
        if (model_->HasEmbedding(c) || model_->HasHead(c)) {
          tokens_.resize(n);
          targets_.resize(n);
          LoadMicroBatch(step.microbatch, tokens_.data(), targets_.data());
          if (chunks.cp() > 1) {
            // This cp rank's rows (Megatron get_batch_on_this_cp_rank:
            // chunks r and 2·cp−1−r).
            for (std::vector<int32_t>* rows : {&tokens_, &targets_}) {
              std::vector<int32_t> local(n_local);
              chunks.SelectRows(rows->data(), local.data(),
                                config_.parallel.mbs, 1);
              rows->swap(local);
            }
          }
        }
        MESHTUNE_RETURN_IF_ERROR(model_->Forward(c, slot, tokens_, targets_,
                                                 FirstSample(step.microbatch)));
      } else {
        const bool last = step.microbatch == m - 1;
        MESHTUNE_RETURN_IF_ERROR(model_->Backward(
            c, slot, loss_scale,
            last ? reduce_layer : std::function<Status(int64_t)>()));
        // The first virtual stage sends nothing back: its slot is free.
        if (model_->HasEmbedding(c)) slots.Release(step.microbatch, c);
      }
    }
    slots_ = nullptr;
    StepOutput out;
    MESHTUNE_ASSIGN_OR_RETURN(out.loss_sum, model_->TakeLossSum());
    out.aux_loss_sum = model_->TakeAuxLossSum();
    MESHTUNE_RETURN_IF_ERROR(FinalizeGrads());
    MESHTUNE_ASSIGN_OR_RETURN(out.result, optimizer_->Step(iteration));
    // After the step, as on the CPU: the optimizer never changes the bias.
    model_->UpdateExpertBias(
        static_cast<float>(config_.moe_router_bias_update_rate), &groups_,
        &store_);
    return out;
  }

  // The final master weights into the host store (collective over dp
  // under the distributed optimizer), for params().
  Status FinishRun() override {
    return KeepingHostBuffers(
        [this] { return optimizer_->GatherParams(&store_); });
  }

  // Runs `gather` (which overwrites store_ with the device's master
  // weights) and puts back the tensors whose truth is the host store: the
  // routers' expert biases, which the routing reads and UpdateExpertBias
  // writes there (their device copies keep the initial values).
  template <typename Gather>
  Status KeepingHostBuffers(Gather gather) {
    std::vector<std::pair<int, std::vector<float>>> kept;
    for (int i : model_->ExpertBiasTensors()) {
      const float* p = store_.param(i);
      kept.push_back({i, std::vector<float>(p, p + store_.info(i).numel)});
    }
    MESHTUNE_RETURN_IF_ERROR(gather());
    for (const auto& [i, values] : kept) {
      std::copy(values.begin(), values.end(), store_.param(i));
    }
    return Status::Ok();
  }

  Status SaveCheckpointNow() override {
    MESHTUNE_RETURN_IF_ERROR(KeepingHostBuffers([this] {
      return optimizer_->GatherState(&store_, host_optimizer_->exp_avg().data(),
                                     host_optimizer_->exp_avg_sq().data());
    }));
    host_optimizer_->set_steps_taken(optimizer_->steps_taken());
    const CheckpointState state{iteration_, consumed_samples_};
    return SaveCheckpoint(config_.save_dir, config_, state, store_,
                          *host_optimizer_, groups_);
  }

  // Posts one group of the plan: sends first, together (ncclGroupStart/
  // End), all on the default stream so every buffer is used in stream
  // order. Peers are always other ranks: interleaving needs pp >= 2
  // (TrainConfig::Validate).
  Status RunP2pGroup(const P2pGroup& group) {
    if (group.ops.empty()) return Status::Ok();
    const int64_t count = model_->ActivationCount();
    MESHTUNE_RETURN_IF_ERROR(GroupStart());
    Status status = Status::Ok();
    for (const P2pOp& op : group.ops) {
      MESHTUNE_CHECK(op.peer != groups_.pp_rank());
      const bool activation = op.kind == P2pKind::kActivation;
      DeviceCommunicator* comm = activation ? pp_act_.get() : pp_grad_.get();
      const int peer = static_cast<int>(op.peer);
      // The buffer is in the slot of the transfer's micro-batch (taken now
      // if this is its first use).
      const int c = static_cast<int>(TransferChunk(op, config_.parallel.pp));
      const int slot = slots_->Take(op.microbatch, c);
      if (op.direction == P2pDirection::kSend) {
        status = comm->Send(
            activation ? model_->Output(c, slot) : model_->InputGrad(c, slot),
            count, peer, nullptr);
      } else {
        status = comm->Recv(
            activation ? model_->Input(c, slot) : model_->OutputGrad(c, slot),
            count, peer, nullptr);
      }
      // The slot's last use is enqueued: a recv later in this group may
      // take it (it fills the slot's input, not the gradient being sent).
      if (ReleasesSlot(op)) slots_->Release(op.microbatch, c);
      if (!status.ok()) break;
    }
    const Status end = GroupEnd();
    MESHTUNE_RETURN_IF_ERROR(status);
    return end;
  }

  // Megatron finalize_model_grads, after the data-parallel buckets: the
  // per-rank partial gradients of sequence-parallel replicated parameters
  // summed over tp, and the two copies of a tied embedding over the
  // first/last-stage group. Without SP (tp > 1) the replicated parameters'
  // gradients are averaged over tp: every rank computes the same value,
  // but the norm and bias kernels add partial sums with atomics, in an
  // order that differs between ranks, and the copies must stay bitwise
  // identical step after step (the CPU engine's sums are deterministic).
  Status FinalizeGrads() {
    MESHTUNE_RETURN_IF_ERROR(optimizer_->WaitForReductions());
    if (tp_ != nullptr) {
      const bool sp = config_.parallel.sp;
      MESHTUNE_RETURN_IF_ERROR(ReduceFlagged(
          tp_.get(),
          [sp](const ParamInfo& p) {
            return sp ? p.sequence_parallel : p.split == TpSplit::kReplicated;
          },
          sp ? 1.0f : 1.0f / static_cast<float>(tp_->size())));
    }
    if (embd_ != nullptr) {
      MESHTUNE_RETURN_IF_ERROR(ReduceFlagged(
          embd_.get(), [](const ParamInfo& p) { return p.tied_embedding; },
          1.0f));
    }
    return Status::Ok();
  }

  // All-reduces (sums) the gradients of the tensors `pred` selects over
  // `comm`, in one NCCL group, then multiplies them by `scale`.
  template <typename Pred>
  Status ReduceFlagged(DeviceCommunicator* comm, Pred pred, float scale) {
    MESHTUNE_RETURN_IF_ERROR(GroupStart());
    Status status = Status::Ok();
    for (int i = 0; i < store_.size() && status.ok(); ++i) {
      if (!pred(store_.info(i))) continue;
      status = comm->AllReduceSum(params_->grad(store_, i),
                                  store_.info(i).numel, nullptr);
    }
    const Status end = GroupEnd();
    MESHTUNE_RETURN_IF_ERROR(status);
    MESHTUNE_RETURN_IF_ERROR(end);
    if (scale == 1.0f) return Status::Ok();
    for (int i = 0; i < store_.size(); ++i) {
      if (!pred(store_.info(i))) continue;
      MESHTUNE_RETURN_IF_ERROR(Scale(params_->grad(store_, i),
                                     store_.info(i).numel, scale, nullptr));
    }
    return Status::Ok();
  }

  // world_'s single rank when the caller passed no world.
  std::vector<std::unique_ptr<Communicator>> own_world_;
  search_spaces::PipelineSchedule schedule_;
  std::vector<Step> steps_;  // this pipeline rank's
  P2pPlan plan_;             // steps_.size() + 1 groups
  std::unique_ptr<Communicator> pp_grad_host_;
  // Device communicators (null where the group is one rank).
  std::unique_ptr<DeviceCommunicator> tp_, pp_act_, pp_grad_, dp_, embd_, ep_,
      etp_, edp_;
  ParamStore store_;
  std::unique_ptr<ModelLayout> layout_;
  std::unique_ptr<DeviceParams> params_;
  std::unique_ptr<CudaGptModel> model_;
  std::unique_ptr<DeviceOptimizer> optimizer_;
  std::unique_ptr<Optimizer> host_optimizer_;  // checkpoint I/O only
  PipelineSlots* slots_ = nullptr;             // the running step's
  // [s·b], sequence-major (this cp rank's s/cp positions under cp).
  std::vector<int32_t> tokens_, targets_;
  std::unique_ptr<DeviceCommunicator> cp_;  // cp > 1: the ring's group
};

}  // namespace

StatusOr<std::unique_ptr<Trainer>> CreateCudaTrainer(
    const TrainConfig& config, const data::TokenDataset* dataset,
    Communicator* world) {
  MESHTUNE_RETURN_IF_ERROR(config.Validate());
  MESHTUNE_RETURN_IF_ERROR(CudaGptModel::CheckSupported(config));
  const int ranks = world != nullptr ? world->size() : 1;
  if (ranks != config.parallel.world()) {
    return Status::InvalidArgument(
        "the job has " + std::to_string(ranks) +
        " ranks but tp·pp·cp·dp = " + std::to_string(config.parallel.world()));
  }
  if (dataset->seq_length() != config.seq()) {
    return Status::InvalidArgument(
        "dataset samples are " + std::to_string(dataset->seq_length()) +
        " tokens but the config trains " + std::to_string(config.seq()));
  }
  if (DeviceCount() == 0) {
    return Status::InvalidArgument(
        "--backend cuda: no CUDA device (cudaGetDeviceCount found none)",
        "run on a machine with an NVIDIA GPU and driver, or use --backend "
        "cpu");
  }
  auto trainer = std::make_unique<CudaTrainer>(config, dataset, world);
  MESHTUNE_RETURN_IF_ERROR(trainer->Init());
  return StatusOr<std::unique_ptr<Trainer>>(std::move(trainer));
}

}  // namespace meshtune::engine::cuda
