#include "tuner/search/ranking.h"

#include <algorithm>
#include <tuple>

namespace meshtune::tuner {
namespace {

using search_spaces::ParallelConfig;
using search_spaces::RecomputeGranularity;

int64_t ModelParallelProduct(const ParallelConfig& c) {
  return c.tp * c.pp * c.cp * c.ep * c.vpp;
}

int RecomputeRank(const ParallelConfig& c) {
  switch (c.recompute.granularity) {
    case RecomputeGranularity::kNone:
      return 0;
    case RecomputeGranularity::kSelective:
      return 1;
    case RecomputeGranularity::kFull:
      return 2;
  }
  return 3;
}

auto Key(const ParallelConfig& c) {
  const bool full = c.recompute.granularity == RecomputeGranularity::kFull;
  return std::make_tuple(c.tp, c.pp, c.vpp, c.cp, c.ep, c.dp, c.mbs, c.sp,
                         static_cast<int>(c.recompute.granularity),
                         full ? static_cast<int>(c.recompute.method) : 0,
                         full ? c.recompute.num_layers : 0, c.dist_opt,
                         c.expert_tp(), c.layout_first_layers,
                         c.layout_last_layers, c.recompute.modules);
}

double Headroom(const costmodel::Estimate& e) {
  return e.memory_capacity_bytes - e.memory.total_bytes();
}

}  // namespace

bool ConfigKeyBefore(const ParallelConfig& a, const ParallelConfig& b) {
  return Key(a) < Key(b);
}

bool TieBreakBefore(const costmodel::Estimate& a,
                    const costmodel::Estimate& b) {
  const int64_t pa = ModelParallelProduct(a.config);
  const int64_t pb = ModelParallelProduct(b.config);
  if (pa != pb) return pa < pb;
  const int ra = RecomputeRank(a.config), rb = RecomputeRank(b.config);
  if (ra != rb) return ra < rb;
  if (a.config.uneven_layout() != b.config.uneven_layout()) {
    return !a.config.uneven_layout();
  }
  const double ha = Headroom(a), hb = Headroom(b);
  if (ha != hb) return ha > hb;
  if (a.config.sp != b.config.sp) return !a.config.sp;
  return ConfigKeyBefore(a.config, b.config);
}

void RankEstimates(std::vector<costmodel::Estimate>* estimates) {
  auto& v = *estimates;
  // Step time first, with the fixed key so the group boundaries (and thus
  // the final order) do not depend on the input order.
  std::sort(v.begin(), v.end(),
            [](const costmodel::Estimate& a, const costmodel::Estimate& b) {
              if (a.step_time_s != b.step_time_s) {
                return a.step_time_s < b.step_time_s;
              }
              return ConfigKeyBefore(a.config, b.config);
            });
  size_t start = 0;
  while (start < v.size()) {
    const double limit = v[start].step_time_s * (1 + kStepTimeTieFraction);
    size_t end = start + 1;
    while (end < v.size() && v[end].step_time_s <= limit) ++end;
    std::sort(v.begin() + start, v.begin() + end, TieBreakBefore);
    start = end;
  }
}

}  // namespace meshtune::tuner
