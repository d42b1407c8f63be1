// `tune train`: runs the training engine (engine/trainer.h) on a config
// written by `tune search --out` or given by flags, prints Megatron-style
// iteration lines and records the measured step times in the results
// database (training_runs), next to the cost model's prediction.
//
// Process model (docs/design.md §8): one rank per process. A one-rank run
// trains in this process. A larger world re-runs this command under mpirun
// (tuner/train/launcher.h) after checking everything a rank would check, so
// input errors are reported once and before any rank starts. Under an
// external mpirun/srun each process is a rank of MPI_COMM_WORLD.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/cost_model.h"
#include "engine/backends/registry.h"
#include "engine/comm/local_communicator.h"
#include "engine/comm/mpi_communicator.h"
#include "engine/stop_signal.h"
#include "engine/trainer.h"
#include "profiler/cpu_backend.h"
#include "search_spaces/presets/presets.h"
#include "search_spaces/space/enumerate.h"
#include "tuner/commands/cli.h"
#include "tuner/commands/command.h"
#include "tuner/inputs/local_cluster.h"
#include "tuner/inputs/search_link.h"
#include "tuner/machine/calibration_source.h"
#include "tuner/machine/local_gpu.h"
#include "tuner/store/results_db.h"
#include "tuner/train/flags.h"
#include "tuner/train/launcher.h"
#include "tuner/train/report.h"

