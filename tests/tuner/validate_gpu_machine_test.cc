// Which machine `tune validate --backend cuda` files its runs and learned
// factors under (GpuMachineFingerprint, GpuMachineHardwareId): the stored
// profile of the GPU when there is one, else this GPU machine's own
// fingerprint; and that the factors learned under that id are the ones the
// next search on the GPU preset applies (ChooseCalibration).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "profiler/cpu_backend.h"
#include "results/store.h"
#include "search_spaces/presets/presets.h"
#include "tuner/machine/calibration_source.h"

namespace meshtune::tuner {
namespace {

results::HardwareFingerprint Profiled(const std::string& gpu_model,
                                      const std::string& driver) {
  results::HardwareFingerprint hw;
  hw.backend = "cuda";
  hw.cpu_model = "Test CPU";
  hw.cpu_cores = 32;
  hw.gpu_model = gpu_model;
  hw.gpu_count = 8;
  hw.driver_version = driver;
  hw.id = results::ComputeHardwareId(hw);
  return hw;
}

TEST(GpuMachine, FingerprintNamesTheGpusAndThisHost) {
  const results::HardwareFingerprint hw =
      GpuMachineFingerprint("NVIDIA H200", 8);
  EXPECT_EQ(hw.backend, "cuda");
  EXPECT_EQ(hw.gpu_model, "NVIDIA H200");
  EXPECT_EQ(hw.gpu_count, 8);
  EXPECT_EQ(hw.id, results::ComputeHardwareId(hw));
  EXPECT_EQ(hw.id.rfind("cuda-", 0), 0u) << hw.id;
  const profiler::CpuInfo cpu = profiler::ReadCpuInfo();
  EXPECT_EQ(hw.cpu_model, cpu.model);
  EXPECT_EQ(hw.cpu_cores, cpu.logical_cpus);
  // Another GPU count is another machine; the CPU's own id is never it.
  EXPECT_NE(hw.id, GpuMachineFingerprint("NVIDIA H200", 4).id);
  EXPECT_NE(hw.id, LocalHardwareId());
}

TEST(GpuMachine, HardwareIdIsTheStoredProfileOfThatGpuElseThisMachine) {
  const search_spaces::ClusterSpec h200 =
      search_spaces::ResolveCluster("h200").value();
  const results::HardwareFingerprint self =
      GpuMachineFingerprint("NVIDIA H200", 8);
  EXPECT_EQ(GpuMachineHardwareId({}, h200, self), self.id);
  const results::HardwareFingerprint h100 =
      Profiled("NVIDIA H100 80GB HBM3", "550.54");
  EXPECT_EQ(GpuMachineHardwareId({h100}, h200, self), self.id);
  const results::HardwareFingerprint old = Profiled("NVIDIA H200", "550.54");
  const results::HardwareFingerprint recent = Profiled("NVIDIA H200", "560.1");
  EXPECT_EQ(GpuMachineHardwareId({h100, old}, h200, self), old.id);
  // The newest profile, as ChooseCalibration takes it.
  EXPECT_EQ(GpuMachineHardwareId({old, h100, recent}, h200, self), recent.id);
}

// Without a profile, validate registers this machine; the factors it then
// learns under that id are applied to the next h200 search, and a profile
// stored later takes over (it calibrates afresh; its factors are learned
// anew under its own id).
TEST(GpuMachine, LearnedFactorsGoWithTheIdSearchesUse) {
  auto store = results::Store::Open(":memory:");
  ASSERT_TRUE(store.ok()) << store.status().message();
  const search_spaces::ClusterSpec h200 =
      search_spaces::ResolveCluster("h200").value();
  const results::HardwareFingerprint self =
      GpuMachineFingerprint("NVIDIA H200", 8);
  const results::Provenance prov = results::MakeProvenance("test", "test");
  ASSERT_TRUE(store.value()->PutHardware(self, prov).ok());
  auto machines = store.value()->ListHardware();
  ASSERT_TRUE(machines.ok());
  const std::string id = GpuMachineHardwareId(*machines, h200, self);
  ASSERT_EQ(id, self.id);

  results::FittedFactorsRecord f;
  f.hardware_id = id;
  f.base_calibration = "datasheet";
  f.compute = 1.25;
  f.memory = 1.0;
  f.collective = 1.0;
  f.runs = 3;
  ASSERT_TRUE(store.value()->PutFittedFactors(f, prov).ok());
  auto calibration = ChooseCalibration(store.value().get(), h200, "");
  ASSERT_TRUE(calibration.ok()) << calibration.status().message();
  EXPECT_EQ(calibration.value()->Name(), "datasheet+fit:3 runs");
  // Another preset's machine does not get them.
  auto h100 = ChooseCalibration(
      store.value().get(), search_spaces::ResolveCluster("h100").value(), "");
  ASSERT_TRUE(h100.ok());
  EXPECT_EQ(h100.value()->Name(), "datasheet");

  const results::HardwareFingerprint profile = Profiled("NVIDIA H200", "560.1");
  results::Provenance later = prov;
  later.created_unix_s += 10;  // the store orders machines by this
  ASSERT_TRUE(store.value()->PutHardware(profile, later).ok());
  machines = store.value()->ListHardware();
  ASSERT_TRUE(machines.ok());
  EXPECT_EQ(GpuMachineHardwareId(*machines, h200, self), profile.id);
}

}  // namespace
}  // namespace meshtune::tuner
