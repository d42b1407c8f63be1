// The flags of `tune train` and their resolution into a training plan:
// the engine's TrainConfig, the data to read and the number of processes.
//
// Precedence (documented in `tune train --help` and the README): a flag
// given on the command line wins over the --config file, which wins over
// the defaults (gbs and seq_length from the model, 50 steps, TrainConfig's
// optimizer defaults). `--from-search ID [--rank R]` takes the place of
// --config: the model, global batch size, sequence length and parallel
// config come from that search candidate in the results database, and no
// flag may change them (the run would no longer be what was predicted).
// Flags stay strings until resolution so every
// malformed value is one Status naming the flag (as tuner/inputs/inputs.h does
// for search and estimate, whose parsers this reuses).
#ifndef MESHTUNE_TUNER_TRAIN_FLAGS_H_
#define MESHTUNE_TUNER_TRAIN_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/train_config.h"
#include "search_spaces/status.h"
#include "tuner/inputs/search_link.h"

namespace CLI {
class App;
}  // namespace CLI

namespace meshtune::tuner {

// Iterations run when neither --steps nor the config file's train_iters
// says otherwise.
inline constexpr int64_t kDefaultTrainSteps = 50;

// Flags exactly as given. Empty string / nullopt / empty list = not given.
struct TrainFlags {
  std::string config;       // --config FILE (tune search --out)
  std::string from_search;  // --from-search ID (a searches.id)
  std::string rank;         // --rank R (with --from-search; default 1)
  std::string model;        // preset name or model YAML
  std::string tp, pp, vpp, dp, mbs, gbs, seq_len, recompute;
  // --cp: context parallelism. --ep / --etp: expert parallel sizes (MoE
  // models).
  std::string cp, ep, etp;
  // Megatron --moe-aux-loss-coeff (default 0) and
  // --moe-router-load-balancing-type (aux_loss, seq_aux_loss, none).
  std::string moe_aux_loss_coeff, moe_load_balancing_type;
  std::string moe_bias_update_rate;
  std::optional<bool> sp;         // --sp / --no-sp
  std::optional<bool> dist_opt;   // --dist-opt / --no-dist-opt
  std::string steps;              // Megatron --train-iters
  std::vector<std::string> data;  // Megatron --data-path tokens
  std::string nproc;
  // Megatron optimizer / schedule arguments.
  std::string lr, min_lr, lr_warmup_iters, lr_decay_style, weight_decay,
      clip_grad, seed;
  // Megatron --hidden-dropout / --attention-dropout (engine default 0).
  std::string hidden_dropout, attention_dropout;
  std::string save, save_interval, load, log_interval;
  // Megatron --distributed-timeout-minutes (a number > 0; default 10).
  std::string distributed_timeout_minutes;
  std::string db;  // --db PATH
  bool no_db = false;
  bool json = false;
  std::string backend;  // --backend cpu|cuda (default cpu)
  std::string gpu;      // --gpu PRESET: the cuda run's prediction hardware
};

// Registers the flags on `app` (the `train` subcommand); `flags` must
// outlive the parse.
void AddTrainFlags(CLI::App* app, TrainFlags* flags);

// A resolved run: what every rank trains, and on how many processes.
struct TrainPlan {
  engine::TrainConfig config;     // model_flops_per_iteration filled in
  engine::data::DataConfig data;  // data_path, seq_length, num_samples
  int64_t nproc = 1;              // == config.parallel.world()
  // "cpu" (Eigen + MPI ranks) or "cuda" (engine/cuda/trainer.h: one GPU
  // per rank, or ranks sharing a GPU through staged collectives).
  std::string backend = "cpu";
  // With cuda: the GPU preset the step-time prediction uses ("" = the one
  // matching the device's name, tuner/machine/local_gpu.h).
  std::string gpu;
  // The search candidate this run claims to be: the --config file's search:
  // section, or --from-search. Whether the run is stored against it is
  // decided when its database is open (tuner/inputs/search_link.h
  // CheckRunLink).
  std::optional<SearchLink> search;
};

// Reads --config or --from-search (if any), applies the flags over it and
// fills the defaults. With --load of an existing directory, reads its
// newest checkpoint's metadata (engine/checkpoint.h ReadCheckpointState) to
// size the data for the resumed run (ResumeSamples); its errors, and a
// checkpoint already at --steps (nothing to train), are returned as is.
// Errors: malformed values (InvalidArgument naming the flag), config file
// problems (file:line), no model at all; with
// --from-search (exit 2 each): --config or a flag that changes the model,
// batch or layout next to it, --no-db, an unknown search id, a rank out of
// range, an infeasible candidate, a model that is not a preset. Reads the
// database for --from-search (read-only); does not check the combination
// (ValidateTrainPlan does) nor touch the data.
StatusOr<TrainPlan> ResolveTrainFlags(const TrainFlags& flags);

// Checks the plan before any rank starts, in this order: the fp32 state
// fits this machine's memory (CheckHostMemory), TrainConfig::Validate (its
// Status as is: InvalidArgument exit 2, Unimplemented exit 1), --nproc ==
// tp·pp·cp·dp, --load names an existing directory, --save can be created (it
// is created, as Megatron does).
Status ValidateTrainPlan(const TrainPlan& plan);

// Bytes every rank of `c` together holds at least, whatever the
// activations: fp32 weights and gradients on every data-parallel (and
// context-parallel) replica plus the two fp32 Adam moments (sharded over dp
// with the distributed optimizer, replicated without).
double MinStateBytes(const engine::TrainConfig& c);

// Infeasible (exit 2) when MinStateBytes(c) exceeds `host_memory_gib`: a
// plan made for a GPU cluster (gpt3-175b on 1024 GPUs) cannot start its
// ranks on this machine, and trying would exhaust its memory first.
Status CheckHostMemory(const engine::TrainConfig& c, double host_memory_gib);

// The flags as command-line arguments after `tune train` (for re-launching
// this command as MPI ranks): every flag that was given, with its value as
// typed, in a fixed order.
std::vector<std::string> TrainFlagsToArgs(const TrainFlags& flags);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_TRAIN_FLAGS_H_
