#include "engine/backends/registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "engine/comm/local_communicator.h"
#include "engine/param_store.h"
#include "tests/engine/engine_test_util.h"

namespace meshtune::engine::backends {
namespace {

TEST(TrainerRegistry, CpuIsAlwaysBuiltAndListedFirst) {
  const std::vector<std::string> built = BuiltTrainerBackends();
  ASSERT_FALSE(built.empty());
  EXPECT_EQ(built[0], "cpu");
  EXPECT_TRUE(std::is_sorted(built.begin(), built.end()));
  EXPECT_TRUE(TrainerBackendBuilt("cpu"));
  EXPECT_EQ(TrainerBackendBuilt("cuda"),
            std::find(built.begin(), built.end(), "cuda") != built.end());
}

TEST(TrainerRegistry, UnknownBackendNamesTheBuiltOnes) {
  const TrainConfig c = testing::TinyConfig(false);
  const Status s = CheckTrainerSupported("rocm", c);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "unknown engine backend 'rocm'");
  EXPECT_EQ(s.hint().rfind("use one of: cpu", 0), 0u) << s.hint();
  EXPECT_FALSE(TrainerBackendBuilt("rocm"));
}

TEST(TrainerRegistry, CudaWithoutTheEngineIsUnimplemented) {
  if (TrainerBackendBuilt("cuda")) GTEST_SKIP() << "built with the CUDA engine";
  const TrainConfig c = testing::TinyConfig(false);
  const Status s = CheckTrainerSupported("cuda", c);
  EXPECT_EQ(s.code(), Status::Code::kUnimplemented);
  EXPECT_EQ(s.message(),
            "this tune was built without the CUDA engine (CMake found no CUDA "
            "toolkit with cuBLASLt and NCCL)");
  EXPECT_EQ(CudaDeviceCount(), 0);
  EXPECT_EQ(CudaDeviceName(), "");
}

TEST(TrainerRegistry, CpuCheckIsTheConfigsValidation) {
  TrainConfig c = testing::TinyConfig(false);
  EXPECT_TRUE(CheckTrainerSupported("cpu", c).ok());
  c.parallel.mbs = 0;
  EXPECT_EQ(CheckTrainerSupported("cpu", c).message(), c.Validate().message());
}

// CreateTrainer("cpu") is Trainer::Create: the same weights after the same
// steps, bitwise.
TEST(TrainerRegistry, CpuTrainerMatchesTrainerCreate) {
  TrainConfig c = testing::TinyConfig(false);
  c.train_iters = 2;
  testing::SyntheticDataset data(c.seq(), c.model.vocab_size);
  std::vector<std::vector<float>> weights;
  for (bool registry : {false, true}) {
    auto world = MakeLocalWorld(1);
    auto trainer = registry ? CreateTrainer("cpu", c, &data, world[0].get())
                            : Trainer::Create(c, &data, world[0].get());
    ASSERT_TRUE(trainer.ok()) << trainer.status().message();
    ASSERT_TRUE((*trainer)->Run(nullptr).ok());
    const ParamStore& p = (*trainer)->params();
    weights.emplace_back(p.param(0), p.param(0) + p.numel());
  }
  EXPECT_EQ(weights[0], weights[1]);
}

}  // namespace
}  // namespace meshtune::engine::backends
