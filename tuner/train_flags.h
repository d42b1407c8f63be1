// The flags of `tune train` and their resolution into a training plan:
// the engine's TrainConfig, the data to read and the number of processes.
//
// Precedence (documented in `tune train --help` and the README): a flag
// given on the command line wins over the --config file, which wins over
// the defaults (gbs and seq_length from the model, 50 steps, TrainConfig's
// optimizer defaults). Flags stay strings until resolution so every
// malformed value is one Status naming the flag (as tuner/inputs.h does for
// search and estimate, whose parsers this reuses).
#ifndef MESHTUNE_TUNER_TRAIN_FLAGS_H_
#define MESHTUNE_TUNER_TRAIN_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/train_config.h"
#include "search_spaces/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace meshtune::tuner {

// Iterations run when neither --steps nor the config file's train_iters
// says otherwise.
inline constexpr int64_t kDefaultTrainSteps = 50;

// Flags exactly as given. Empty string / nullopt / empty list = not given.
struct TrainFlags {
  std::string config;  // --config FILE (tune search --out)
  std::string model;   // preset name or model YAML
  std::string tp, pp, vpp, dp, mbs, gbs, seq_len, recompute;
  std::optional<bool> sp;         // --sp / --no-sp
  std::optional<bool> dist_opt;   // --dist-opt / --no-dist-opt
  std::string steps;              // Megatron --train-iters
  std::vector<std::string> data;  // Megatron --data-path tokens
  std::string nproc;
  // Megatron optimizer / schedule arguments.
  std::string lr, min_lr, lr_warmup_iters, lr_decay_style, weight_decay,
      clip_grad, seed;
  std::string save, save_interval, load, log_interval;
  std::string db;  // --db PATH
  bool no_db = false;
  bool json = false;
};

// Registers the flags on `app` (the `train` subcommand); `flags` must
// outlive the parse.
void AddTrainFlags(CLI::App* app, TrainFlags* flags);

// A resolved run: what every rank trains, and on how many processes.
struct TrainPlan {
  engine::TrainConfig config;     // model_flops_per_iteration filled in
  engine::data::DataConfig data;  // data_path, seq_length, num_samples
  int64_t nproc = 1;              // == config.parallel.world()
};

// Reads --config (if any), applies the flags over it and fills the
// defaults. Errors: malformed values (InvalidArgument naming the flag),
// config file problems (file:line), no model at all. Does not check the
// combination (ValidateTrainPlan does) nor touch the data.
StatusOr<TrainPlan> ResolveTrainFlags(const TrainFlags& flags);

// Checks the plan before any rank starts, in this order: TrainConfig::
// Validate (its Status as is: InvalidArgument exit 2, Unimplemented exit 1),
// --nproc == tp·pp·dp, --load names an existing directory, --save can be
// created (it is created, as Megatron does).
Status ValidateTrainPlan(const TrainPlan& plan);

// The flags as command-line arguments after `tune train` (for re-launching
// this command as MPI ranks): every flag that was given, with its value as
// typed, in a fixed order.
std::vector<std::string> TrainFlagsToArgs(const TrainFlags& flags);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_TRAIN_FLAGS_H_
