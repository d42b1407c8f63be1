#include "search_spaces/pipeline_layout.h"

#include <algorithm>

#include "search_spaces/yaml_util.h"

namespace meshtune::search_spaces {

bool PipelineLayout::Valid(int64_t num_layers, int64_t pp, int64_t vpp) {
  if (num_layers < 1 || pp < 1 || vpp < 1) return false;
  return num_layers % (pp * vpp) == 0 ||
         AccountsEmbeddingAndLoss(num_layers, pp, vpp);
}

bool PipelineLayout::AccountsEmbeddingAndLoss(int64_t num_layers, int64_t pp,
                                              int64_t vpp) {
  // With one virtual stage the embedding and loss would share it with no
  // transformer layer to move, so the flags only help when pp·vpp >= 2; and
  // every virtual stage must keep at least one transformer layer.
  const int64_t stages = pp * vpp;
  return pp >= 2 && num_layers % stages != 0 &&
         (num_layers + 2) % stages == 0 && (num_layers + 2) / stages >= 2;
}

bool PipelineLayout::ValidUneven(int64_t num_layers, int64_t pp, int64_t vpp,
                                 int64_t first, int64_t last) {
  if (num_layers < 1 || pp < 1 || vpp < 1 || first < 0 || last < 0) {
    return false;
  }
  const int64_t stages = pp * vpp;
  if (stages < 2) return false;
  const int64_t rest = num_layers - first - last;
  if (stages == 2) return rest == 0;
  if (rest <= 0 || rest % (stages - 2) != 0) return false;
  const int64_t middle = rest / (stages - 2);
  return first <= middle && last <= middle;
}

std::vector<std::pair<int64_t, int64_t>> PipelineLayout::UnevenFamily(
    int64_t num_layers, int64_t pp, int64_t vpp) {
  std::vector<std::pair<int64_t, int64_t>> out;
  const int64_t stages = pp * vpp;
  if (num_layers < 1 || pp < 1 || vpp < 1 || stages < 2 ||
      vpp > kMaxUnevenVpp) {
    return out;
  }
  if (stages == 2) {
    out.emplace_back(num_layers - num_layers / 2, num_layers / 2);
    return out;
  }
  const int64_t m = (num_layers + stages - 1) / stages;
  const int64_t r = num_layers - (stages - 2) * m;
  if (r < 0) return out;
  const int64_t heavy = std::min(m, r);
  for (const auto& fl :
       {std::make_pair(heavy, r - heavy), std::make_pair(r - heavy, heavy)}) {
    if (ValidUneven(num_layers, pp, vpp, fl.first, fl.second) &&
        std::find(out.begin(), out.end(), fl) == out.end()) {
      out.push_back(fl);
    }
  }
  return out;
}

bool PipelineLayout::Valid(int64_t num_layers, const ParallelConfig& c) {
  if (c.uneven_layout()) {
    return ValidUneven(num_layers, c.pp, c.vpp, c.layout_first_layers,
                       c.layout_last_layers);
  }
  return Valid(num_layers, c.pp, c.vpp) ||
         !UnevenFamily(num_layers, c.pp, c.vpp).empty();
}

PipelineLayout::PipelineLayout(int64_t num_layers, int64_t pp, int64_t vpp)
    : pp_(pp),
      vpp_(vpp),
      accounts_(AccountsEmbeddingAndLoss(num_layers, pp, vpp)) {
  MESHTUNE_CHECK(Valid(num_layers, pp, vpp));
  units_per_chunk_ = (num_layers + (accounts_ ? 2 : 0)) / (pp * vpp);
  // The accounting takes one layer from the first (embedding) and the last
  // (loss) virtual stage.
  SetCounts(accounts_ ? units_per_chunk_ - 1 : units_per_chunk_,
            accounts_ ? units_per_chunk_ - 1 : units_per_chunk_);
}

PipelineLayout::PipelineLayout(int64_t num_layers, const ParallelConfig& c)
    : pp_(c.pp), vpp_(c.vpp) {
  MESHTUNE_CHECK(Valid(num_layers, c));
  if (!c.uneven_layout() && Valid(num_layers, c.pp, c.vpp)) {
    *this = PipelineLayout(num_layers, c.pp, c.vpp);
    return;
  }
  // Explicit uneven fields, or (none given) the family's first member.
  int64_t first = c.layout_first_layers, last = c.layout_last_layers;
  if (!c.uneven_layout()) {
    const auto fl = UnevenFamily(num_layers, c.pp, c.vpp).front();
    first = fl.first;
    last = fl.second;
  }
  const int64_t stages = c.pp * c.vpp;
  uneven_ = true;
  units_per_chunk_ = stages > 2 ? (num_layers - first - last) / (stages - 2)
                                : std::max(first, last);
  SetCounts(first, last);
}

void PipelineLayout::SetCounts(int64_t first, int64_t last) {
  const int64_t stages = pp_ * vpp_;
  counts_.assign(stages, units_per_chunk_);
  counts_.front() = first;
  counts_.back() = last;
  starts_.resize(stages);
  int64_t next = 0;
  for (int64_t v = 0; v < stages; ++v) {
    starts_[v] = next;
    next += counts_[v];
  }
}

int64_t PipelineLayout::LayersInChunk(int64_t stage, int64_t chunk) const {
  MESHTUNE_CHECK(stage >= 0 && stage < pp_ && chunk >= 0 && chunk < vpp_);
  return counts_[chunk * pp_ + stage];
}

int64_t PipelineLayout::FirstLayerOfChunk(int64_t stage, int64_t chunk) const {
  MESHTUNE_CHECK(stage >= 0 && stage < pp_ && chunk >= 0 && chunk < vpp_);
  return starts_[chunk * pp_ + stage];
}

int64_t PipelineLayout::LayersOnStage(int64_t stage) const {
  int64_t layers = 0;
  for (int64_t chunk = 0; chunk < vpp_; ++chunk) {
    layers += LayersInChunk(stage, chunk);
  }
  return layers;
}

int64_t PipelineLayout::MaxLayersOnStage() const {
  int64_t most = 0;
  for (int64_t s = 0; s < pp_; ++s) most = std::max(most, LayersOnStage(s));
  return most;
}

namespace {

std::string Layers(int64_t n) {
  if (n == 0) return "";
  if (n <= 2) return std::string(n, 't');
  return "t*" + std::to_string(n);
}

}  // namespace

std::string PipelineLayout::MegatronString(int64_t mtp_layers) const {
  const int64_t stages = static_cast<int64_t>(counts_.size());
  std::string out = "E" + Layers(counts_.front());
  if (stages == 1) {
    return out + std::string(std::max<int64_t>(0, mtp_layers), 'm') + "L";
  }
  out += "|";
  // Middle stages: runs of equal counts as "(t*m|)*k".
  int64_t v = 1;
  while (v < stages - 1) {
    int64_t w = v;
    while (w < stages - 1 && counts_[w] == counts_[v]) ++w;
    const std::string one = Layers(counts_[v]) + "|";
    out += w - v == 1 ? one : "(" + one + ")*" + std::to_string(w - v);
    v = w;
  }
  return out + Layers(counts_.back()) +
         std::string(std::max<int64_t>(0, mtp_layers), 'm') + "L";
}

namespace {

// Expands "(...)*n" and "x*n" and drops commas and spaces.
StatusOr<std::string> ExpandLayout(const std::string& s, size_t* pos,
                                   int depth) {
  std::string out;
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(
        "pipeline layout '" + yaml_util::Printable(s) + "': " + why +
            " at position " + std::to_string(*pos + 1),
        "write stages like Et|(tt|)*30mL: E embedding, t layer, m MTP "
        "layer, L loss, | between virtual stages");
  };
  while (*pos < s.size()) {
    const char c = s[*pos];
    std::string unit;
    if (c == ',' || c == ' ') {
      ++*pos;
      continue;
    }
    if (c == ')') {
      if (depth == 0) return bad("unmatched ')'");
      return out;
    }
    if (c == '(') {
      ++*pos;
      auto inner = ExpandLayout(s, pos, depth + 1);
      if (!inner.ok()) return inner.status();
      if (*pos >= s.size() || s[*pos] != ')') return bad("missing ')'");
      ++*pos;
      unit = *inner;
    } else if (c == 'E' || c == 't' || c == 'm' || c == 'L' || c == '|') {
      unit = std::string(1, c);
      ++*pos;
    } else {
      return bad(std::string("unknown symbol '") +
                 yaml_util::Printable(std::string(1, c)) + "'");
    }
    if (*pos < s.size() && s[*pos] == '*') {
      ++*pos;
      int64_t n = 0;
      const size_t start = *pos;
      while (*pos < s.size() && s[*pos] >= '0' && s[*pos] <= '9' &&
             n <= 100000) {
        n = n * 10 + (s[(*pos)++] - '0');
      }
      if (*pos == start) return bad("expected a count after '*'");
      if (static_cast<double>(unit.size()) * n > 1e6) {
        return bad("layout too long");
      }
      std::string rep;
      for (int64_t i = 0; i < n; ++i) rep += unit;
      unit.swap(rep);
    }
    out += unit;
    if (out.size() > 1000000) return bad("layout too long");
  }
  if (depth > 0) return bad("missing ')'");
  return out;
}

}  // namespace

