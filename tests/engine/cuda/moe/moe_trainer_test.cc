// The CUDA engine's MoE layer (engine/cuda/moe/) in training runs: one GPU
// against the CPU engine (bf16 against fp32: losses within 2 % per step,
// the aux loss too), and the expert-parallel layouts as thread ranks on
// the GPU(s) against the one-rank CUDA run of the same model and data
// (losses within 2 %, the tensors replicated over tp bitwise equal). The
// model: the small LLaMA of trainer_test_util.h with 8 experts (top-2),
// a shared expert and a dense first layer, aux loss 0.01. A distributed
// checkpoint with expert shards resumes on one rank, GPU and CPU.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/local_communicator.h"
#include "engine/cuda/gpt_model.h"
#include "engine/cuda/runtime/device.h"
#include "engine/cuda/trainer.h"
#include "engine/data/synthetic_dataset.h"
#include "engine/param_store.h"
#include "engine/trainer.h"
#include "gtest/gtest.h"
#include "tests/engine/cuda/trainer_test_util.h"
#include "tests/engine/engine_test_util.h"

namespace meshtune::engine::cuda {
namespace {

TrainConfig MoeConfig(double capacity_factor = 0) {
  TrainConfig c = SmallTrainConfig(/*llama=*/true);
  auto& m = c.model;
  m.name = "moe-gpu-test";
  m.num_experts = 8;
  m.moe_router_topk = 2;
  m.moe_ffn_hidden_size = 64;
  m.moe_shared_expert_intermediate_size = 64;
  m.moe_layer_pattern = {0, 1, 1, 1};
  m.moe_expert_capacity_factor = capacity_factor;
  c.moe_aux_loss_coeff = 0.01;
  c.parallel.mbs = 2;  // four micro-batches per step
  return c;
}

std::vector<double> AuxLosses(const Trainer& trainer) {
  std::vector<double> out;
  for (const IterationLog& log : trainer.history()) {
    out.push_back(log.load_balancing_loss.value_or(-1.0));
  }
  return out;
}

// Trains `config` on one rank: the CPU engine over `world` (a world of
// one that outlives the trainer), or the GPU when `world` is null. Null,
// with the test failed, when it cannot.
std::unique_ptr<Trainer> TrainOneRank(const TrainConfig& config,
                                      const data::TokenDataset& dataset,
                                      Communicator* world) {
  auto t = world != nullptr ? Trainer::Create(config, &dataset, world)
                            : CreateCudaTrainer(config, &dataset);
  if (!t.ok()) {
    ADD_FAILURE() << t.status().message();
    return nullptr;
  }
  const Status st = (*t)->Run({});
  if (!st.ok()) {
    ADD_FAILURE() << st.message();
    return nullptr;
  }
  return std::move(t).value();
}

// Every step's value of `got` within `rtol` of `want`'s.
void ExpectStepsNear(const std::vector<double>& got,
                     const std::vector<double>& want, double rtol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], rtol * want[i]) << "step " << i + 1;
  }
}

TEST(CudaMoeTrainerTest, LossesMatchTheCpuTrainerWithinBf16Tolerance) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const TrainConfig config = MoeConfig();
  const data::SyntheticDataset dataset(config.seq(), config.model.vocab_size);
  auto world = MakeLocalWorld(1);
  const auto cpu = TrainOneRank(config, dataset, world[0].get());
  const auto gpu = TrainOneRank(config, dataset, nullptr);
  ASSERT_TRUE(cpu != nullptr && gpu != nullptr);
  const std::vector<double> got = Losses(*gpu);
  ExpectStepsNear(got, Losses(*cpu), 0.02);
  EXPECT_LT(got.back(), got.front() - 0.5) << "the GPU run did not learn";
  // The aux loss (Megatron's load_balancing_loss) near its CPU value.
  const std::vector<double> want_aux = AuxLosses(*cpu);
  for (double aux : want_aux) ASSERT_GT(aux, 0.0);
  ExpectStepsNear(AuxLosses(*gpu), want_aux, 0.05);
}

struct MoeLayout {
  const char* name;
  int64_t tp, pp, dp, ep, etp;  // etp 0: Megatron's default (= tp)
  bool sp;
  double capacity_factor;
  int64_t cp = 1;
  bool dist_opt = false;
};

void PrintTo(const MoeLayout& layout, std::ostream* os) { *os << layout.name; }

class CudaMoeParallelTest : public ::testing::TestWithParam<MoeLayout> {};

