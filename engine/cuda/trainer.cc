#include "engine/cuda/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/checkpoint.h"
#include "engine/cuda/device.h"
#include "engine/cuda/device_params.h"
#include "engine/cuda/gpt_model.h"
#include "engine/cuda/nccl_communicator.h"
#include "engine/cuda/ops.h"
#include "engine/gpt_model.h"
#include "engine/local_communicator.h"
#include "engine/lr_schedule.h"
#include "engine/optimizer.h"
#include "engine/param_store.h"
#include "engine/process_groups.h"

namespace meshtune::engine::cuda {
namespace {

using Clock = std::chrono::steady_clock;

// This process's rank on its node, from the launcher's environment (Open
// MPI, MPICH/Intel MPI, SLURM, torchrun), else the world rank (one node).
int LocalRank(int world_rank) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                           "SLURM_LOCALID", "LOCAL_RANK"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return world_rank;
}

class CudaTrainer : public Trainer {
 public:
  CudaTrainer(const TrainConfig& config, const data::TokenDataset* dataset,
              Communicator* world)
      : config_(config), dataset_(dataset), world_(world) {}
  ~CudaTrainer() override { DestroyStream(dp_stream_); }

  Status Init() {
    if (world_ == nullptr) {
      own_world_ = MakeLocalWorld(1);
      world_ = own_world_[0].get();
    }
    // One GPU per rank: the node-local rank picks it.
    if (world_->size() > 1) {
      MESHTUNE_RETURN_IF_ERROR(
          SetDevice(LocalRank(world_->rank()) % DeviceCount()));
    }
    // The CPU model registers and initializes the parameters (the same
    // weights on every rank and in every layout).
    groups_ = MakeProcessGroups(world_, config_.parallel);
    cpu_model_ = std::make_unique<GptModel>(config_, &groups_, &store_);
    store_.Finalize();
    cpu_model_->Init();
    if (groups_.dp->size() > 1) {
      auto dp = NcclCommunicator::Create(groups_.dp.get());
      if (!dp.ok()) return dp.status();
      nccl_dp_ = std::move(dp).value();
      auto stream = CreateNonBlockingStream();
      if (!stream.ok()) return stream.status();
      dp_stream_ = stream.value();
    }
    auto params = DeviceParams::Create(store_);
    if (!params.ok()) return params.status();
    params_ = std::move(params).value();
    auto model = CudaGptModel::Create(config_, store_, params_.get());
    if (!model.ok()) return model.status();
    model_ = std::move(model).value();
    if (!config_.save_dir.empty() || !config_.load_dir.empty()) {
      // Checkpoints are the CPU engine's files (Megatron layout, loadable
      // by either backend and any layout): a host optimizer holds the
      // moments while they are written or read.
      host_optimizer_ = std::make_unique<Optimizer>(
          config_.optimizer, false, config_.train_iters, store_, &groups_);
    }
    if (!config_.load_dir.empty()) {
      CheckpointState state;
      MESHTUNE_RETURN_IF_ERROR(LoadCheckpoint(config_.load_dir, config_, &state,
                                              store_, *host_optimizer_,
                                              groups_));
      MESHTUNE_RETURN_IF_ERROR(
          params_->UploadState(store_, host_optimizer_->exp_avg().data(),
                               host_optimizer_->exp_avg_sq().data()));
      iteration_ = state.iteration;
      consumed_samples_ = state.consumed_samples;
    }
    return Status::Ok();
  }

  Status Save() {
    MESHTUNE_RETURN_IF_ERROR(params_->DownloadParams(&store_));
    MESHTUNE_RETURN_IF_ERROR(
        params_->DownloadMoments(store_, host_optimizer_->exp_avg().data(),
                                 host_optimizer_->exp_avg_sq().data()));
    const CheckpointState state{iteration_, consumed_samples_};
    return SaveCheckpoint(config_.save_dir, config_, state, store_,
                          *host_optimizer_, groups_);
  }

