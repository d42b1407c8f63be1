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
    const std::vector<uint64_t>& rep_begin_ns) {
  const size_t reps = rep_begin_ns.size();
  // Per repetition: device -> (earliest start, latest end).
  std::vector<std::map<uint32_t, std::pair<uint64_t, uint64_t>>> envelopes(
      reps);
  for (const KernelInterval& k : kernels) {
    if (k.start_ns == 0 || k.end_ns < k.start_ns) continue;
    // The last repetition that began at or before the kernel's start:
    // O(log R) per record.
    auto after =
        std::upper_bound(rep_begin_ns.begin(), rep_begin_ns.end(), k.start_ns);
    if (after == rep_begin_ns.begin()) continue;  // before the first one
    const size_t rep = static_cast<size_t>(after - rep_begin_ns.begin()) - 1;
    auto [pos, inserted] = envelopes[rep].emplace(
        k.device_id, std::make_pair(k.start_ns, k.end_ns));
    if (!inserted) {
      pos->second.first = std::min(pos->second.first, k.start_ns);
      pos->second.second = std::max(pos->second.second, k.end_ns);
    }
  }
  std::vector<double> times_s;
  times_s.reserve(reps);
  for (const auto& envelope : envelopes) {
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
