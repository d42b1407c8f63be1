// Real multi-process training under mpirun: the tiny GPT and LLaMA models
// trained with a parallel layout over MPI ranks reproduce, step by step,
// the loss and gradient norm of the single-rank run of the same model and
// data (computed in-process on world rank 0 first). The in-process
// equivalence tests (tests/engine/equivalence_test.cc) cover the same
// layouts on threads and compare every weight; this one proves the MPI
// transport and launch path.
//
// Usage: mpirun -np W meshtune_engine_mpi_train_test TP PP VPP DP SP DIST_OPT
// (W = TP·PP·DP). Prints "train mpi test: ok" on rank 0 on success.
//
// With a seventh argument `dropout`, both runs use hidden and attention
// dropout 0.1 (the masks are layout-independent, engine/cpu/dropout_mask.h).
//
// With a seventh argument `moeN`, the model is the tiny MoE
// (testing::TinyMoeConfig) trained with ep = N: the expert all-to-all over
// MPI (one run; the MoE model has no GPT variant).
//
// With a seventh argument `kill`, world rank 1 kills itself (SIGKILL) a
// moment into a long run, in the middle of the pipeline's point-to-point
// traffic: mpirun must then end every other rank instead of leaving them
// blocked in a receive (the ctest checks mpirun's message and a timeout).
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/local_communicator.h"
#include "engine/comm/mpi_communicator.h"
#include "engine/trainer.h"
#include "tests/engine/engine_test_util.h"
#include "tests/engine/tolerance.h"

namespace {

using meshtune::engine::Communicator;
using meshtune::engine::TrainConfig;
using meshtune::engine::Trainer;
namespace testing = meshtune::engine::testing;

struct Curve {
  std::vector<double> loss, grad_norm;
};

Curve Train(const TrainConfig& config, Communicator* world) {
  testing::SyntheticDataset data(config.seq(), config.model.vocab_size);
  auto trainer = Trainer::Create(config, &data, world);
  if (!trainer.ok()) {
    meshtune::engine::AbortAllRanks(
        "train mpi test: " + trainer.status().message(), 1);
  }
  meshtune::Status s = (*trainer)->Run({});
  if (!s.ok())
    meshtune::engine::AbortAllRanks("train mpi test: " + s.message(), 1);
  Curve c;
  for (const auto& l : (*trainer)->history()) {
    c.loss.push_back(l.loss);
    c.grad_norm.push_back(l.grad_norm);
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7 && argc != 8) {
    std::fprintf(stderr,
                 "usage: %s TP PP VPP DP SP DIST_OPT [kill|dropout|moeEP]\n",
                 argv[0]);
    return 2;
  }
  const bool kill_one = argc == 8 && std::string(argv[7]) == "kill";
  const bool dropout = argc == 8 && std::string(argv[7]) == "dropout";
  const int moe_ep = argc == 8 && std::string(argv[7]).rfind("moe", 0) == 0
                         ? std::atoi(argv[7] + 3)
                         : 0;
  auto world = meshtune::engine::MakeMpiWorld();
  if (!world.ok()) {
    std::fprintf(stderr, "train mpi test: %s\n",
                 world.status().message().c_str());
    return 1;
  }
  Communicator* w = world->get();
  bool all_ok = true;
  for (bool llama : {false, true}) {
    if (moe_ep > 0 && !llama) continue;
    TrainConfig base =
        moe_ep > 0 ? testing::TinyMoeConfig() : testing::TinyConfig(llama);
    if (dropout) {
      base.hidden_dropout = 0.1f;
      base.attention_dropout = 0.1f;
    }
    TrainConfig config = base;
    config.parallel.tp = std::atoi(argv[1]);
    config.parallel.pp = std::atoi(argv[2]);
    config.parallel.vpp = std::atoi(argv[3]);
    config.parallel.dp = std::atoi(argv[4]);
    config.parallel.sp = std::atoi(argv[5]) != 0;
    config.parallel.dist_opt = std::atoi(argv[6]) != 0;
    if (moe_ep > 0) config.parallel.ep = moe_ep;
    if (config.parallel.world() != w->size()) {
      meshtune::engine::AbortAllRanks(
          "train mpi test: world size does not match TP·PP·DP", 2);
    }
    if (kill_one) {
      config.train_iters = 1000000;  // still running when rank 1 dies
      if (w->rank() == 1) {
        std::thread([] {
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
          std::raise(SIGKILL);
        }).detach();
      }
      Train(config, w);
      std::printf(
          "train mpi test: rank %d finished a run that should have "
          "been aborted\n",
          w->rank());
      return 1;
    }
    Curve reference;
    if (w->rank() == 0) {
      auto local = meshtune::engine::MakeLocalWorld(1);
      reference = Train(base, local[0].get());
    }
    const Curve run = Train(config, w);
    if (w->rank() != 0) continue;
    for (size_t i = 0; i < reference.loss.size(); ++i) {
      const bool ok =
          i < run.loss.size() &&
          testing::WithinFp32Tolerance(run.loss[i], reference.loss[i]) &&
          testing::WithinFp32Tolerance(run.grad_norm[i],
                                       reference.grad_norm[i]);
      std::printf("%s step %2zu: loss %.7f vs %.7f, grad norm %.7f vs %.7f%s\n",
                  moe_ep > 0 ? "moe"
                  : llama    ? "llama"
                             : "gpt",
                  i + 1, i < run.loss.size() ? run.loss[i] : -1.0,
                  reference.loss[i],
                  i < run.grad_norm.size() ? run.grad_norm[i] : -1.0,
                  reference.grad_norm[i], ok ? "" : "  MISMATCH");
      all_ok = all_ok && ok;
    }
  }
  if (w->rank() == 0) {
    std::printf(all_ok ? "train mpi test: ok\n" : "train mpi test: FAILED\n");
  }
  world->reset();
  meshtune::engine::FinalizeMpi();
  return all_ok ? 0 : 1;
}
