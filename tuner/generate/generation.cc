#include "tuner/generate/generation.h"

#include <algorithm>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>

#include "costmodel/model_stats.h"
#include "engine/backends/registry.h"
#include "engine/comm/local_communicator.h"
#include "profiler/cpu_backend.h"
#include "tuner/io/text_format.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace meshtune::tuner {
namespace {

using engine::Communicator;
using engine::inference::Generation;

// Every rank's Status is the same (creation checks the same config, the
// checkpoint load agrees over the ranks, Generate checks the same prompts),
// so rank 0's is the run's.
struct Shared {
  std::mutex mu;
  Status status = Status::Ok();
  GenerationResult result;
};

double Mean(const std::vector<double>& v) {
  return v.empty() ? 0.0
                   : std::accumulate(v.begin(), v.end(), 0.0) /
                         static_cast<double>(v.size());
}

Status RunRank(const GenerationRequest& r, Communicator& world,
               GenerationResult* out) {
#ifdef _OPENMP
  // The ranks share the cores: each one's GEMMs get its part.
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  omp_set_num_threads(r.threads_per_rank > 0 ? r.threads_per_rank
                                             : std::max(1, cores / r.tp));
#endif
  const int64_t t = static_cast<int64_t>(r.prompts.front().size());
  auto gen = engine::backends::CreateGenerator(
      r.backend, r.config, &world, static_cast<int64_t>(r.prompts.size()),
      t + r.max_new_tokens);
  if (!gen.ok()) return gen.status();
  if (r.checkpoint_dir.empty()) {
    MESHTUNE_RETURN_IF_ERROR((*gen)->InitWeights());
  } else {
    MESHTUNE_RETURN_IF_ERROR((*gen)->LoadCheckpoint(r.checkpoint_dir));
  }
  out->kv_cache_bytes_per_rank = (*gen)->kv_cache_bytes();
  for (int i = 0; i <= r.repeats; ++i) {
    StatusOr<Generation> g = (*gen)->Generate(
        r.prompts, r.max_new_tokens, r.sampling, r.stop_token, r.cached_prefix);
    if (!g.ok()) return g.status();
    if (i > 0 || r.repeats == 0) {
      out->ttft_s.push_back(g->prefill_s);
      out->tpot_s.push_back(Mean(g->decode_step_s));
    }
    out->generation = std::move(g.value());
  }
  return Status::Ok();
}

}  // namespace

double GenerationHostBytes(const GenerationRequest& r) {
  const auto& m = r.config.model;
  const costmodel::ModelStats stats = costmodel::ComputeModelStats(
      m, costmodel::PaddedVocabSize(m.vocab_size, r.tp), m.seq_length);
  double bytes = 8.0 * stats.total_params;
  if (r.backend == "cpu" && !r.prompts.empty()) {
    const double d = m.kv_channels > 0 ? m.kv_channels
                                       : static_cast<double>(m.hidden_size) /
                                             m.num_attention_heads;
    const double capacity =
        static_cast<double>(r.prompts.front().size()) + r.max_new_tokens;
    bytes += 2.0 * m.num_layers * r.prompts.size() * m.num_query_groups *
             capacity * d * 4.0;
  }
  return bytes;
}

StatusOr<GenerationResult> RunGeneration(const GenerationRequest& request) {
  if (request.tp < 1 || request.prompts.empty() ||
      request.prompts.front().empty() || request.repeats < 0) {
    return Status::InvalidArgument(
        "generation needs tp >= 1, a non-empty prompt and repeats >= 0",
        "pass --tp 1 or more and a --prompt");
  }
  const double have_gib = profiler::ReadCpuInfo().memory_gib;
  const double need_gib = GenerationHostBytes(request) / (1024.0 * 1024 * 1024);
  // An unreadable /proc/meminfo (0) cannot tell.
  if (have_gib > 0 && need_gib > have_gib) {
    return Status::Infeasible(
        "generating with " + request.config.model.name + " needs " +
            Fixed(need_gib, 1) + " GiB of host memory (fp32 weights and " +
            "their gradient buffer" +
            (request.backend == "cpu" ? ", the KV cache" : "") +
            "); this machine has " + Fixed(have_gib, 1) + " GiB",
        "generate with a model that fits here (tune models), fewer prompts "
        "or fewer --max-new-tokens");
  }
  Shared shared;
  engine::RunLocalRanks(request.tp, [&](Communicator& world) {
    GenerationResult mine;
    Status s = RunRank(request, world, &mine);
    if (world.rank() != 0) return;
    std::lock_guard<std::mutex> lock(shared.mu);
    shared.status = s;
    shared.result = std::move(mine);
  });
  if (!shared.status.ok()) return shared.status;
  return std::move(shared.result);
}

}  // namespace meshtune::tuner
