// Running the engine's generator (engine/inference/generator.h) from the
// tune command line: the tensor-parallel ranks as threads of this process
// (in-process communicators, engine/comm/local_communicator.h), the
// weights from a checkpoint or training's initialization, and rank 0's
// tokens and timings back. `tune generate` and `tune serve --validate` run
// it.
#ifndef MESHTUNE_TUNER_GENERATE_GENERATION_H_
#define MESHTUNE_TUNER_GENERATE_GENERATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/inference/generator.h"
#include "engine/train_config.h"
#include "search_spaces/status.h"

namespace meshtune::tuner {

struct GenerationRequest {
  engine::TrainConfig config;  // the model (parallel config ignored)
  // `tune train --save` directory; "" = the training init's weights.
  std::string checkpoint_dir;
  // [b][t]: prompts of one length.
  std::vector<std::vector<int32_t>> prompts;
  int64_t max_new_tokens = 1;
  engine::inference::SamplingOptions sampling;
  int32_t stop_token = -1;  // < 0: none
  // Positions of every prompt run before the clock starts, as a prefix
  // cache would hold them (Generator::Generate); the TTFTs time the rest.
  int64_t cached_prefix = 0;
  int tp = 1;  // ranks (threads)
  // "cpu" or "cuda" (engine/backends/registry.h CreateGenerator).
  std::string backend = "cpu";
  // OpenMP threads of each rank's ops; 0 = this machine's cores / tp (the
  // ranks share the cores). The `local` preset's one core per rank is 1.
  int threads_per_rank = 0;
  // Generations after a first untimed one (warm-up: page faults, thread
  // pools), whose timings are returned; tokens are the same every time.
  int repeats = 0;
};

struct GenerationResult {
  engine::inference::Generation generation;  // the last one's
  // Per timed generation (the first when repeats == 0): TTFT and the mean
  // decode step (TPOT), seconds.
  std::vector<double> ttft_s, tpot_s;
  int64_t kv_cache_bytes_per_rank = 0;
};

// Errors: the generator's (tp that does not divide the model, positions
// beyond the model's learned table, unimplemented model features) and the
// checkpoint's (a missing or corrupt directory, tensors of another model),
// as Statuses; tp < 1 is InvalidArgument; Infeasible (exit 2) when
// GenerationHostBytes exceeds this machine's memory, before anything is
// allocated.

StatusOr<GenerationResult> RunGeneration(const GenerationRequest& request);

// Host bytes the ranks of `request` hold together: the parameters in fp32
// twice (the ParamStore keeps a gradient beside every weight; the
// replicated norms counted once) and, on the CPU backend, the fp32 KV cache
// of every layer, sequence and position (2·layers·b·groups·capacity·d·4).
double GenerationHostBytes(const GenerationRequest& request);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_GENERATE_GENERATION_H_
