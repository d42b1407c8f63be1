// Attribution of CUPTI kernel records to repetitions
// (profiler/kernel_timing.h).
#include "profiler/kernel_timing.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

namespace meshtune::profiler {

std::vector<double> PerRepetitionKernelTimes_s(
    const std::vector<KernelInterval>& kernels,
    const std::vector<RepWindow>& windows) {
  // Sort once by start so each window is a contiguous range: O((K + W) log K)
  // instead of K·W for sweeps with thousands of repetitions.
  std::vector<KernelInterval> sorted;
  sorted.reserve(kernels.size());
  for (const KernelInterval& k : kernels) {
    if (k.start_ns != 0 && k.end_ns >= k.start_ns) sorted.push_back(k);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const KernelInterval& a, const KernelInterval& b) {
              return a.start_ns < b.start_ns;
            });
  std::vector<double> times_s;
  times_s.reserve(windows.size());
  for (const RepWindow& w : windows) {
    auto it = std::lower_bound(
        sorted.begin(), sorted.end(), w.begin_ns,
        [](const KernelInterval& k, uint64_t t) { return k.start_ns < t; });
    // device -> (earliest start, latest end)
    std::map<uint32_t, std::pair<uint64_t, uint64_t>> envelope;
    for (; it != sorted.end() && it->start_ns <= w.end_ns; ++it) {
      if (it->end_ns > w.end_ns) continue;
      auto [pos, inserted] = envelope.emplace(
          it->device_id, std::make_pair(it->start_ns, it->end_ns));
      if (!inserted) {
        pos->second.first = std::min(pos->second.first, it->start_ns);
        pos->second.second = std::max(pos->second.second, it->end_ns);
      }
    }
    if (envelope.empty()) {
      times_s.push_back(-1.0);
      continue;
    }
    uint64_t longest_ns = 0;
    for (const auto& [device, span] : envelope) {
      longest_ns = std::max(longest_ns, span.second - span.first);
    }
    times_s.push_back(static_cast<double>(longest_ns) * 1e-9);
  }
  return times_s;
}

double RepetitionMedian(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  if (values.size() % 2 == 1) return values[mid];
  return 0.5 * (values[mid - 1] + values[mid]);
}

double AgreementPct(const std::vector<double>& a_s,
                    const std::vector<double>& b_s) {
  if (a_s.empty() || b_s.empty()) return 0.0;
  const double a = RepetitionMedian(a_s);
  const double b = RepetitionMedian(b_s);
  if (b <= 0) return 0.0;
  return 100.0 * std::max(0.0, 1.0 - std::fabs(a - b) / b);
}

}  // namespace meshtune::profiler