StatusOr<ParsedLayout> ParsePipelineLayout(const std::string& layout,
                                           int64_t num_layers, int64_t pp,
                                           int64_t mtp_layers) {
  size_t pos = 0;
  auto expanded = ExpandLayout(layout, &pos, 0);
  if (!expanded.ok()) return expanded.status();
  auto bad = [&](const std::string& why, const std::string& hint) {
    return Status::InvalidArgument(
        "pipeline layout '" + yaml_util::Printable(layout) + "': " + why, hint);
  };
  std::vector<std::string> stages(1);
  for (char c : *expanded) {
    if (c == '|') {
      stages.emplace_back();
    } else {
      stages.back() += c;
    }
  }
  const int64_t count = static_cast<int64_t>(stages.size());
  std::vector<int64_t> layers(count, 0);
  int64_t total = 0, mtp = 0;
  for (int64_t v = 0; v < count; ++v) {
    const std::string& st = stages[v];
    for (size_t i = 0; i < st.size(); ++i) {
      const char c = st[i];
      if (c == 'E' && !(v == 0 && i == 0)) {
        return bad("E must open the first stage", "write E once, first");
      }
      if (c == 'L' && !(v == count - 1 && i + 1 == st.size())) {
        return bad("L must close the last stage", "write L once, last");
      }
      if (c == 'm' && v != count - 1) {
        return bad("MTP layers (m) must be on the last stage",
                   "move every m to the last stage, before L");
      }
      layers[v] += c == 't';
      mtp += c == 'm';
    }
    total += layers[v];
  }
  if (stages.front().empty() || stages.front()[0] != 'E' ||
      stages.back().empty() || stages.back().back() != 'L') {
    return bad("it must start with E and end with L", "e.g. Et|(tt|)*30mL");
  }
  if (total != num_layers) {
    return bad("it places " + std::to_string(total) +
                   " layers (t) but the "
                   "model has " +
                   std::to_string(num_layers),
               "write one t per decoder layer");
  }
  if (mtp != std::max<int64_t>(0, mtp_layers)) {
    return bad("it places " + std::to_string(mtp) +
                   " MTP layers (m) but the "
                   "model has " +
                   std::to_string(mtp_layers),
               "write one m per MTP depth on the last stage");
  }
  if (pp < 1 || count % pp != 0) {
    return bad(std::to_string(count) +
                   " stages are not a multiple of "
                   "pipeline size " +
                   std::to_string(pp),
               "write pp x vpp stages separated by |");
  }
  ParsedLayout out;
  out.vpp = count / pp;
  out.first_layers = layers.front();
  out.last_layers = layers.back();
  for (int64_t v = 1; v + 1 < count; ++v) {
    if (layers[v] != layers[1]) {
      return bad("middle stages hold different layer counts (" +
                     std::to_string(layers[1]) + " and " +
                     std::to_string(layers[v]) + ")",
                 "meshtune models layouts whose first and last stage differ "
                 "and whose other stages are equal");
    }
  }
  if (!PipelineLayout::ValidUneven(num_layers, pp, out.vpp, out.first_layers,
                                   out.last_layers)) {
    return bad("the first or last stage holds more layers than a middle one",
               "keep the edge stages at most as deep as the others");
  }
  out.even = count > 0 && out.first_layers == out.last_layers &&
             num_layers % count == 0 && out.first_layers == num_layers / count;
  return out;
}

}  // namespace meshtune::search_spaces
