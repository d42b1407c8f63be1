#include "costmodel/measured_calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace meshtune::costmodel {
namespace {

double Log(double x) { return std::log(std::max(x, 1e-30)); }

// Time at `bytes` on a curve sorted by bytes: log-log interpolation inside,
// constant bandwidth (time ∝ bytes) beyond either end.
double Interpolate(const std::vector<std::pair<double, double>>& points,
                   double bytes) {
  if (points.size() == 1 || bytes <= points.front().first) {
    const auto& [b0, t0] = points.front();
    return bytes <= b0 ? t0 : t0 * bytes / b0;
  }
  if (bytes >= points.back().first) {
    const auto& [b1, t1] = points.back();
    return t1 * bytes / b1;
  }
  auto hi = std::lower_bound(
      points.begin(), points.end(), bytes,
      [](const std::pair<double, double>& p, double b) { return p.first < b; });
  auto lo = hi - 1;
  const double f =
      (Log(bytes) - Log(lo->first)) / (Log(hi->first) - Log(lo->first));
  return std::exp(Log(lo->second) + f * (Log(hi->second) - Log(lo->second)));
}

}  // namespace

MeasuredCalibration::MeasuredCalibration(
    const search_spaces::ClusterSpec& cluster, MeasuredTables tables)
    : datasheet_(cluster), tables_(std::move(tables)) {
  MESHTUNE_CHECK(!tables_.hardware_id.empty());
  gemm_logs_.reserve(tables_.gemms.size());
  for (const MeasuredGemm& g : tables_.gemms) {
    gemm_logs_.push_back({Log(g.m), Log(g.n), Log(g.k)});
  }
  for (const MeasuredCollective& mc : tables_.collectives) {
    if (mc.bytes <= 0 || mc.time_s <= 0) continue;
    auto it = std::find_if(curves_.begin(), curves_.end(), [&](const Curve& c) {
      return c.op == mc.op && c.group_size == mc.group_size &&
             c.nodes == mc.nodes;
    });
    if (it == curves_.end()) {
      curves_.push_back({mc.op, mc.group_size, mc.nodes, {}});
      it = curves_.end() - 1;
    }
    it->points.emplace_back(mc.bytes, mc.time_s);
  }
  for (Curve& c : curves_) {
    std::sort(c.points.begin(), c.points.end());
    // Repeated sizes: keep the fastest median (the best run of the size).
    c.points.erase(std::unique(c.points.begin(), c.points.end(),
                               [](const auto& a, const auto& b) {
                                 return a.first == b.first;
                               }),
                   c.points.end());
  }
}

const MeasuredGemm* MeasuredCalibration::NearestGemm(
    int64_t m, int64_t n, int64_t k, search_spaces::Precision precision) const {
  const double lm = Log(m), ln = Log(n), lk = Log(k);
  const MeasuredGemm* nearest = nullptr;
  double best = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < tables_.gemms.size(); ++i) {
    const MeasuredGemm& g = tables_.gemms[i];
    if (g.precision != precision || g.time_s <= 0) continue;
    const LogShape& l = gemm_logs_[i];
    const double d = (l.m - lm) * (l.m - lm) + (l.n - ln) * (l.n - ln) +
                     (l.k - lk) * (l.k - lk);
    if (d < best) {
      best = d;
      nearest = &g;
    }
  }
  return nearest;
}

double MeasuredCalibration::GemmTime_s(int64_t m, int64_t n, int64_t k,
                                       search_spaces::Precision precision,
                                       const ModelOptions& options) const {
  const MeasuredGemm* g = NearestGemm(m, n, k, precision);
  if (g == nullptr) return datasheet_.GemmTime_s(m, n, k, precision, options);
  // The nearest measured shape's throughput (its "shape class").
  const double flops = static_cast<double>(m) * n * k;
  const double measured_flops = static_cast<double>(g->m) * g->n * g->k;
  return g->time_s * flops / measured_flops;
}

// Attention kernels are not measured yet (the engine's own kernel comes with
// the training engine): the datasheet answers.
double MeasuredCalibration::AttentionForwardTime_s(
    int64_t batch_heads, int64_t q_len, int64_t kv_len, int64_t head_dim,
    bool causal, const ModelOptions& options) const {
  return datasheet_.AttentionForwardTime_s(batch_heads, q_len, kv_len, head_dim,
                                           causal, options);
}

double MeasuredCalibration::AttentionBackwardTime_s(
    int64_t batch_heads, int64_t q_len, int64_t kv_len, int64_t head_dim,
    bool causal, const ModelOptions& options) const {
  return datasheet_.AttentionBackwardTime_s(batch_heads, q_len, kv_len,
                                            head_dim, causal, options);
}

double MeasuredCalibration::MemoryTime_s(double bytes,
                                         const ModelOptions& options) const {
  if (tables_.stream_gbps <= 0) return datasheet_.MemoryTime_s(bytes, options);
  return bytes / (tables_.stream_gbps * 1e9);
}

double MeasuredCalibration::CollectiveTime_s(
    Collective op, double bytes, const CommGroup& group,
    const ModelOptions& options) const {
  if (group.size <= 1 || bytes <= 0) {
    return datasheet_.CollectiveTime_s(op, bytes, group, options);
  }
  for (const Curve& c : curves_) {
    if (c.op == op && c.group_size == group.size && c.nodes == group.nodes) {
      return Interpolate(c.points, bytes);
    }
  }
  return datasheet_.CollectiveTime_s(op, bytes, group, options);
}

}  // namespace meshtune::costmodel