TEST_P(CudaMoeParallelTest, LossesMatchTheOneRankRun) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const MoeLayout& l = GetParam();
  const TrainConfig one = MoeConfig(l.capacity_factor);
  const data::SyntheticDataset dataset(one.seq(), one.model.vocab_size);
  const auto single = TrainOneRank(one, dataset, nullptr);
  ASSERT_TRUE(single != nullptr);

  TrainConfig par = one;
  par.parallel.tp = l.tp;
  par.parallel.pp = l.pp;
  par.parallel.dp = l.dp;
  par.parallel.ep = l.ep;
  par.parallel.etp = l.etp;
  par.parallel.sp = l.sp;
  par.parallel.cp = l.cp;
  par.parallel.dist_opt = l.dist_opt;
  ASSERT_TRUE(par.Validate().ok()) << par.Validate().message();
  std::string error;
  const std::vector<std::unique_ptr<Trainer>> ranks =
      RunCudaRanks(par, dataset, &error);
  ASSERT_FALSE(ranks.empty()) << error;
  const std::vector<double> got = Losses(*ranks[0]);
  ExpectStepsNear(got, Losses(*single), 0.02);
  EXPECT_LT(got.back(), got.front() - 0.5);
  ExpectStepsNear(AuxLosses(*ranks[0]), AuxLosses(*single), 0.05);
  // Every rank holds its own experts and shard: gathered over the ranks,
  // each expert tensor is the one-rank run's (trained in bf16, so within a
  // relative L2 distance far below that of another expert's weights, ~1.4,
  // or of a missing one, 1).
  std::map<std::string, std::vector<float>> par_w, one_w;
  std::mutex mu;
  testing::GatherInto(single->params(), &one_w, &mu);
  for (const auto& rank : ranks)
    testing::GatherInto(rank->params(), &par_w, &mu);
  int experts = 0;
  for (const auto& [name, want] : one_w) {
    if (name.find(".experts.") == std::string::npos) continue;
    ++experts;
    const std::vector<float>& got = par_w[name];
    ASSERT_EQ(got.size(), want.size()) << name;
    double diff = 0, norm = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      diff += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
      norm += want[i] * static_cast<double>(want[i]);
    }
    EXPECT_LT(std::sqrt(diff / norm), 0.25) << name;
  }
  EXPECT_EQ(experts, 3 * 8 * 2);  // 3 MoE layers, 8 experts, fc1 and fc2
  // Replicated tensors (the router among them) stay bitwise identical on
  // the tp ranks (world ranks 0 and 1 share a stage and a dp replica).
  if (l.tp > 1) {
    ExpectReplicatedTensorsEqual(ranks[0]->params(), ranks[1]->params());
  }
}

// Issue 20's MoE layouts on the CUDA engine: ep over dp, ep with etp,
// capacity dropping, pp with the dense first layer, ep over tp (etp 1, so
// experts reduce over edp), dp with ep 1 (one region), cp with and without
// ep folded over it, and the distributed optimizer with its expert shards
// over edp (edp 1, edp 2, and ep2·cp2·dp2) and with one region.
INSTANTIATE_TEST_SUITE_P(
    Layouts, CudaMoeParallelTest,
    ::testing::Values(
        MoeLayout{"ep2", 1, 1, 2, 2, 0, false, 0},
        MoeLayout{"ep4", 1, 1, 4, 4, 0, false, 0},
        MoeLayout{"ep2_etp2_tp2_sp", 2, 1, 2, 2, 2, true, 0},
        MoeLayout{"ep2_capacity1", 1, 1, 2, 2, 0, false, 1.0},
        MoeLayout{"pp2_dense_first_ep2", 1, 2, 2, 2, 0, false, 0},
        MoeLayout{"tp2_sp_ep2_etp1", 2, 1, 1, 2, 1, true, 0},
        MoeLayout{"tp2_sp_etp1", 2, 1, 1, 1, 1, true, 0},
        MoeLayout{"dp2", 1, 1, 2, 1, 0, false, 0},
        MoeLayout{"cp2", 1, 1, 1, 1, 0, false, 0, 2},
        MoeLayout{"cp2_ep2", 1, 1, 1, 2, 0, false, 0, 2},
        MoeLayout{"ep2_dp2_dist_opt", 1, 1, 2, 2, 0, false, 0, 1, true},
        MoeLayout{"tp2_sp_etp1_dist_opt", 2, 1, 1, 1, 1, true, 0, 1, true},
        MoeLayout{"ep2_cp2_dp2_dist_opt", 1, 1, 2, 2, 0, false, 0, 2, true},
        MoeLayout{"dp2_dist_opt_one_region", 1, 1, 2, 1, 0, false, 0, 1, true}),
    [](const ::testing::TestParamInfo<MoeLayout>& info) {
      return std::string(info.param.name);
    });

// Capacity dropping on the GPU keeps what the CPU rule keeps: the same
// losses as the CPU run within the bf16 tolerance.
TEST(CudaMoeTrainerTest, CapacityDroppingMatchesTheCpuTrainer) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const TrainConfig config = MoeConfig(1.0);
  const data::SyntheticDataset dataset(config.seq(), config.model.vocab_size);
  auto world = MakeLocalWorld(1);
  const auto cpu = TrainOneRank(config, dataset, world[0].get());
  const auto gpu = TrainOneRank(config, dataset, nullptr);
  ASSERT_TRUE(cpu != nullptr && gpu != nullptr);
  ExpectStepsNear(Losses(*gpu), Losses(*cpu), 0.02);
}