namespace meshtune::tuner {
namespace {

constexpr const char *kTrainExamples = R"(Examples:
  tune train --model gpt-tiny --steps 50
  tune search --model gpt-tiny --gpus 4 --gpu local --out best.yaml && tune train --config best.yaml
  tune train --model llama-tiny --tp 2 --pp 2 --steps 20
  tune train --model gpt-tiny --data my_corpus --save ckpt --save-interval 25
  tune train --from-search 3 --rank 2 --steps 20      candidate 2 of search 3 (tune db searches)
  tune db runs                                         measured vs predicted step times
With --config, flags given on the command line override the file's values.
A --config file with a search: section (tune search --out with a database),
or --from-search, stores the run against that search candidate when it
records into the search's database and trains exactly the candidate's model,
gbs, seq-len and parallel config; otherwise one warning says why it is not
linked and the run is stored unlinked. --from-search takes no layout flags.
Axes not given default to tp=pp=cp=dp=vpp=mbs=1, sp off, recompute none,
dist_opt off; gbs and seq-len default to the model's. More than one rank
(tp*pp*cp*dp > 1) runs under mpirun (Open MPI), started by tune itself unless
tune is already running under mpirun or srun.)";

// The results database for the run, by the policy of tuner/store/results_db.h:
// an explicit --db must open; the implicit default never breaks the command.
StatusOr<std::unique_ptr<results::Store>> OpenTrainDb(const TrainFlags &f,
                                                      std::ostream &err) {
  if (f.no_db) return std::unique_ptr<results::Store>();
  StatusOr<std::unique_ptr<results::Store>> store =
      results::Store::Open(ResolveDbPath(f.db));
  if (store.ok() || !f.db.empty()) return store;
  err << "tune: warning: not recording this training run: "
      << store.status().message() << "\n";
  return std::unique_ptr<results::Store>();
}

// The cost model's step time for this config on the `local` preset (this
// machine, one core per rank), or nullopt with the reason in *why.
// With --backend cuda the prediction is for one GPU per rank of the
// device's preset (or --gpu), calibrated by this database's measurements of
// that GPU; none when the ranks outnumber this machine's GPUs (they share
// them through staged host collectives, which the cost model does not
// price).
std::optional<double> PredictCudaStepTime(const TrainPlan &plan,
                                          const results::Store *store,
                                          std::string *why) {
  const engine::TrainConfig &c = plan.config;
  const int64_t ranks = c.parallel.world();
  if (ranks > engine::backends::CudaDeviceCount()) {
    *why = std::to_string(ranks) + " ranks share " +
           std::to_string(engine::backends::CudaDeviceCount()) +
           " GPU(s) through staged host collectives, which the cost model "
           "does not price";
    return std::nullopt;
  }
  const std::string preset = plan.gpu.empty() ? DetectedGpuPreset() : plan.gpu;
  if (preset.empty()) {
    *why = "no GPU preset matches this device (pass --gpu PRESET)";
    return std::nullopt;
  }
  StatusOr<search_spaces::ClusterSpec> cluster =
      search_spaces::ResolveCluster(preset);
  if (!cluster.ok()) {
    *why = cluster.status().message();
    return std::nullopt;
  }
  search_spaces::TrainingSpec training;
  training.num_gpus = ranks;
  training.global_batch_size = c.global_batch_size;
  training.seq_length = c.seq();
  training.python_launches = false;  // meshtune's engine launches from C++
  std::string detail;
  const std::string reason = search_spaces::CheckConfig(
      c.model, training, cluster.value(), c.parallel, &detail);
  if (!reason.empty()) {
    *why = detail.empty() ? reason : detail;
    return std::nullopt;
  }
  StatusOr<std::unique_ptr<costmodel::Calibration>> calibration =
      ChooseCalibration(store, cluster.value());
  if (!calibration.ok()) {
    *why = calibration.status().message();
    return std::nullopt;
  }
  const costmodel::Estimate e = costmodel::EstimateConfig(
      c.model, cluster.value(), training, c.parallel, *calibration.value());
  *why = "cost model now: " + std::to_string(ranks) + " x " + preset +
         ", one GPU per rank, " + e.calibration + " calibration";
  return e.step_time_s;
}

std::optional<double> PredictStepTime(const engine::TrainConfig &c,
                                      const results::Store *store,
                                      std::string *why) {
  search_spaces::ClusterSpec cluster = LocalCluster(profiler::ReadCpuInfo());
  // All ranks share this one machine, oversubscribed or not.
  const int world = static_cast<int>(c.parallel.world());
  cluster.gpus_per_node = std::max(cluster.gpus_per_node, world);
  cluster.nvlink_domain_gpus = std::max(cluster.nvlink_domain_gpus, world);
  search_spaces::TrainingSpec training;
  training.num_gpus = c.parallel.world();
  training.global_batch_size = c.global_batch_size;
  training.seq_length = c.seq();
  training.python_launches = false;  // meshtune's engine launches from C++
  std::string detail;
  const std::string reason = search_spaces::CheckConfig(
      c.model, training, cluster, c.parallel, &detail);
  if (!reason.empty()) {
    *why = detail.empty() ? reason : detail;
    return std::nullopt;
  }
  StatusOr<std::unique_ptr<costmodel::Calibration>> calibration =
      ChooseCalibration(store, cluster, LocalHardwareId());
  if (!calibration.ok()) {
    *why = calibration.status().message();
    return std::nullopt;
  }
  const costmodel::Estimate e = costmodel::EstimateConfig(
      c.model, cluster, training, c.parallel, *calibration.value());
  *why = "cost model now: local preset, one core per rank, " + e.calibration +
         " calibration";
  return e.step_time_s;
}

// The one prediction this run prints and compares with (StepTimePrediction):
// a linked run's is the candidate's, as stored with the search it is
// recorded against; another run's is the cost model's estimate now.
StepTimePrediction PredictRun(const TrainPlan &plan,
                              const results::Store *store,
                              const StoredCandidate *linked) {
  if (linked != nullptr) return CandidatePrediction(*linked);
  StepTimePrediction p;
  p.step_time_s = plan.backend == "cuda"
                      ? PredictCudaStepTime(plan, store, &p.source)
                      : PredictStepTime(plan.config, store, &p.source);
  return p;
}

std::string DescribeData(const engine::data::DataConfig &d,
                         const engine::data::TokenDataset &dataset) {
  std::string s = d.data_path.empty() ? "built-in corpus" : "";
  for (const std::string &token : d.data_path) {
    s += (s.empty() ? "" : " ") + token;
  }
  return s + " (" + std::to_string(dataset.num_samples()) + " samples of " +
         std::to_string(dataset.seq_length()) + " tokens, vocabulary " +
         std::to_string(dataset.vocab_size()) + ")";
}

const char *DecayName(engine::OptimizerConfig::DecayStyle s) {
  switch (s) {
    case engine::OptimizerConfig::DecayStyle::kConstant:
      return "constant";
    case engine::OptimizerConfig::DecayStyle::kLinear:
      return "linear";
    case engine::OptimizerConfig::DecayStyle::kCosine:
      break;
  }
  return "cosine";
}

void PrintStartup(std::ostream &os, const TrainPlan &plan,
                  const engine::data::TokenDataset &dataset, bool under_mpi,
                  const std::vector<engine::RankMemory> &memory,
                  const StepTimePrediction &prediction) {
  const engine::TrainConfig &c = plan.config;
  const engine::OptimizerConfig &o = c.optimizer;
  char line[512];
  os << "tune train: " << c.model.name << " (" << c.model.display_name << "), "
     << c.model.num_layers << " layers, hidden " << c.model.hidden_size << "\n";
  os << "  config:      " << search_spaces::ToString(c.parallel) << "\n";
  os << "  ranks:       " << c.parallel.world()
     << (under_mpi ? " (MPI processes)" : " (this process)") << "\n";
  std::snprintf(line, sizeof(line),
                "  batch:       gbs %lld x seq %lld = %lld tokens per "
                "iteration, %lld micro-batches of %lld per pipeline; %lld "
                "iterations\n",
                static_cast<long long>(c.global_batch_size),
                static_cast<long long>(c.seq()),
                static_cast<long long>(c.global_batch_size * c.seq()),
                static_cast<long long>(c.num_microbatches()),
                static_cast<long long>(c.parallel.mbs),
                static_cast<long long>(c.train_iters));
  os << line;
  os << "  data:        " << DescribeData(plan.data, dataset) << "\n";
  std::snprintf(
      line, sizeof(line),
      "  optimizer:   AdamW, lr %.3E -> %.3E (%s, warm-up %lld), "
      "weight decay %g, clip-grad %g, seed %llu\n",
      static_cast<double>(o.lr), static_cast<double>(o.min_lr),
      DecayName(o.lr_decay_style), static_cast<long long>(o.lr_warmup_iters),
      static_cast<double>(o.weight_decay), static_cast<double>(o.clip_grad),
      static_cast<unsigned long long>(c.seed));
  os << line;
  if (!c.load_dir.empty()) os << "  load:        " << c.load_dir << "\n";
  if (!c.save_dir.empty()) {
    os << "  save:        " << c.save_dir;
    if (c.save_interval > 0) {
      os << " every " << c.save_interval << " iterations and at the end";
    } else {
      os << " at the end";
    }
    os << "\n";
  }
  os << FormatPredictionLine(prediction);
  // The engine's own accounting (engine::RankMemory): the CPU engine keeps
  // everything in fp32; the CUDA engine bf16 weights and fp32 grads,
  // master weights and moments (Megatron's bf16 terms).
  os << (plan.backend == "cuda"
             ? "memory per rank (bf16 params, fp32 grads and optimizer):\n"
             : "memory per rank (fp32):\n")
     << FormatMemoryTable(memory);
  os.flush();
}

// Records the run in training_runs; failures are warnings (the report is
// out already).
// `candidate_id` is the linked search candidate (0 = not linked).
// A CUDA run is filed under the GPU machine (GpuMachineHardwareId), where
// `tune validate --backend cuda` learns from it; a CPU run under this CPU.
void RecordRun(results::Store *store, const TrainPlan &plan,
               const TrainSummary &s, int64_t candidate_id, std::ostream &err) {
  const engine::TrainConfig &c = plan.config;
  const results::Provenance prov = ToolProvenance();
  // This machine's own fingerprint, stored: the CPU, or the GPU machine
  // when no GPU preset resolves (FileGpuMachine needs one).
  const auto file_self =
      [&](const results::HardwareFingerprint &hw) -> StatusOr<std::string> {
    MESHTUNE_RETURN_IF_ERROR(store->PutHardware(hw, prov));
    return hw.id;
  };
  StatusOr<std::string> hardware_id = Status::Internal("not filed");
  if (plan.backend == "cuda") {
    const StatusOr<search_spaces::ClusterSpec> cluster =
        search_spaces::ResolveCluster(plan.gpu.empty() ? DetectedGpuPreset()
                                                       : plan.gpu);
    hardware_id = cluster.ok()
                      ? FileGpuMachine(store, *cluster,
                                       engine::backends::CudaDeviceName(),
                                       engine::backends::CudaDeviceCount())
                      : file_self(GpuMachineFingerprint(
                            engine::backends::CudaDeviceName(),
                            engine::backends::CudaDeviceCount()));
  } else {
    hardware_id = file_self(profiler::CpuFingerprint(profiler::ReadCpuInfo()));
  }
  results::TrainingRun run;
  run.hardware_id = hardware_id.ok() ? *hardware_id : "";
  run.candidate_id = candidate_id;
  run.model = c.model.name;
  run.config = c.parallel;
  run.gbs = c.global_batch_size;
  run.seq_length = c.seq();
  run.steps = s.measured_steps;
  run.step_time_median_s = s.step_time_median_s;
  run.step_time_min_s = s.step_time_min_s;
  run.step_time_p99_s = s.step_time_p99_s;
  run.step_time_cv = s.step_time_cv;
  run.tokens_per_s = s.tokens_per_s;
  run.final_loss = s.final_loss;
  StatusOr<int64_t> id = store->PutTrainingRun(run, prov);
  if (!id.ok()) {
    err << "tune: warning: training run not recorded: " << id.status().message()
        << "\n";
    return;
  }
  err << "tune: recorded training run " << id.value() << " in "
      << store->path();
  if (candidate_id > 0) err << " (candidate " << candidate_id << ")";
  err << "\n";
}

class TrainCommand : public Command {
 public:
  explicit TrainCommand(CLI::App *app) {
    CLI::App *sub = app->add_subcommand(
        "train",
        "train a model with the engine (a config from 'tune search --out', "
        "or flags)");
    AddTrainFlags(sub, &flags_);
    sub->footer(kTrainExamples);
  }

