// Built-in presets (parsed once from the embedded YAML files) and name/path
// resolution with "did you mean" hints.
#include "search_spaces/presets/presets.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "search_spaces/embedded_file.h"
#include "search_spaces/yaml_util.h"

namespace meshtune::search_spaces {
namespace {

using yaml_util::Lower;

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

// A built-in preset that does not parse is a bug in this source tree (the
// tests parse every one), so it aborts instead of failing one lookup.
[[noreturn]] void BrokenPreset(const Status& s) {
  std::fprintf(stderr, "meshtune: broken built-in preset: %s\n  %s\n",
               s.message().c_str(), s.hint().c_str());
  std::abort();
}

// Names and aliases must identify one preset each, case-insensitively.
template <typename Spec>
void CheckUniqueNames(const std::vector<Spec>& specs, const char* kind) {
  std::map<std::string, std::string> owner;
  for (const Spec& s : specs) {
    std::vector<std::string> names = s.aliases;
    names.push_back(s.name);
    for (const std::string& n : names) {
      auto [it, inserted] = owner.emplace(Lower(n), s.name);
      if (!inserted && it->second != s.name) {
        BrokenPreset(Status::Internal(std::string(kind) + " name '" + n +
                                      "' is used by both " + it->second +
                                      " and " + s.name));
      }
    }
  }
}

// Files under `dir/` ("models/") parsed with `parse`; the file name must be
// the preset's name so that `tune models` and the tree agree.
template <typename Spec, typename Parse>
std::vector<Spec> LoadPresets(const std::string& dir, Parse parse) {
  std::vector<Spec> specs;
  for (const EmbeddedFile& f : EmbeddedPresetFiles()) {
    if (!StartsWith(f.path, dir)) continue;
    StatusOr<Spec> spec = parse(f.contents, "search_spaces/" + f.path);
    if (!spec.ok()) BrokenPreset(spec.status());
    const std::string expected = dir + spec->name + ".yaml";
    if (f.path != expected) {
      BrokenPreset(Status::Internal("search_spaces/" + f.path + ": name '" +
                                    spec->name +
                                    "' does not match the file "
                                    "name (expected " +
                                    expected + ")"));
    }
    specs.push_back(std::move(spec).value());
  }
  return specs;
}

// Family = the name without its size suffix ("llama3-70b" -> "llama3").
std::string Family(const std::string& name) {
  const size_t dash = name.rfind('-');
  return dash == std::string::npos ? name : name.substr(0, dash);
}

// Size for ordering: the published count, else the 12·L·h² estimate of the
// transformer blocks (Narayanan et al. 2021, eq. 2 without embeddings).
double SizeKeyB(const ModelSpec& m) {
  if (m.published_params_b > 0) return m.published_params_b;
  return 12.0 * m.num_layers * m.hidden_size * m.hidden_size / 1e9;
}

// Up to three preset names for an unknown `query`: presets whose name or an
// alias contains the query (or is contained in it) first, then the rest by
// edit distance to the closest name or alias; ties keep the preset order.
template <typename Spec>
std::vector<std::string> Suggest(const std::string& query,
                                 const std::vector<Spec>& specs) {
  // The first 64 bytes: edit distance is quadratic in the query's length.
  const std::string q = Lower(query.substr(0, 64));
  std::vector<std::tuple<int, int, size_t>> ranked;  // (!substr, dist, index)
  for (size_t i = 0; i < specs.size(); ++i) {
    std::vector<std::string> names = specs[i].aliases;
    names.insert(names.begin(), specs[i].name);
    bool substring = false;
    int dist = 1 << 20;
    for (const std::string& raw : names) {
      const std::string n = Lower(raw);
      if (q.size() >= 2 &&
          (n.find(q) != std::string::npos ||
           (n.size() >= 2 && q.find(n) != std::string::npos))) {
        substring = true;
      }
      dist = std::min(dist, yaml_util::EditDistance(q, n));
    }
    ranked.emplace_back(substring ? 0 : 1, dist, i);
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < ranked.size() && i < 3; ++i) {
    out.push_back(specs[std::get<2>(ranked[i])].name);
  }
  return out;
}

template <typename Spec, typename Parse>
StatusOr<Spec> Resolve(const std::string& arg, const std::vector<Spec>& specs,
                       const std::string& kind, const std::string& list_cmd,
                       Parse parse) {
  if (arg.empty()) {
    return Status::InvalidArgument("empty " + kind + " name",
                                   "give a preset name or a .yaml path; run '" +
                                       list_cmd + "' for the list");
  }
  if (yaml_util::LooksLikePath(arg)) {
    StatusOr<std::string> text = yaml_util::ReadFile(arg, kind + " file");
    if (!text.ok()) return text.status();
    return parse(*text, arg);
  }
  const std::string key = Lower(arg);
  for (const Spec& s : specs) {
    if (Lower(s.name) == key) return s;
    for (const std::string& alias : s.aliases) {
      if (Lower(alias) == key) return s;
    }
  }
  return Status::NotFound(
      "unknown " + kind + " preset '" + yaml_util::Printable(arg) + "'",
      "did you mean: " + yaml_util::Join(Suggest(arg, specs)) + "? run '" +
          list_cmd + "' for the list");
}

}  // namespace

const std::vector<ModelSpec>& ModelPresets() {
  static const std::vector<ModelSpec> kModels = [] {
    std::vector<ModelSpec> models =
        LoadPresets<ModelSpec>("models/", ParseModelYaml);
    CheckUniqueNames(models, "model");
    // Fixed order for listings: by family, then by size within a family.
    std::stable_sort(
        models.begin(), models.end(),
        [](const ModelSpec& a, const ModelSpec& b) {
          return std::make_tuple(Family(a.name), SizeKeyB(a), a.name) <
                 std::make_tuple(Family(b.name), SizeKeyB(b), b.name);
        });
    return models;
  }();
  return kModels;
}

const std::vector<ClusterSpec>& ClusterPresets() {
  static const std::vector<ClusterSpec> kClusters = [] {
    std::vector<ClusterSpec> clusters =
        LoadPresets<ClusterSpec>("clusters/", ParseClusterYaml);
    CheckUniqueNames(clusters, "cluster");
    // By BF16 peak, then memory: a100-40g, ..., l40s, rtx-pro-6000, h100,
    // ..., gb300 (roughly oldest to newest for the SXM parts).
    std::stable_sort(
        clusters.begin(), clusters.end(),
        [](const ClusterSpec& a, const ClusterSpec& b) {
          return std::make_tuple(a.gpu.peak_bf16_tflops, a.gpu.hbm_gb, a.name) <
                 std::make_tuple(b.gpu.peak_bf16_tflops, b.gpu.hbm_gb, b.name);
        });
    return clusters;
  }();
  return kClusters;
}

std::string ClusterPresetForGpu(const std::string& gpu_name) {
  std::string upper = gpu_name;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return std::toupper(c); });
  auto has = [&](const char* part) {
    return upper.find(part) != std::string::npos;
  };
  // Separators vary ("RTX-PRO-6000", "RTX PRO 6000", "rtx_pro_6000").
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](char c) { return c == '-' || c == '_' ? ' ' : c; });
  // Grace superchips first: "GB200" contains "B200", "GH200" "H200". The
  // gh200 preset is the 96 GB HBM3 part, not the 144 GB HBM3e one.
  if (has("GH200")) return has("144G") || has("HBM3E") ? "" : "gh200";
  for (const char* kind : {"GB300", "GB200", "B300", "B200", "H200"}) {
    if (has(kind)) {
      std::string name = kind;
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      return name;
    }
  }
  if (has("H100")) return has("PCIE") ? "" : "h100";
  if (has("A100")) {
    if (has("40G")) return "a100-40g";
    if (has("80G")) return "a100-80g";
  }
  if (has("L40S")) return "l40s";  // not the L40 (half its FP8 rate)
  // The preset is the Server Edition; the Workstation and Max-Q editions
  // run at other clocks, power and memory bandwidth.
  if (has("RTX PRO 6000")) {
    return has("WORKSTATION") || has("MAX Q") ? "" : "rtx-pro-6000";
  }
  return "";
}

