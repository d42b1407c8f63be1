#include "tuner/inputs/compare_config.h"

#include <cctype>
#include <map>
#include <set>
#include <vector>

#include "search_spaces/limits.h"
#include "tuner/inputs/inputs.h"

namespace meshtune::tuner {
namespace {

using search_spaces::ParallelConfig;

constexpr const char* kSyntaxHint =
    "use tokens like tp=4 pp=8 vpp=3 cp=1 ep=1 etp=1 dp=32 mbs=1 sp dist-opt "
    "recompute=selective layout=2/0, separated by commas or spaces";

std::vector<std::string> SplitTokens(const std::string& text) {
  std::vector<std::string> tokens;
  std::string current;
  for (char ch : text) {
    if (ch == ',' || std::isspace(static_cast<unsigned char>(ch))) {
      if (!current.empty()) tokens.push_back(current);
      current.clear();
    } else {
      current += ch;
    }
  }
  if (!current.empty()) tokens.push_back(current);
  return tokens;
}

// A count of decoder layers: digits only, at most limits::kNumLayers.
bool LayerCount(const std::string& text, int64_t* out) {
  if (text.empty() || text.size() > 6) return false;
  for (char ch : text) {
    if (!std::isdigit(static_cast<unsigned char>(ch))) return false;
  }
  *out = std::stoll(text);
  return *out <= search_spaces::limits::kNumLayers.max;
}

bool IsRecomputeWord(const std::string& token) {
  return token == "none" || token == "selective" || token == "full" ||
         token.rfind("full:", 0) == 0;
}

}  // namespace

StatusOr<ParallelConfig> ParseConfigString(const std::string& text,
                                           int64_t num_gpus,
                                           const std::string& flag) {
  const std::vector<std::string> tokens = SplitTokens(text);
  if (tokens.empty()) {
    return Status::InvalidArgument(flag + " is empty", kSyntaxHint);
  }
  ParallelConfig c;
  std::map<std::string, int64_t*> sizes = {
      {"tp", &c.tp}, {"pp", &c.pp},   {"vpp", &c.vpp}, {"cp", &c.cp},
      {"ep", &c.ep}, {"etp", &c.etp}, {"mbs", &c.mbs}};
  int64_t dp = 0;  // 0 = not given
  std::set<std::string> seen;
  auto once = [&](const std::string& key, const std::string& token) -> Status {
    if (!seen.insert(key).second) {
      return Status::InvalidArgument(flag + ": '" + token + "' sets " + key +
                                         " a second time in '" + text + "'",
                                     "give each axis once");
    }
    return Status::Ok();
  };
  for (const std::string& token : tokens) {
    if (token == "sp" || token == "no-sp") {
      MESHTUNE_RETURN_IF_ERROR(once("sp", token));
      c.sp = token == "sp";
      continue;
    }
    if (token == "dist-opt" || token == "dist_opt" || token == "no-dist-opt") {
      MESHTUNE_RETURN_IF_ERROR(once("dist-opt", token));
      c.dist_opt = token != "no-dist-opt";
      continue;
    }
    const size_t eq = token.find('=');
    if (token.rfind("layout", 0) == 0) {
      // "layout2/0" (as reports print it) or "layout=2/0": the decoder
      // layers of the first and the last virtual stage
      // (ParallelConfig::layout_first_layers / layout_last_layers).
      MESHTUNE_RETURN_IF_ERROR(once("layout", token));
      std::string value = token.substr(6);
      if (!value.empty() && value[0] == '=') value = value.substr(1);
      const size_t slash = value.find('/');
      int64_t first = -1, last = -1;
      if (slash == std::string::npos ||
          !LayerCount(value.substr(0, slash), &first) ||
          !LayerCount(value.substr(slash + 1), &last)) {
        return Status::InvalidArgument(
            flag + ": '" + token +
                "' needs the first and last stage's layers, e.g. layout=2/0",
            kSyntaxHint);
      }
      c.layout_first_layers = first;
      c.layout_last_layers = last;
      continue;
    }
    if (IsRecomputeWord(token) || token.rfind("recompute=", 0) == 0) {
      MESHTUNE_RETURN_IF_ERROR(once("recompute", token));
      const std::string mode =
          eq == std::string::npos ? token : token.substr(eq + 1);
      auto r = ParseRecompute(mode, /*any_full=*/false);
      if (!r.ok()) {
        return Status::InvalidArgument(
            flag + ": unknown recompute mode in '" + token + "'",
            "use recompute=none, selective, full, full:N or full:block:N");
      }
      c.recompute = r.value();
      continue;
    }
    // "tp=4" or "tp4": the key is the leading letters.
    size_t key_end = 0;
    while (key_end < token.size() &&
           std::isalpha(static_cast<unsigned char>(token[key_end]))) {
      ++key_end;
    }
    const std::string key = token.substr(0, key_end);
    std::string value = token.substr(key_end);
    if (!value.empty() && value[0] == '=') value = value.substr(1);
    const bool known = sizes.count(key) > 0 || key == "dp";
    if (!known) {
      return Status::InvalidArgument(
          flag + ": unknown token '" + token + "' in '" + text + "'",
          kSyntaxHint);
    }
    auto number = ParsePositiveInt(value, key);
    if (value.empty() || !number.ok()) {
      return Status::InvalidArgument(flag + ": '" + token +
                                         "' needs a positive integer, e.g. " +
                                         key + "=4",
                                     kSyntaxHint);
    }
    MESHTUNE_RETURN_IF_ERROR(once(key, token));
    if (key == "dp") {
      dp = number.value();
    } else {
      *sizes[key] = number.value();
    }
  }
  const int64_t model_parallel = c.tp * c.pp * c.cp;
  if (num_gpus % model_parallel != 0) {
    return Status::InvalidArgument(
        flag + ": tp " + std::to_string(c.tp) + " x pp " +
            std::to_string(c.pp) + " x cp " + std::to_string(c.cp) + " = " +
            std::to_string(model_parallel) + " does not divide --gpus " +
            std::to_string(num_gpus),
        "choose tp, pp and cp whose product divides the GPU count");
  }
  c.dp = num_gpus / model_parallel;
  if (dp != 0 && dp != c.dp) {
    return Status::InvalidArgument(
        flag + ": dp=" + std::to_string(dp) + " contradicts --gpus " +
            std::to_string(num_gpus) + " / (tp·pp·cp " +
            std::to_string(model_parallel) + ") = " + std::to_string(c.dp),
        "leave dp out; it is derived from the other sizes");
  }
  return c;
}

std::string FormatCompactConfig(const ParallelConfig& c) {
  std::string s = "tp" + std::to_string(c.tp) + " pp" + std::to_string(c.pp);
  if (c.vpp != 1) s += " vpp" + std::to_string(c.vpp);
  if (c.cp != 1) s += " cp" + std::to_string(c.cp);
  if (c.ep != 1) s += " ep" + std::to_string(c.ep);
  if (c.expert_tp() != c.tp) s += " etp" + std::to_string(c.expert_tp());
  s += " dp" + std::to_string(c.dp) + " mbs" + std::to_string(c.mbs);
  if (c.sp) s += " sp";
  s += " " + FormatRecompute(c.recompute);
  if (c.dist_opt) s += " dist-opt";
  if (c.uneven_layout()) {
    s += " layout" + std::to_string(c.layout_first_layers) + "/" +
         std::to_string(c.layout_last_layers);
  }
  return s;
}

}  // namespace meshtune::tuner