  Status Run(std::ostream &out, std::ostream &err) override {
    if (engine::LaunchedUnderMpi()) return RunAsMpiRank(out, err);
    if (LaunchedByTuneTrain()) {
      return Status::Internal(
          "this rank was started by 'tune train' through mpirun but sees no "
          "MPI environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK)");
    }
    if (flags_.no_db && !flags_.db.empty()) {
      return Status::InvalidArgument("--db and --no-db contradict each other",
                                     "pass one of them");
    }
    StatusOr<TrainPlan> plan = ResolveTrainFlags(flags_);
    if (!plan.ok()) return plan.status();
    MESHTUNE_RETURN_IF_ERROR(ValidateTrainPlan(plan.value()));
    StatusOr<std::unique_ptr<engine::data::TokenDataset>> dataset =
        engine::data::OpenTrainingData(plan->data,
                                       plan->config.model.vocab_size);
    if (!dataset.ok()) return dataset.status();

    // A layout the CUDA engine cannot run is refused before ranks start.
    if (plan->backend == "cuda") {
      MESHTUNE_RETURN_IF_ERROR(
          engine::backends::CheckTrainerSupported("cuda", plan->config));
    }
    if (plan->nproc > 1) {
      if (!engine::MpiAvailable()) {
        return Status::Unimplemented(
            "this tune was built without MPI, so it cannot run " +
                std::to_string(plan->nproc) + " ranks",
            "install Open MPI (apt-get install libopenmpi-dev openmpi-bin) "
            "and rebuild, or train with tp·pp·cp·dp = 1");
      }
      if (!flags_.db.empty()) {
        // An explicit --db that cannot be opened fails before the ranks
        // start; rank 0 opens it again to record the run.
        StatusOr<std::unique_ptr<results::Store>> db = OpenTrainDb(flags_, err);
        if (!db.ok()) return db.status();
      }
      return RunRanksUnderMpirun(plan->nproc, TrainFlagsToArgs(flags_));
    }
    std::vector<std::unique_ptr<engine::Communicator>> world =
        engine::MakeLocalWorld(1);
    // SIGTERM/SIGINT/SIGHUP stop after the current step (checkpoint saved
    // with --save); a second one kills, as an impatient Ctrl-C expects.
    engine::InstallStopSignalHandlers(/*repeat_kills=*/true);
    return TrainRank(plan.value(), *dataset.value(), world[0].get(),
                     /*under_mpi=*/false, out, err);
  }