  Status Run(const std::function<void(const IterationLog&)>& on_log) override {
    const int64_t m = config_.num_microbatches();
    const int64_t s = config_.seq(), b = config_.parallel.mbs, n = s * b;
    const float loss_scale = 1.0f / static_cast<float>(n * m);
    const auto& opt = config_.optimizer;
    std::vector<int32_t> tokens(n), targets(n);
    std::vector<double> norm_sum(1);
    auto norm_buffer = Upload(std::vector<double>{0.0});
    if (!norm_buffer.ok()) return norm_buffer.status();
    DeviceBuffer norm = std::move(norm_buffer).value();

    // Data-parallel gradient reduction (the CPU optimizer's step 1: sum
    // over dp in fp32, then ×1/dp), bucketed by layer on the dp stream, so
    // the all-reduce of layer l overlaps the backward of the layers below
    // (Megatron DDP's overlap_grad_reduce with one bucket per layer).
    const std::function<Status(int64_t)> reduce_layer =
        [this](int64_t layer) -> Status {
      const auto [first, last] = model_->LayerTensors(layer);
      return ReduceOnDpStream(params_->Range(first, last));
    };
    while (iteration_ < config_.train_iters) {
      const auto t0 = Clock::now();
      MESHTUNE_RETURN_IF_ERROR(params_->ZeroGrads());
      double loss_sum = 0;
      for (int64_t j = 0; j < m; ++j) {
        LoadMicroBatch(j, &tokens, &targets);
        // The sample index keys the dropout masks, as on the CPU.
        auto loss = model_->Forward(tokens, targets, FirstSample(j));
        if (!loss.ok()) return loss.status();
        loss_sum += loss.value();
        // The last micro-batch's backward starts each layer's reduction as
        // soon as its gradients are final.
        const bool last = j == m - 1 && nccl_dp_ != nullptr;
        MESHTUNE_RETURN_IF_ERROR(model_->Backward(
            loss_scale,
            last ? reduce_layer : std::function<Status(int64_t)>()));
      }
      if (nccl_dp_ != nullptr) MESHTUNE_RETURN_IF_ERROR(FinishDpReduction());
      // Global gradient norm (fp64), clipping, AdamW: the CPU optimizer's
      // steps 2-4 (engine/optimizer.cc) on the device.
      MESHTUNE_RETURN_IF_ERROR(norm.Zero());
      MESHTUNE_RETURN_IF_ERROR(SumSquares(params_->NormSegments(store_),
                                          norm.as<double>(), nullptr));
      MESHTUNE_RETURN_IF_ERROR(norm.CopyToHost(norm_sum.data(), 8));
      const double grad_norm = std::sqrt(norm_sum[0]);
      const float lr = LearningRate(opt, iteration_ + 1, config_.train_iters);
      const bool finite = std::isfinite(grad_norm);
      if (finite) {
        if (opt.clip_grad > 0 && grad_norm > opt.clip_grad) {
          const float coeff = static_cast<float>(
              static_cast<double>(opt.clip_grad) / (grad_norm + 1e-6));
          // All gradients, as clip_grad_by_total_norm_fp32 scales them.
          MESHTUNE_RETURN_IF_ERROR(params_->ScaleGrads(coeff));
        }
        MESHTUNE_RETURN_IF_ERROR(AdamWUpdate(
            params_->AdamSegments(store_, opt.weight_decay), lr, opt.adam_beta1,
            opt.adam_beta2, opt.adam_eps, iteration_ + 1, nullptr));
      }
      MESHTUNE_RETURN_IF_ERROR(Synchronize("optimizer_step"));
      // Mean loss over the global batch: every rank holds its dp shard.
      double totals[2] = {loss_sum, static_cast<double>(n * m)};
      world_->AllReduceSum(totals, 2);
      const double loss = totals[0] / totals[1];
      ++iteration_;
      consumed_samples_ += config_.global_batch_size;
      const double step_s =
          std::chrono::duration<double>(Clock::now() - t0).count();
      const IterationLog log =
          MakeIterationLog(config_, world_->size(), iteration_, lr, loss,
                           grad_norm, step_s, consumed_samples_);
      history_.push_back(log);
      MESHTUNE_RETURN_IF_ERROR(CheckFiniteStep(iteration_, loss, finite));
      if (world_->rank() == 0 && on_log) on_log(log);
      const bool at_end = iteration_ == config_.train_iters;
      const bool at_interval =
          config_.save_interval > 0 && iteration_ % config_.save_interval == 0;
      if (!config_.save_dir.empty() && (at_end || at_interval)) {
        MESHTUNE_RETURN_IF_ERROR(Save());
      }
    }
    return Status::Ok();
  }

  const std::vector<IterationLog>& history() const override { return history_; }

