#include "engine/trainer.h"

#include <cmath>
#include <string>

namespace meshtune::engine {

IterationLog MakeIterationLog(const TrainConfig& config, int world_size,
                              int64_t iteration, float lr, double loss,
                              double grad_norm, double step_s,
                              int64_t consumed_samples) {
  IterationLog log;
  log.iteration = iteration;
  log.lr = lr;
  log.loss = loss;
  log.grad_norm = grad_norm;
  log.step_s = step_s;
  log.tokens_per_s =
      static_cast<double>(config.global_batch_size * config.seq()) / step_s;
  log.tflops_per_rank = config.model_flops_per_iteration / step_s /
                        static_cast<double>(world_size) / 1e12;
  log.consumed_samples = consumed_samples;
  return log;
}

std::vector<RankMemory> GatherRankMemory(Communicator* world,
                                         const RankMemory& me) {
  const int w = world->size();
  constexpr int kFields = 11;
  std::vector<double> table(static_cast<size_t>(w) * kFields, 0.0);
  double* row = table.data() + static_cast<size_t>(me.rank) * kFields;
  row[0] = me.rank;
  row[1] = me.tp_rank;
  row[2] = me.pp_rank;
  row[3] = me.dp_rank;
  row[4] = me.cp_rank;
  row[5] = static_cast<double>(me.num_params);
  row[6] = static_cast<double>(me.param_bytes);
  row[7] = static_cast<double>(me.grad_bytes);
  row[8] = static_cast<double>(me.optimizer_bytes);
  row[9] = me.ep_rank;
  row[10] = me.etp_rank;
  world->AllReduceSum(table.data(), static_cast<int64_t>(table.size()));
  std::vector<RankMemory> out(w);
  for (int r = 0; r < w; ++r) {
    const double* t = table.data() + static_cast<size_t>(r) * kFields;
    RankMemory& m = out[r];
    m.rank = static_cast<int>(t[0]);
    m.tp_rank = static_cast<int>(t[1]);
    m.pp_rank = static_cast<int>(t[2]);
    m.dp_rank = static_cast<int>(t[3]);
    m.cp_rank = static_cast<int>(t[4]);
    m.num_params = static_cast<int64_t>(t[5]);
    m.param_bytes = static_cast<int64_t>(t[6]);
    m.grad_bytes = static_cast<int64_t>(t[7]);
    m.optimizer_bytes = static_cast<int64_t>(t[8]);
    m.ep_rank = static_cast<int>(t[9]);
    m.etp_rank = static_cast<int>(t[10]);
  }
  return out;
}

Status CheckFiniteStep(int64_t iteration, double loss, bool grad_norm_finite) {
  if (std::isfinite(loss) && grad_norm_finite) return Status::Ok();
  return Status::Internal(
      "iteration " + std::to_string(iteration) + ": " +
      (!std::isfinite(loss) ? "loss is " + std::to_string(loss)
                            : std::string("gradient norm is not finite")) +
      "; training stopped (the last saved checkpoint is kept)");
}

}  // namespace meshtune::engine
