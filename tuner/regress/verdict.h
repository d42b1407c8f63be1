// The verdict of `tune regress check`: a benchmark result against a
// baseline, for throughput and for numerics (docs/regress.md).
//
// Throughput rule, on the gated metric's repeats (median m, spread s = the
// median absolute deviation of the repeats):
//   regression  iff  (m_cur - m_base) / m_base < -threshold_pct / 100
//                and  m_base - m_cur > s_base + s_cur
// i.e. the drop must exceed the threshold and also be larger than the two
// runs' noise together. Improvements never fail.
// Numerics rule: over the steps both runs have (the loss at step i does not
// depend on the number of repeats), every loss must satisfy
//   |loss_cur - loss_base| <= loss_rtol * |loss_base|
// else the verdict is "numerics changed" (a regression of its own).
#ifndef MESHTUNE_TUNER_REGRESS_VERDICT_H_
#define MESHTUNE_TUNER_REGRESS_VERDICT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "results/store.h"

namespace meshtune::tuner {

// fp32 on one thread repeats bit for bit on one machine; the tolerance
// leaves room for other CPUs' vector widths (AVX2 vs AVX-512 change GEMM
// summation order), as the engine's layout tests do (1e-5, docs/design.md
// §9).
inline constexpr double kDefaultLossRtol = 1e-5;

// The throughput the gate judges: tokens per process CPU second (default;
// unaffected by other processes on the cores) or tokens per wall second.
enum class RegressMetric { kCpu, kWall };

struct RegressVerdictRow {
  std::string metric, baseline, current, change, threshold, verdict;
};

struct RegressVerdict {
  bool throughput_regressed = false;
  bool numerics_changed = false;
  double change_pct = 0;         // gated metric, (cur - base) / base · 100
  int64_t steps_compared = 0;    // losses compared
  double max_loss_rel_diff = 0;  // over the compared steps
  int64_t worst_step = 0;        // 1-based step of max_loss_rel_diff
  std::vector<RegressVerdictRow> rows;
  bool passed() const { return !throughput_regressed && !numerics_changed; }
};

// Compares `current` with `baseline` (same benchmark; the caller checks the
// spec and hardware). threshold_pct >= 0, loss_rtol >= 0.
RegressVerdict CompareRegress(const results::RegressResult& baseline,
                              const results::RegressResult& current,
                              double threshold_pct, double loss_rtol,
                              RegressMetric metric);

// The verdict table (metric, baseline, current, change, threshold, verdict)
// and a final "verdict: ..." line, newline-terminated.
std::string FormatVerdictTable(const RegressVerdict& v);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_REGRESS_VERDICT_H_