 private:
  // This process is one rank of an MPI job (started by us or by the user).
  Status RunAsMpiRank(std::ostream &out, std::ostream &err) {
    if (!engine::MpiAvailable()) {
      return Status::Unimplemented(
          "tune runs under mpirun but was built without MPI",
          "install Open MPI (libopenmpi-dev) and rebuild");
    }
    // A stop signal (forwarded by the launcher, tuner/train/launcher.h, or
    // sent by Slurm or mpirun) stops every rank after the same step; a
    // repeat (the same SIGTERM from two senders) must not kill mid-save.
    engine::InstallStopSignalHandlers(/*repeat_kills=*/false);
    StatusOr<std::unique_ptr<engine::Communicator>> world =
        engine::MakeMpiWorld();
    if (!world.ok()) return world.status();
    engine::Communicator *w = world.value().get();

    std::unique_ptr<engine::data::TokenDataset> dataset;
    StatusOr<TrainPlan> plan = Status::Internal("not resolved");
    const Status setup = [&]() -> Status {
      if (flags_.no_db && !flags_.db.empty()) {
        return Status::InvalidArgument("--db and --no-db contradict each other",
                                       "pass one of them");
      }
      plan = ResolveTrainFlags(flags_);
      if (!plan.ok()) return plan.status();
      MESHTUNE_RETURN_IF_ERROR(ValidateTrainPlan(plan.value()));
      if (plan->config.parallel.world() != w->size()) {
        return Status::InvalidArgument(
            "the MPI job has " + std::to_string(w->size()) +
                " ranks but tp·pp·cp·dp = " +
                std::to_string(plan->config.parallel.world()),
            "start it with mpirun -np " +
                std::to_string(plan->config.parallel.world()) +
                ", or change --tp/--pp/--cp/--dp");
      }
      StatusOr<std::unique_ptr<engine::data::TokenDataset>> d =
          engine::data::OpenTrainingData(plan->data,
                                         plan->config.model.vocab_size);
      if (!d.ok()) return d.status();
      dataset = std::move(d.value());
      return Status::Ok();
    }();
    MESHTUNE_RETURN_IF_ERROR(AgreeOnSetup(setup, w, err));

    const Status trained =
        TrainRank(plan.value(), *dataset, w, /*under_mpi=*/true, out, err);
    if (!trained.ok() && engine::StoppedAtStepBoundary()) {
      // Every rank stopped after the same iteration: rank 0 says so, the
      // others leave quietly with the same exit code. The barrier keeps
      // every rank alive until rank 0 has moved the last checkpoint into
      // place: mpirun kills the job once one rank exits non-zero.
      const bool root = w->rank() == 0;
      out.flush();
      w->Barrier();
      world.value().reset();
      engine::FinalizeMpi();
      if (root) return trained;
      err.flush();
      std::exit(trained.ExitCode());
    }
    if (!trained.ok() && w->size() > 1) {
      // The other ranks may be waiting in a collective: stop them all.
      out.flush();
      engine::AbortAllRanks(ErrorText(trained, w->rank()), trained.ExitCode());
    }
    world.value().reset();
    engine::FinalizeMpi();
    return trained;
  }