StatusOr<ModelSpec> ResolveModel(const std::string& name_or_path) {
  return Resolve(name_or_path, ModelPresets(), "model", "tune models",
                 ParseModelYaml);
}

StatusOr<ClusterSpec> ResolveCluster(const std::string& name_or_path) {
  return Resolve(name_or_path, ClusterPresets(), "cluster", "tune gpus",
                 ParseClusterYaml);
}

StatusOr<SearchSpace> ResolveSearchSpace(const std::string& name_or_path) {
  if (yaml_util::LooksLikePath(name_or_path)) {
    StatusOr<std::string> text =
        yaml_util::ReadFile(name_or_path, "search space file");
    if (!text.ok()) return text.status();
    return ParseSearchSpaceYaml(*text, name_or_path);
  }
  const std::string wanted = "spaces/" + Lower(name_or_path) + ".yaml";
  std::vector<std::string> names;
  for (const EmbeddedFile& f : EmbeddedPresetFiles()) {
    if (!StartsWith(f.path, "spaces/")) continue;
    if (f.path == wanted) {
      return ParseSearchSpaceYaml(f.contents, "search_spaces/" + f.path);
    }
    // "spaces/nvlink-tp.yaml" -> "nvlink-tp"
    names.push_back(f.path.substr(7, f.path.size() - 7 - 5));
  }
  return Status::NotFound(
      "unknown search space preset '" + yaml_util::Printable(name_or_path) +
          "'",
      "available: " + yaml_util::Join(names) + "; or give a .yaml path");
}

}  // namespace meshtune::search_spaces
