// Distributed checkpoints (Megatron-style directory, our own file format).
//
// Layout under the save directory:
//   latest_checkpointed_iteration.txt     "50\n" (Megatron's tracker file)
//   iter_0000050/metadata.json            model, parallel config, iteration,
//                                         consumed samples, every shard file
//                                         and the global slices it holds
//   iter_0000050/shard_tp{t}_pp{p}.bin    parameters and AdamW m, v of
//                                         (tp t, pp p) ranks
//   iter_0000050/shard_ep{e}_etp{x}_pp{p}.bin   expert parameters and their
//                                         m, v (expert parallelism only)
// One shard per model-parallel rank: dp replicas hold the same parameters,
// so dp rank 0 writes them (with the distributed optimizer the m, v shards
// are gathered first). With expert parallelism (ep > 1 or etp != tp) the
// dp replicas hold different experts: the (tp, pp) shards keep the dense
// parameters and edp rank 0 of every (ep, etp, pp) position writes its
// experts, each tensor one global expert, so any other ep/etp loads them. A
// checkpoint is written under iter_N.tmp-<pid> and renamed into place, then the
// tracker file is replaced by rename, so a process killed during a save leaves
// the previous checkpoint intact and loadable. What such a kill leaves (an
// iter_N.tmp-<pid> directory, a tracker temp file) is removed by the next
// save or load in that directory once process <pid> is gone; the temp files
// of a live process (a save running right now) are never touched.
//
// Every file of a checkpoint is read only if it is a regular file (a FIFO
// named as a shard would block the reader for ever), and what metadata.json
// says is checked before it is used (checkpoint_format.h ReadMetadata).
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

#include "engine/comm/communicator.h"
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

// Collective over `world`. Loads only the parameters of the newest
// checkpoint under `dir` into `store` (every tensor it registered, from
// any saved layout; no optimizer state): for inference (engine/inference/).
// `model_name` only explains a mismatch. Errors as LoadCheckpoint's; on
// error `store` is unchanged.
Status LoadCheckpointParams(const std::string& dir,
                            const std::string& model_name, ParamStore& store,
                            Communicator& world);
// The model name the newest checkpoint under `dir` was saved with (its
// metadata.json; no shard read). Errors as ReadCheckpointState's.
StatusOr<std::string> CheckpointModelName(const std::string& dir);
// The state of the newest checkpoint under `dir` (tracker file and
// metadata.json, validated) without reading any shard: for the checks made
// before ranks start. Errors as LoadCheckpoint's.
StatusOr<CheckpointState> ReadCheckpointState(const std::string& dir);

// The number of samples the data of a run of `config` resumed from `state`
// (loaded from `dir`, named in messages) must hold:
// max(train_iters·gbs, consumed_samples + (train_iters - iteration)·gbs).
// The first term is what a run without a checkpoint reads, so resuming with
// the same gbs sees the same data order as a straight run; the second
// covers a checkpoint that consumed more (saved with a larger gbs).
// InvalidArgument when the checkpoint is already at iteration >= train_iters
// (nothing to train) or the count overflows.
StatusOr<int64_t> ResumeSamples(const std::string& dir,
                                const CheckpointState& state,
                                const TrainConfig& config);

// ResumeSamples, and InvalidArgument when the data holds fewer than that
// (`available_samples`): a trainer calls it after LoadCheckpoint so that a
// checkpoint changed since the data was sized is an error, not a read past
// the end of the data.
Status CheckResume(const std::string& dir, const CheckpointState& state,
                   const TrainConfig& config, int64_t available_samples);

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_CHECKPOINT_H_
