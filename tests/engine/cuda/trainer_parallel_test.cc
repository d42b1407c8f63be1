// Every parallel layout of the CUDA trainer against the one-rank run of the
// same model and data (the engine's rule: each parallel feature is tested
// against the single-rank run). Ranks are threads of this process (as
// mpirun runs processes); on a machine with one GPU they share it through
// staged device communicators (engine/cuda/comm/device_communicator.h), with
// enough GPUs each rank gets its own and NCCL. Every layout trains the same
// global batch from the same initial weights (the CPU model's layout-
// independent initialization), so its losses match the one-rank run's to
// the bf16 tolerance: within 2 % at each of 20 steps (the reductions sum
// bf16 partial results in another order; the optimizer is fp32).
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/local_communicator.h"
#include "engine/cuda/runtime/device.h"
#include "engine/cuda/trainer.h"
#include "engine/data/synthetic_dataset.h"
#include "engine/param_store.h"
#include "engine/trainer.h"
#include "gtest/gtest.h"
#include "tests/engine/cuda/trainer_test_util.h"

namespace meshtune::engine::cuda {
namespace {

struct Layout {
  const char* name;
  bool llama;
  int64_t tp, pp, vpp, dp;
  bool sp, dist_opt;
  bool selective;  // selective recompute
  bool full;       // full recompute, uniform, 2 layers per segment
  bool dropout;    // hidden and attention dropout 0.1 (the CPU's masks)
  int64_t cp = 1;  // context parallelism (ring attention)
};

// ctest shows the layout's name, not its bytes.
void PrintTo(const Layout& layout, std::ostream* os) { *os << layout.name; }

// Micro-batches of 2: four per step on one rank, so pp 2 has a steady
// state; no dropout.
TrainConfig Config(bool llama) {
  TrainConfig c = SmallTrainConfig(llama);
  c.parallel.mbs = 2;
  return c;
}

class CudaTrainerParallelTest : public ::testing::TestWithParam<Layout> {};

TEST_P(CudaTrainerParallelTest, LossesMatchTheOneRankRun) {
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const Layout& l = GetParam();
  TrainConfig one = Config(l.llama);
  auto& rc = one.parallel.recompute;
  if (l.selective) {
    rc.granularity = search_spaces::RecomputeGranularity::kSelective;
  }
  if (l.full) {
    rc.granularity = search_spaces::RecomputeGranularity::kFull;
    rc.method = search_spaces::RecomputeMethod::kUniform;
    rc.num_layers = 2;
  }
  if (l.dropout) {
    one.hidden_dropout = 0.1f;
    one.attention_dropout = 0.1f;
  }
  const data::SyntheticDataset dataset(one.seq(), one.model.vocab_size);
  auto single = CreateCudaTrainer(one, &dataset);
  ASSERT_TRUE(single.ok()) << single.status().message();
  ASSERT_TRUE((*single)->Run({}).ok());

  TrainConfig par = one;
  par.parallel.tp = l.tp;
  par.parallel.pp = l.pp;
  par.parallel.vpp = l.vpp;
  par.parallel.dp = l.dp;
  par.parallel.cp = l.cp;
  par.parallel.sp = l.sp;
  par.parallel.dist_opt = l.dist_opt;
  ASSERT_TRUE(par.Validate().ok()) << par.Validate().message();
  std::string error;
  const std::vector<std::unique_ptr<Trainer>> ranks =
      RunCudaRanks(par, dataset, &error);
  ASSERT_FALSE(ranks.empty()) << error;
  const std::vector<double> want = Losses(**single), got = Losses(*ranks[0]);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 0.02 * want[i]) << "step " << i + 1;
  }
  // It learned, as the one-rank run did.
  EXPECT_LT(got.back(), got.front() - 0.1);
  // Replicated tensors stay bitwise identical on the tp ranks (world ranks
  // 0 and 1 are tp ranks 0 and 1 of one pipeline stage and dp replica):
  // their gradients are reduced over tp with or without SP.
  if (l.tp > 1) {
    ExpectReplicatedTensorsEqual(ranks[0]->params(), ranks[1]->params());
  }
  // The cp ranks of a replica end with bitwise equal weights (world ranks 0
  // and 1 are cp ranks 0 and 1 when tp == 1): their gradients are averaged
  // over dp·cp.
  if (l.cp > 1 && l.tp == 1) {
    const ParamStore& a = ranks[0]->params();
    const ParamStore& b = ranks[1]->params();
    ASSERT_EQ(a.size(), b.size());
    for (int i = 0; i < a.size(); ++i) {
      const std::vector<float> x(a.param(i), a.param(i) + a.info(i).numel);
      const std::vector<float> y(b.param(i), b.param(i) + b.info(i).numel);
      EXPECT_EQ(x, y) << a.info(i).name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, CudaTrainerParallelTest,
    ::testing::Values(
        Layout{"tp2", false, 2, 1, 1, 1, false, false, false, false, false},
        Layout{"tp2_sp", false, 2, 1, 1, 1, true, false, false, false, false},
        Layout{"tp2_sp_llama", true, 2, 1, 1, 1, true, false, true, false,
               false},
        Layout{"tp2_sp_dropout", false, 2, 1, 1, 1, true, false, false, false,
               true},
        Layout{"pp2", false, 1, 2, 1, 1, false, false, false, false, false},
        Layout{"pp2_llama", true, 1, 2, 1, 1, false, false, false, false,
               false},
        Layout{"pp2_full_recompute", false, 1, 2, 1, 1, false, false, false,
               true, false},
        Layout{"pp2_vpp2", false, 1, 2, 2, 1, false, false, false, false,
               false},
        Layout{"dp2", true, 1, 1, 1, 2, false, false, false, false, false},
        Layout{"dp2_dist_opt", true, 1, 1, 1, 2, false, true, false, false,
               false},
        Layout{"tp2_pp2_sp", true, 2, 2, 1, 1, true, false, true, false, false},
        Layout{"tp2_pp2_dp2_sp_dist_opt", false, 2, 2, 1, 2, true, true, false,
               false, true},
        // Context parallelism: ring attention over the cp ranks, RoPE and
        // the position embedding at global positions, dp·cp gradients.
        Layout{"cp2", false, 1, 1, 1, 1, false, false, false, false, false, 2},
        Layout{"cp2_llama", true, 1, 1, 1, 1, false, false, false, false, false,
               2},
        Layout{"cp4", true, 1, 1, 1, 1, false, false, false, false, false, 4},
        Layout{"cp2_tp2_sp_dropout", false, 2, 1, 1, 1, true, false, false,
               false, true, 2},
        Layout{"cp2_pp2", true, 1, 2, 1, 1, false, false, false, false, false,
               2},
        Layout{"cp2_dp2_dist_opt", false, 1, 1, 1, 2, false, true, false, false,
               false, 2}),
    [](const ::testing::TestParamInfo<Layout>& info) {
      return std::string(info.param.name);
    });

}  // namespace
}  // namespace meshtune::engine::cuda