// DeepSeek-V3's aux-loss-free expert bias: sigmoid routing with the bias
// updated every step (rate 0.05) routes with it on the GPU as on the CPU:
// the losses agree within the bf16 tolerance, the biases moved, and ep 2
// over dp 2 trains like the one-rank GPU run.
TEST(CudaMoeTrainerTest, ExpertBiasTrainsLikeTheCpuAndTheOneRankRun) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  TrainConfig config = MoeConfig();
  config.model.moe_router_score_function = search_spaces::RouterScore::kSigmoid;
  config.model.moe_router_enable_expert_bias = true;
  config.moe_router_bias_update_rate = 0.05;
  ASSERT_TRUE(CudaGptModel::CheckSupported(config).ok());
  const data::SyntheticDataset dataset(config.seq(), config.model.vocab_size);
  auto world = MakeLocalWorld(1);
  const auto cpu = TrainOneRank(config, dataset, world[0].get());
  const auto gpu = TrainOneRank(config, dataset, nullptr);
  ASSERT_TRUE(cpu != nullptr && gpu != nullptr);
  TrainConfig ep2 = config;
  ep2.parallel.dp = 2;
  ep2.parallel.ep = 2;
  std::string error;
  const std::vector<std::unique_ptr<Trainer>> ranks =
      RunCudaRanks(ep2, dataset, &error);
  ASSERT_FALSE(ranks.empty()) << error;
  ExpectStepsNear(Losses(*gpu), Losses(*cpu), 0.02);
  ExpectStepsNear(Losses(*ranks[0]), Losses(*gpu), 0.02);
  // Every MoE layer's bias moved away from its zero start on the GPU.
  const ParamStore& p = gpu->params();
  int biases = 0;
  for (int i = 0; i < p.size(); ++i) {
    if (p.info(i).name.find("expert_bias") == std::string::npos) continue;
    ++biases;
    float moved = 0;
    for (int64_t j = 0; j < p.info(i).numel; ++j) {
      moved = std::max(moved, std::abs(p.param(i)[j]));
    }
    EXPECT_GT(moved, 0.0f) << p.info(i).name;
  }
  EXPECT_EQ(biases, 3);  // layers 1-3 are MoE
}

// A checkpoint of an ep2 · dp2 run with the distributed optimizer (expert
// shards over edp) resumes on one GPU rank and on the CPU: the experts
// reshard, and the run goes on as the uninterrupted one-rank run does.
TEST(CudaMoeTrainerTest, DistributedExpertCheckpointResumesOnOneRank) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  TrainConfig base = MoeConfig();
  base.optimizer.lr_decay_iters = 20;
  const data::SyntheticDataset dataset(base.seq(), base.model.vocab_size);
  const auto whole = TrainOneRank(base, dataset, nullptr);
  ASSERT_TRUE(whole != nullptr);
  const std::vector<double> want = Losses(*whole);

  const std::string dir = ::testing::TempDir() + "/cuda_moe_ckpt_test";
  TrainConfig first = base;
  first.train_iters = 10;
  first.save_dir = dir;
  first.parallel.dp = 2;
  first.parallel.ep = 2;
  first.parallel.dist_opt = true;
  std::string error;
  ASSERT_FALSE(RunCudaRanks(first, dataset, &error).empty()) << error;

  TrainConfig second = base;
  second.load_dir = dir;
  auto world = MakeLocalWorld(1);
  const auto gpu = TrainOneRank(second, dataset, nullptr);
  const auto cpu = TrainOneRank(second, dataset, world[0].get());
  ASSERT_TRUE(cpu != nullptr && gpu != nullptr);
  const std::vector<double> tail(want.begin() + 10, want.end());
  ExpectStepsNear(Losses(*gpu), tail, 0.02);
  ExpectStepsNear(Losses(*cpu), tail, 0.02);
}

// ---- Without a device. ----

// Every layout of the suite above passes the CUDA engine's checks.
TEST(CudaMoeSupportHostOnlyTest, EveryMoeLayoutIsAccepted) {
  for (const MoeLayout& l :
       {MoeLayout{"ep2_cp2_dp2_dist_opt", 1, 1, 2, 2, 0, false, 0, 2, true},
        MoeLayout{"ep2_etp2_tp2_sp", 2, 1, 2, 2, 2, true, 0},
        MoeLayout{"tp2_sp_etp1_dist_opt", 2, 1, 1, 1, 1, true, 0, 1, true}}) {
    TrainConfig p = MoeConfig();
    p.parallel.tp = l.tp;
    p.parallel.dp = l.dp;
    p.parallel.ep = l.ep;
    p.parallel.etp = l.etp;
    p.parallel.sp = l.sp;
    p.parallel.cp = l.cp;
    p.parallel.dist_opt = l.dist_opt;
    ASSERT_TRUE(p.Validate().ok()) << l.name << ": " << p.Validate().message();
    EXPECT_TRUE(CudaGptModel::CheckSupported(p).ok()) << l.name;
  }
}

}  // namespace
}  // namespace meshtune::engine::cuda
