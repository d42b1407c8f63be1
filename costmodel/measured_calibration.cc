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

// Causal self-attention FLOPs of the engine's kernel shape (forward; the
// backward's ratio to it is the same at every shape, so it cancels in the
// shape-class scaling): 4·bh·q·kv·d, halved when causal.
double AttentionFlops(int64_t batch_heads, int64_t q_len, int64_t kv_len,
                      int64_t head_dim, bool causal) {
  return (causal ? 2.0 : 4.0) * static_cast<double>(batch_heads) *
         static_cast<double>(q_len) * static_cast<double>(kv_len) *
         static_cast<double>(head_dim);
}

int ElementwiseSlot(ElementwiseOp op, bool backward) {
  return 2 * static_cast<int>(op) + (backward ? 1 : 0);
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
  for (const MeasuredElementwise& e : tables_.elementwise) {
    if (e.elements <= 0 || e.time_s <= 0) continue;
    elementwise_[ElementwiseSlot(e.op, e.backward)].emplace_back(e.elements,
                                                                 e.time_s);
  }
  for (auto& points : elementwise_) {
    std::sort(points.begin(), points.end());
    // Repeated counts: keep the fastest median (sorted first).
    points.erase(std::unique(points.begin(), points.end(),
                             [](const auto& a, const auto& b) {
                               return a.first == b.first;
                             }),
                 points.end());
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

const MeasuredAttention* MeasuredCalibration::NearestAttention(
    int64_t batch_heads, int64_t q_len, int64_t kv_len, int64_t head_dim,
    bool backward) const {
  const double lb = Log(batch_heads), lq = Log(q_len), lkv = Log(kv_len),
               ld = Log(head_dim);
  const MeasuredAttention* nearest = nullptr;
  double best = std::numeric_limits<double>::infinity();
  for (const MeasuredAttention& a : tables_.attention) {
    if (a.backward != backward || a.time_s <= 0 || a.batch_heads <= 0 ||
        a.seq_len <= 0 || a.head_dim <= 0) {
      continue;
    }
    const double ls = Log(a.seq_len);
    const double db = Log(a.batch_heads) - lb, dq = ls - lq, dkv = ls - lkv,
                 dd = Log(a.head_dim) - ld;
    const double d = db * db + dq * dq + dkv * dkv + dd * dd;
    if (d < best) {
      best = d;
      nearest = &a;
    }
  }
  return nearest;
}

double MeasuredCalibration::AttentionTime_s(int64_t batch_heads, int64_t q_len,
                                            int64_t kv_len, int64_t head_dim,
                                            bool causal, bool backward,
                                            const ModelOptions& options) const {
  const MeasuredAttention* a =
      NearestAttention(batch_heads, q_len, kv_len, head_dim, backward);
  if (a == nullptr) {
    return backward
               ? datasheet_.AttentionBackwardTime_s(batch_heads, q_len, kv_len,
                                                    head_dim, causal, options)
               : datasheet_.AttentionForwardTime_s(batch_heads, q_len, kv_len,
                                                   head_dim, causal, options);
  }
  // The measured kernel is the engine's causal one.
  return a->time_s *
         AttentionFlops(batch_heads, q_len, kv_len, head_dim, causal) /
         AttentionFlops(a->batch_heads, a->seq_len, a->seq_len, a->head_dim,
                        true);
}

double MeasuredCalibration::AttentionForwardTime_s(
    int64_t batch_heads, int64_t q_len, int64_t kv_len, int64_t head_dim,
    bool causal, const ModelOptions& options) const {
  return AttentionTime_s(batch_heads, q_len, kv_len, head_dim, causal, false,
                         options);
}

double MeasuredCalibration::AttentionBackwardTime_s(
    int64_t batch_heads, int64_t q_len, int64_t kv_len, int64_t head_dim,
    bool causal, const ModelOptions& options) const {
  return AttentionTime_s(batch_heads, q_len, kv_len, head_dim, causal, true,
                         options);
}

double MeasuredCalibration::ElementwiseTime_s(
    ElementwiseOp op, double elements, bool backward,
    const ModelOptions& options) const {
  const auto& points = elementwise_[ElementwiseSlot(op, backward)];
  if (points.empty()) {
    return Calibration::ElementwiseTime_s(op, elements, backward, options);
  }
  if (elements <= 0) return 0.0;
  // The measured count nearest in log space sets the time per element.
  const double le = Log(elements);
  const std::pair<double, double>* nearest = &points.front();
  for (const auto& p : points) {
    if (std::fabs(Log(p.first) - le) < std::fabs(Log(nearest->first) - le)) {
      nearest = &p;
    }
  }
  return nearest->second * elements / nearest->first;
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
