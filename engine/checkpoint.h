// Distributed checkpoints (Megatron-style directory, our own file format).
//
// Layout under the save directory:
//   latest_checkpointed_iteration.txt     "50\n" (Megatron's tracker file)
//   iter_0000050/metadata.json            model, parallel config, iteration,
//                                         consumed samples, every shard file
//                                         and the global slices it holds
//   iter_0000050/shard_tp{t}_pp{p}.bin    parameters and AdamW m, v of
//                                         (tp t, pp p) ranks
// One shard per model-parallel rank: dp replicas hold the same parameters,
// so dp rank 0 writes them (with the distributed optimizer the m, v shards
// are gathered to dp rank 0 first). A checkpoint is written under
// iter_N.tmp-<pid> and renamed into place, then the tracker file is
// replaced by rename, so a process killed during a save leaves the
// previous checkpoint intact and loadable.
//
// Loading reads, for every parameter this rank holds, its global slice from
// whichever shards contain it (ParamInfo::Blocks), so a checkpoint saved as
// tp2·pp2 loads into tp1·pp4, tp4·pp1, with or without the distributed
// optimizer. Parameters are matched by name and global shape; a mismatch
// is an error naming the tensor.
#ifndef MESHTUNE_ENGINE_CHECKPOINT_H_
#define MESHTUNE_ENGINE_CHECKPOINT_H_

#include <cstdint>
#include <string>

#include "engine/optimizer.h"
#include "engine/param_store.h"
#include "engine/process_groups.h"
#include "engine/train_config.h"
#include "search_spaces/status.h"

namespace meshtune::engine {

struct CheckpointState {
  int64_t iteration = 0;         // optimizer steps completed
  int64_t consumed_samples = 0;  // Megatron consumed_train_samples
};

// Collective over groups.world. Writes iteration `state.iteration`.
Status SaveCheckpoint(const std::string& dir, const TrainConfig& config,
                      const CheckpointState& state, const ParamStore& store,
                      const Optimizer& optimizer, ProcessGroups& groups);

// Collective over groups.world. Loads the newest checkpoint under `dir`
// (per the tracker file) into `store` and `optimizer`; fills `state`.
// NotFound when `dir` has no checkpoint.
Status LoadCheckpoint(const std::string& dir, const TrainConfig& config,
                      CheckpointState* state, ParamStore& store,
                      Optimizer& optimizer, ProcessGroups& groups);

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_CHECKPOINT_H_