  // Every rank checked its inputs; the job goes on only if all passed. Rank
  // 0 reports its own error; a rank that failed while rank 0 did not
  // reports its own, with its rank number. The other ranks leave quietly
  // (std::exit after MPI_Finalize, so RunTune prints nothing for them) with
  // the job's exit code: an input error is printed once, not once per rank.
  static Status AgreeOnSetup(const Status &setup, engine::Communicator *w,
                             std::ostream &err) {
    const float code = static_cast<float>(setup.ExitCode());
    // [rank 0's exit code, the highest exit code of any rank]
    float votes[2] = {w->rank() == 0 ? code : 0.0f, code};
    w->AllReduceMax(votes, 2);
    if (votes[1] == 0) return Status::Ok();
    const int root_code = static_cast<int>(votes[0]);
    const int job_code = static_cast<int>(votes[1]);
    if (w->rank() == 0) {
      engine::FinalizeMpi();
      if (!setup.ok()) return setup;
      const std::string msg =
          "another rank could not start; see its message above";
      return job_code == 2 ? Status::InvalidArgument(msg)
                           : Status::IoError(msg);
    }
    if (!setup.ok() && root_code == 0) {
      err << ErrorText(setup, w->rank()) << "\n";
    }
    err.flush();
    engine::FinalizeMpi();
    std::exit(root_code != 0 ? root_code : job_code);
  }

