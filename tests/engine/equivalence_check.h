// The layout-equivalence assertion shared by the engine's equivalence tests:
// a run reproduces the reference run's loss and gradient norm at every step
// and its final weights, within the fp32 tolerance of tolerance.h.
#ifndef MESHTUNE_TESTS_ENGINE_EQUIVALENCE_CHECK_H_
#define MESHTUNE_TESTS_ENGINE_EQUIVALENCE_CHECK_H_

#include <gtest/gtest.h>

#include "tests/engine/engine_test_util.h"
#include "tests/engine/tolerance.h"

namespace meshtune::engine::testing {

// REQUIRES: ref has 10 steps.
inline void ExpectSameRun(const RunResult& run, const RunResult& ref) {
  ASSERT_EQ(ref.losses.size(), 10u);
  ASSERT_EQ(run.losses.size(), ref.losses.size());
  for (size_t i = 0; i < ref.losses.size(); ++i) {
    EXPECT_TRUE(WithinFp32Tolerance(run.losses[i], ref.losses[i]))
        << "step " << i + 1 << ": loss " << run.losses[i] << " vs "
        << ref.losses[i];
    EXPECT_TRUE(WithinFp32Tolerance(run.grad_norms[i], ref.grad_norms[i]))
        << "step " << i + 1 << ": grad norm " << run.grad_norms[i] << " vs "
        << ref.grad_norms[i];
  }
  ASSERT_EQ(run.weights.size(), ref.weights.size());
  for (const auto& [name, expected] : ref.weights) {
    auto it = run.weights.find(name);
    ASSERT_NE(it, run.weights.end()) << name;
    ASSERT_EQ(it->second.size(), expected.size()) << name;
    double rms_diff = 0, rms_ref = 0;
    EXPECT_TRUE(
        TensorsWithinFp32Tolerance(it->second, expected, &rms_diff, &rms_ref))
        << name << ": rms difference " << rms_diff << " vs rms " << rms_ref;
  }
}

}  // namespace meshtune::engine::testing

#endif  // MESHTUNE_TESTS_ENGINE_EQUIVALENCE_CHECK_H_
