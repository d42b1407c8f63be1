#include "engine/param_store.h"

#include <algorithm>

#include "search_spaces/status.h"

namespace meshtune::engine {

const char* ToString(TpSplit s) {
  switch (s) {
    case TpSplit::kReplicated:
      return "replicated";
    case TpSplit::kColumn:
      return "column";
    case TpSplit::kRow:
      return "row";
    case TpSplit::kVocab:
      return "vocab";
  }
  return "?";
}

std::vector<ParamInfo::Block> ParamInfo::Blocks() const {
  const int64_t rows = global_shape[0];
  const int64_t cols = global_shape.size() > 1 ? global_shape[1] : 1;
  std::vector<Block> out;
  switch (split) {
    case TpSplit::kReplicated:
      out.push_back({0, 0, rows, 0, 0, cols});
      break;
    case TpSplit::kColumn: {
      // Rank r holds [part0_r; part1_r; ...]: block p starts at local row
      // Σ_{q<p} parts[q]/tp and at global row Σ_{q<p} parts[q] + r·parts[p]/tp.
      int64_t local = 0, global = 0;
      for (int64_t part : parts) {
        const int64_t per = part / tp_size;
        out.push_back({local, global + tp_rank * per, per, 0, 0, cols});
        local += per;
        global += part;
      }
      break;
    }
    case TpSplit::kRow: {
      const int64_t per = cols / tp_size;
      out.push_back({0, 0, rows, 0, tp_rank * per, per});
      break;
    }
    case TpSplit::kVocab: {
      const int64_t per = padded_rows / tp_size;
      const int64_t first = tp_rank * per;
      const int64_t real = std::max<int64_t>(0, std::min(per, rows - first));
      if (real > 0) out.push_back({0, first, real, 0, 0, cols});
      break;
    }
  }
  return out;
}

int ParamStore::Add(ParamInfo info) {
  MESHTUNE_CHECK(!finalized_);
  MESHTUNE_CHECK(!info.global_shape.empty() && info.global_shape.size() <= 2);
  MESHTUNE_CHECK(info.tp_size >= 1 && info.tp_rank < info.tp_size);
  const int64_t rows = info.global_shape[0];
  const int64_t cols = info.global_shape.size() > 1 ? info.global_shape[1] : 1;
  int64_t local_rows = rows, local_cols = cols;
  switch (info.split) {
    case TpSplit::kReplicated:
      break;
    case TpSplit::kColumn: {
      if (info.parts.empty()) info.parts = {rows};
      int64_t sum = 0;
      for (int64_t p : info.parts) {
        MESHTUNE_CHECK(p % info.tp_size == 0);
        sum += p;
      }
      MESHTUNE_CHECK(sum == rows);
      local_rows = rows / info.tp_size;
      break;
    }
    case TpSplit::kRow:
      MESHTUNE_CHECK(info.global_shape.size() == 2 && cols % info.tp_size == 0);
      local_cols = cols / info.tp_size;
      break;
    case TpSplit::kVocab:
      MESHTUNE_CHECK(info.padded_rows >= rows &&
                     info.padded_rows % info.tp_size == 0);
      local_rows = info.padded_rows / info.tp_size;
      break;
  }
  info.local_shape = info.global_shape.size() == 1
                         ? std::vector<int64_t>{local_rows}
                         : std::vector<int64_t>{local_rows, local_cols};
  info.numel = local_rows * local_cols;
  infos_.push_back(std::move(info));
  return static_cast<int>(infos_.size()) - 1;
}

void ParamStore::Finalize() {
  MESHTUNE_CHECK(!finalized_);
  finalized_ = true;
  int64_t n = 0;
  for (bool expert : {false, true}) {
    for (ParamInfo& p : infos_) {
      if (p.expert != expert) continue;
      p.offset = n;
      n += p.numel;
    }
    if (!expert) dense_numel_ = n;
  }
  params_.assign(n, 0.0f);
  grads_.assign(n, 0.0f);
  decay_mask_.assign(n, 0.0f);
  norm_mask_.assign(n, 0.0f);
  for (const ParamInfo& p : infos_) {
    std::fill_n(decay_mask_.begin() + p.offset, p.numel,
                p.weight_decay ? 1.0f : 0.0f);
    std::fill_n(norm_mask_.begin() + p.offset, p.numel,
                p.counts_in_norm ? 1.0f : 0.0f);
  }
}

int ParamStore::Find(const std::string& name) const {
  for (int i = 0; i < size(); ++i) {
    if (infos_[i].name == name) return i;
  }
  return -1;
}

void ParamStore::ZeroGrads() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

}  // namespace meshtune::engine