  static std::string ErrorText(const Status &s, int rank) {
    std::string text =
        "tune: error: rank " + std::to_string(rank) + ": " + s.message();
    if (!s.hint().empty()) text += "\ntune: hint: " + s.hint();
    return text;
  }

  // The training proper, on every rank; world rank 0 prints and records.
  Status TrainRank(const TrainPlan &plan,
                   const engine::data::TokenDataset &dataset,
                   engine::Communicator *world, bool under_mpi,
                   std::ostream &out, std::ostream &err) {
    const bool root = world->rank() == 0;
    const engine::TrainConfig &c = plan.config;
    std::unique_ptr<results::Store> store;
    // The search candidate this run is stored against, once checked.
    std::optional<StoredCandidate> linked;
    if (root) {
      StatusOr<std::unique_ptr<results::Store>> db = OpenTrainDb(flags_, err);
      if (!db.ok()) return db.status();
      store = std::move(db.value());
      if (plan.search.has_value()) {
        LinkCheck check =
            CheckRunLink(store.get(), flags_.no_db, *plan.search, c);
        if (check.linked) {
          linked = std::move(check.stored);
        } else {
          err << NotLinkedWarning(*plan.search, check.reason) << std::endl;
        }
      }
    }
    // --distributed-timeout-minutes, for the CUDA trainer's host
    // collectives too (Trainer::Create sets it for the CPU engine).
    world->set_timeout_s(c.distributed_timeout_s);
    // This rank's share of the job: on its GPU (one per rank, data
    // parallel) or its CPU cores.
    StatusOr<std::unique_ptr<engine::Trainer>> trainer =
        engine::backends::CreateTrainer(plan.backend, c, &dataset, world);
    if (!trainer.ok()) return trainer.status();
    const std::vector<engine::RankMemory> memory =
        trainer.value()->all_memory();

    // Progress goes to stdout, or to stderr when stdout carries the JSON.
    std::ostream &progress = flags_.json ? err : out;
    StepTimePrediction prediction;
    if (root) {
      prediction = PredictRun(plan, store.get(), linked ? &*linked : nullptr);
      PrintStartup(progress, plan, dataset, under_mpi, memory, prediction);
    }
    std::vector<engine::IterationLog> logs;
    std::vector<engine::IterationLog> interval;
    const auto on_log = [&](const engine::IterationLog &log) {
      logs.push_back(log);
      interval.push_back(log);
      if (log.iteration % c.log_interval == 0 ||
          log.iteration == c.train_iters) {
        progress << FormatIterationLine(interval, c.train_iters,
                                        c.global_batch_size,
                                        EtaSeconds(logs, c.train_iters))
                 << std::endl;
        interval.clear();
      }
    };
    // A save pauses the log for as long as it takes: say so, and how long.
    trainer.value()->SetCheckpointObserver(
        [&](const engine::CheckpointEvent &event) {
          progress << FormatCheckpointLine(event) << std::endl;
        });
    MESHTUNE_RETURN_IF_ERROR(trainer.value()->Run(on_log));
    if (!root) return Status::Ok();

    const TrainSummary summary =
        SummarizeRun(logs, c.global_batch_size * c.seq());
    const StoredCandidate *link = linked ? &*linked : nullptr;
    if (flags_.json) {
      out << TrainRunToJson(c, logs, summary, memory, prediction, link,
                            plan.backend)
                 .dump(2)
          << "\n";
    } else {
      out << FormatSummary(summary, prediction);
    }
    out.flush();
    if (store != nullptr && !logs.empty()) {
      RecordRun(store.get(), plan, summary, link ? link->candidate.id : 0, err);
    }
    return Status::Ok();
  }

  TrainFlags flags_;
};

}  // namespace

std::unique_ptr<Command> AddTrainCommand(CLI::App *app) {
  return std::make_unique<TrainCommand>(app);
}

}  // namespace meshtune::tuner
