#include "search_spaces/cuda_graphs.h"

#include <array>
#include <utility>

#include "search_spaces/yaml_util.h"

namespace meshtune::search_spaces {
namespace {

// Megatron's names, in the order CudaGraphScopeString prints them.
constexpr std::array<std::pair<const char*, uint32_t>, 7> kScopeNames = {{
    {"attn", kGraphAttn},
    {"mlp", kGraphMlp},
    {"moe", kGraphMoe},
    {"moe_router", kGraphMoeRouter},
    {"moe_preprocess", kGraphMoePreprocess},
    {"mamba", kGraphMamba},
    {"full_iteration", kGraphFullIteration},
}};

constexpr uint32_t kWholeLayer = kGraphAttn | kGraphMlp | kGraphMoe |
                                 kGraphMoeRouter | kGraphMoePreprocess |
                                 kGraphMamba;

constexpr CudaGraphImpl kImpls[] = {CudaGraphImpl::kNone, CudaGraphImpl::kLocal,
                                    CudaGraphImpl::kTransformerEngine};

// "a, b or c".
std::string Choices(const std::vector<std::string>& names) {
  std::vector<std::string> head(names.begin(), names.end() - 1);
  return yaml_util::Join(head, ", ") + " or " + names.back();
}

}  // namespace

const std::vector<std::string>& CudaGraphImplNames() {
  static const auto* names = [] {
    auto* n = new std::vector<std::string>;
    for (CudaGraphImpl i : kImpls) n->push_back(ToString(i));
    return n;
  }();
  return *names;
}

const std::vector<std::string>& CudaGraphScopeNames() {
  static const auto* names = [] {
    auto* n = new std::vector<std::string>;
    for (const auto& [name, bit] : kScopeNames) n->push_back(name);
    return n;
  }();
  return *names;
}

bool CudaGraphs::Captures(uint32_t bit) const {
  if (!enabled()) return false;
  if (full_iteration()) return true;
  const uint32_t s = scope == 0 ? kWholeLayer : scope;
  // The whole MoE block includes its router and preprocess.
  if ((s & kGraphMoe) && (bit & (kGraphMoeRouter | kGraphMoePreprocess))) {
    return true;
  }
  return (s & bit) != 0;
}

const char* ToString(CudaGraphImpl impl) {
  switch (impl) {
    case CudaGraphImpl::kNone:
      return "none";
    case CudaGraphImpl::kLocal:
      return "local";
    case CudaGraphImpl::kTransformerEngine:
      return "transformer_engine";
  }
  return "none";
}

std::string CudaGraphScopeString(uint32_t scope, char separator) {
  std::string out;
  for (const auto& [name, bit] : kScopeNames) {
    if ((scope & bit) == 0) continue;
    if (!out.empty()) out += separator;
    out += name;
  }
  return out;
}

Status ParseCudaGraphImpl(std::string_view text, CudaGraphImpl* out) {
  for (CudaGraphImpl i : kImpls) {
    if (text == ToString(i)) {
      *out = i;
      return Status::Ok();
    }
  }
  return Status::InvalidArgument(
      "unknown --cuda-graph-impl '" + std::string(text) + "'",
      "use " + Choices(CudaGraphImplNames()));
}

Status ParseCudaGraphScope(std::string_view text, uint32_t* out) {
  uint32_t scope = 0;
  size_t i = 0;
  while (i < text.size()) {
    const size_t end = text.find_first_of(" ,", i);
    const std::string_view word =
        text.substr(i, end == std::string_view::npos ? end : end - i);
    i = end == std::string_view::npos ? text.size() : end + 1;
    if (word.empty()) continue;
    bool known = false;
    for (const auto& [name, bit] : kScopeNames) {
      if (word == name) {
        scope |= bit;
        known = true;
      }
    }
    if (!known) {
      return Status::InvalidArgument(
          "unknown --cuda-graph-scope value '" + std::string(word) + "'",
          "use " + Choices(CudaGraphScopeNames()));
    }
  }
  *out = scope;
  return Status::Ok();
}

Status ValidateCudaGraphs(const CudaGraphs& graphs) {
  if (!graphs.enabled() && graphs.scope != 0) {
    return Status::InvalidArgument(
        "--cuda-graph-scope " + CudaGraphScopeString(graphs.scope) +
            " has no effect with --cuda-graph-impl none",
        "add --cuda-graph-impl transformer_engine (or local)");
  }
  if ((graphs.scope & kGraphFullIteration) &&
      graphs.impl != CudaGraphImpl::kLocal) {
    return Status::InvalidArgument(
        "--cuda-graph-scope full_iteration needs --cuda-graph-impl local",
        "use --cuda-graph-impl local --cuda-graph-scope full_iteration");
  }
  if ((graphs.scope & kGraphFullIteration) &&
      graphs.scope != kGraphFullIteration) {
    return Status::InvalidArgument(
        "--cuda-graph-scope full_iteration captures the whole step and "
        "takes no other scope",
        "pass full_iteration alone");
  }
  return Status::Ok();
}

StatusOr<CudaGraphs> ParseCudaGraphs(std::string_view impl,
                                     std::string_view scope) {
  CudaGraphs g;
  if (!impl.empty()) {
    const Status s = ParseCudaGraphImpl(impl, &g.impl);
    if (!s.ok()) return s;
  }
  Status s = ParseCudaGraphScope(scope, &g.scope);
  if (s.ok()) s = ValidateCudaGraphs(g);
  if (!s.ok()) return s;
  return g;
}

}  // namespace meshtune::search_spaces