  RankMemory memory() const override {
    RankMemory r;
    r.rank = world_->rank();
    r.dp_rank = groups_.dp_rank();
    r.num_params = store_.numel();
    r.param_bytes = 6 * store_.numel();  // fp32 master + bf16 weights
    r.grad_bytes = 4 * store_.numel();
    r.optimizer_bytes = 8 * store_.numel();
    return r;
  }
  // Every rank holds the same (data parallelism only): rank r's row differs
  // in its rank numbers.
  std::vector<RankMemory> all_memory() override {
    std::vector<RankMemory> out;
    for (int r = 0; r < world_->size(); ++r) {
      RankMemory m = memory();
      m.rank = r;
      m.dp_rank = r;
      out.push_back(m);
    }
    return out;
  }

  // The current fp32 master weights (copied from the device on each call).
  const ParamStore& params() const override {
    Status st = params_->DownloadParams(&store_);
    MESHTUNE_CHECK(st.ok());
    return store_;
  }

 private:
  // All-reduces main grads [range) on the dp stream once the default
  // stream's work so far (the kernels that wrote them) is done.
  Status ReduceOnDpStream(std::pair<int64_t, int64_t> range) {
    MESHTUNE_RETURN_IF_ERROR(WaitForStream(dp_stream_, nullptr));
    return nccl_dp_->AllReduceSum(params_->grad_buffer() + range.first,
                                  range.second - range.first, dp_stream_);
  }

  // After the backward: the tensors outside the layers (embeddings, the
  // final norm, an untied output layer: a prefix and a suffix of the
  // buffer), then the default stream waits for every reduction and scales.
  Status FinishDpReduction() {
    const int64_t layers = model_->num_layers();
    const int64_t begin = params_
                              ->Range(model_->LayerTensors(0).first,
                                      model_->LayerTensors(0).first)
                              .first;
    const int64_t end = params_
                            ->Range(model_->LayerTensors(layers - 1).second,
                                    model_->LayerTensors(layers - 1).second)
                            .second;
    if (begin > 0) MESHTUNE_RETURN_IF_ERROR(ReduceOnDpStream({0, begin}));
    if (end < params_->padded_numel()) {
      MESHTUNE_RETURN_IF_ERROR(
          ReduceOnDpStream({end, params_->padded_numel()}));
    }
    MESHTUNE_RETURN_IF_ERROR(WaitForStream(nullptr, dp_stream_));
    return params_->ScaleGrads(1.0f / static_cast<float>(nccl_dp_->size()));
  }

  // Megatron's pretraining sampler (engine/trainer.cc): micro-batch j of
  // dp rank r starts at consumed + j·mbs·dp + r·mbs.
  int64_t FirstSample(int64_t microbatch) const {
    const auto& par = config_.parallel;
    return consumed_samples_ + microbatch * par.mbs * par.dp +
           static_cast<int64_t>(groups_.dp_rank()) * par.mbs;
  }

  void LoadMicroBatch(int64_t microbatch, std::vector<int32_t>* tokens,
                      std::vector<int32_t>* targets) const {
    const int64_t s = config_.seq(), b = config_.parallel.mbs;
    std::vector<int32_t> sample(s + 1);
    const int64_t first = FirstSample(microbatch);
    for (int64_t bi = 0; bi < b; ++bi) {
      dataset_->GetSample(first + bi, sample.data());
      for (int64_t si = 0; si < s; ++si) {
        (*tokens)[si * b + bi] = sample[si];
        (*targets)[si * b + bi] = sample[si + 1];
      }
    }
  }

  TrainConfig config_;
  const data::TokenDataset* dataset_;
  Communicator* world_;  // not owned, or own_world_'s single rank
  std::vector<std::unique_ptr<Communicator>> own_world_;
  ProcessGroups groups_;
  std::unique_ptr<NcclCommunicator> nccl_dp_;  // dp > 1 only
  Stream dp_stream_ = nullptr;  // its reductions (non-blocking stream)
  mutable ParamStore store_;
  std::unique_ptr<GptModel> cpu_model_;
  std::unique_ptr<DeviceParams> params_;
  std::unique_ptr<CudaGptModel> model_;
  std::unique_ptr<Optimizer> host_optimizer_;  // checkpoint I/O only
  std::vector<IterationLog> history_;
  int64_t iteration_ = 0, consumed_samples_ = 0;
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
