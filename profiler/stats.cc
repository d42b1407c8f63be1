#include "profiler/stats.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace meshtune::profiler {

TimingStats Summarize(std::vector<double> times_s) {
  TimingStats s;
  const size_t n = times_s.size();
  if (n == 0) return s;
  std::sort(times_s.begin(), times_s.end());
  s.samples = static_cast<int64_t>(n);
  s.min_s = times_s.front();
  s.median_s =
      n % 2 == 1 ? times_s[n / 2] : 0.5 * (times_s[n / 2 - 1] + times_s[n / 2]);
  // Nearest rank: the smallest value with at least 99 % of samples <= it.
  size_t rank = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(n)));
  s.p99_s = times_s[std::max<size_t>(rank, 1) - 1];
  double sum = 0;
  for (double t : times_s) sum += t;
  s.mean_s = sum / static_cast<double>(n);
  if (n >= 2 && s.mean_s > 0) {
    double ss = 0;
    for (double t : times_s) ss += (t - s.mean_s) * (t - s.mean_s);
    s.cv = std::sqrt(ss / static_cast<double>(n - 1)) / s.mean_s;
  }
  return s;
}

double BusFactor(Collective op, int64_t ranks) {
  if (op == Collective::kSendRecv) return 1.0;
  if (ranks < 1) return 0.0;
  const double n = static_cast<double>(ranks);
  switch (op) {
    case Collective::kAllReduce:
      return 2.0 * (n - 1.0) / n;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
      return (n - 1.0) / n;
    case Collective::kSendRecv:
      break;
  }
  return 1.0;
}

double AlgBwGbps(double bytes, double time_s) {
  return time_s > 0 ? bytes / time_s / 1e9 : 0.0;
}

double BusBwGbps(Collective op, int64_t ranks, double bytes, double time_s) {
  return AlgBwGbps(bytes, time_s) * BusFactor(op, ranks);
}

double Tflops(double flops, double time_s) {
  return time_s > 0 ? flops / time_s / 1e12 : 0.0;
}

std::vector<double> DoublingSizes(double min_bytes, double max_bytes) {
  std::vector<double> sizes;
  if (min_bytes < 1 || max_bytes < min_bytes) return sizes;
  for (double b = min_bytes; b <= max_bytes; b *= 2) sizes.push_back(b);
  return sizes;
}

}  // namespace meshtune::profiler
