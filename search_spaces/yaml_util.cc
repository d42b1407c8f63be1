#include "search_spaces/yaml_util.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "search_spaces/file_io.h"

namespace meshtune::search_spaces::yaml_util {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// How a non-scalar or empty value is named in "got '...'" messages.
std::string Describe(const YAML::Node& value) {
  if (!value || value.IsNull()) return "nothing";
  if (value.IsSequence()) return "a list";
  if (value.IsMap()) return "a mapping";
  return "'" + Printable(value.Scalar()) + "'";
}

}  // namespace

std::string Lower(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

int EditDistance(const std::string& a, const std::string& b) {
  // Two-row dynamic programme (Wagner-Fischer).
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<std::string> Closest(const std::string& target,
                                 const std::vector<std::string>& candidates,
                                 size_t k) {
  // Edit distance is quadratic: a megabyte-long key from a hostile file
  // must not cost seconds, and its first 64 bytes decide the hint anyway.
  const std::string head = Lower(target.substr(0, 64));
  std::vector<std::pair<int, size_t>> scored;
  for (size_t i = 0; i < candidates.size(); ++i) {
    scored.emplace_back(EditDistance(head, Lower(candidates[i])), i);
  }
  std::stable_sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && out.size() < k; ++i) {
    out.push_back(candidates[scored[i].second]);
  }
  return out;
}

std::string DoubleQuoted(const std::string& text) {
  std::string out = "\"";
  for (const char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
      continue;
    }
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

std::string Printable(const std::string& text, size_t max_chars) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  size_t shown = 0;
  for (const char c : text) {
    if (max_chars > 0 && shown == max_chars) {
      out += "...";
      break;
    }
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else {
      out += c;
    }
    ++shown;
  }
  return out;
}

std::string Join(const std::vector<std::string>& parts,
                 const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += sep;
    out += parts[i];
  }
  return out;
}

std::string Where(const std::string& source, const YAML::Node& node) {
  if (!node || node.Mark().line < 0) return source;
  return source + ":" + std::to_string(node.Mark().line + 1);
}

StatusOr<YAML::Node> Load(const std::string& text, const std::string& source) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    // ParserException and its DeepRecursion (yaml-cpp's nesting guard) are
    // the ones thrown for bad text; any other yaml-cpp exception is caught
    // too, so that no input escapes as an exception.
    // yaml-cpp reports errors found at end of input (an unclosed bracket or
    // quote) on the line after the last one; point at the last line instead.
    const int64_t lines = std::count(text.begin(), text.end(), '\n') +
                          (!text.empty() && text.back() != '\n' ? 1 : 0);
    const int64_t line =
        std::max<int64_t>(1, std::min<int64_t>(e.mark.line + 1, lines));
    return Status::InvalidArgument(
        source + ":" + std::to_string(line) +
            ": malformed YAML: " + Printable(e.msg, 0),
        "fix the YAML syntax on that line (indentation, ':' after keys, "
        "matching brackets and quotes)");
  }
}

StatusOr<std::string> ReadFile(const std::string& path,
                               const std::string& what) {
  StatusOr<std::string> text = ReadRegularFile(path, what);
  if (!text.ok() && text.status().code() == Status::Code::kNotFound) {
    // Model and cluster arguments may be preset names as well as paths.
    return Status::NotFound(text.status().message(),
                            "check the path, or give a preset name instead");
  }
  return text;
}

bool LooksLikePath(const std::string& arg) {
  const std::string lower = Lower(arg);
  if (EndsWith(lower, ".yaml") || EndsWith(lower, ".yml")) return true;
  // Anything that exists is a path: a FIFO or a directory named like a
  // preset must be refused by ReadFile ("not a regular file"), not looked up
  // in the preset list (and a FIFO must never be opened for reading).
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::status(arg, ec));
}

MapReader::MapReader(YAML::Node map, std::string source, std::string what)
    : map_(std::move(map)),
      source_(std::move(source)),
      what_(std::move(what)) {}

Status MapReader::CheckIsMap() const {
  if (map_ && map_.IsMap()) return Status::Ok();
  return Status::InvalidArgument(
      Where(source_, map_) + ": expected a " + what_ +
          " mapping (key: value lines), got " + Describe(map_),
      "write one 'key: value' per line, e.g. 'num_layers: 24'");
}

Status MapReader::CheckKeys(const std::vector<std::string>& known) const {
  std::set<std::string> seen;
  for (const auto& kv : map_) {
    const std::string key = kv.first.Scalar();
    const std::string where = Where(source_, kv.first);
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return Status::InvalidArgument(
          where + ": unknown key '" + Printable(key) + "' in " + what_,
          "did you mean '" + Closest(key, known, 1).front() + "'?");
    }
    if (!seen.insert(key).second) {
      return Status::InvalidArgument(
          where + ": duplicate key '" + Printable(key) + "' in " + what_,
          "keep only one '" + Printable(key) + ":' line");
    }
  }
  return Status::Ok();
}

bool MapReader::Has(const std::string& key) const {
  return static_cast<bool>(map_[key]);
}

std::string MapReader::WhereKey(const std::string& key) const {
  for (const auto& kv : map_) {
    if (kv.first.Scalar() == key) return Where(source_, kv.first);
  }
  return WhereMap();
}

std::string MapReader::WhereMap() const { return Where(source_, map_); }

Status MapReader::Missing(const std::string& key,
                          const std::string& example) const {
  return Status::InvalidArgument(
      WhereMap() + ": " + what_ + " is missing required key '" + key + "'",
      "add a line '" + key + ": " + example + "'");
}

Status MapReader::TypeError(const YAML::Node& value, const std::string& key,
                            const std::string& expected,
                            const std::string& hint) const {
  return Status::InvalidArgument(WhereKey(key) + ": " + key + ": expected " +
                                     expected + ", got " + Describe(value),
                                 hint);
}

StatusOr<int64_t> MapReader::ParseInt(const YAML::Node& value,
                                      const std::string& key, int64_t min_value,
                                      const SizeLimit* limit) const {
  const std::string expected =
      min_value >= 1 ? "a positive integer" : "a non-negative integer";
  const std::string hint =
      "write a whole number" +
      std::string(min_value >= 1 ? " greater than 0" : " (0 or more)") +
      ", e.g. '" + key + ": 8'";
  if (!value.IsScalar()) return TypeError(value, key, expected, hint);
  const std::string& s = value.Scalar();
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || end != s.c_str() + s.size() ||
      (errno == ERANGE && v != LLONG_MAX) || v < min_value) {
    return TypeError(value, key, expected, hint);
  }
  // A whole number too large for int64_t (strtoll saturates at LLONG_MAX)
  // is above every limit; without a limit it is not an integer we can hold.
  if (limit != nullptr && (errno == ERANGE || v > limit->max)) {
    return AboveLimit(Printable(s), *limit, key, WhereKey(key));
  }
  if (errno == ERANGE) return TypeError(value, key, expected, hint);
  return static_cast<int64_t>(v);
}

StatusOr<bool> MapReader::ParseBool(const YAML::Node& value,
                                    const std::string& key) const {
  const std::string hint = "write true or false, e.g. '" + key + ": true'";
  if (!value.IsScalar()) return TypeError(value, key, "true or false", hint);
  const std::string s = Lower(value.Scalar());
  if (s == "true" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "no" || s == "off") return false;
  return TypeError(value, key, "true or false", hint);
}

Status MapReader::Int(const std::string& key, bool required, int64_t min_value,
                      int64_t* out) const {
  return IntImpl(key, required, min_value, nullptr, out);
}

Status MapReader::Int(const std::string& key, bool required, int64_t min_value,
                      const SizeLimit& limit, int64_t* out) const {
  return IntImpl(key, required, min_value, &limit, out);
}

Status MapReader::IntImpl(const std::string& key, bool required,
                          int64_t min_value, const SizeLimit* limit,
                          int64_t* out) const {
  const YAML::Node value = map_[key];
  if (!value) {
    return required ? Missing(key, "<integer>") : Status::Ok();
  }
  StatusOr<int64_t> v = ParseInt(value, key, min_value, limit);
  if (!v.ok()) return v.status();
  *out = *v;
  return Status::Ok();
}

Status MapReader::Double(const std::string& key, bool required,
                         double* out) const {
  const YAML::Node value = map_[key];
  if (!value) return required ? Missing(key, "<number>") : Status::Ok();
  const std::string hint =
      "write a number of 0 or more, e.g. '" + key + ": 1.5'";
  if (!value.IsScalar()) {
    return TypeError(value, key, "a non-negative number", hint);
  }
  const std::string& s = value.Scalar();
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) || v < 0) {
    return TypeError(value, key, "a non-negative number", hint);
  }
  *out = v;
  return Status::Ok();
}

Status MapReader::Bool(const std::string& key, bool required, bool* out) const {
  const YAML::Node value = map_[key];
  if (!value) return required ? Missing(key, "true") : Status::Ok();
  StatusOr<bool> v = ParseBool(value, key);
  if (!v.ok()) return v.status();
  *out = *v;
  return Status::Ok();
}

Status MapReader::String(const std::string& key, bool required,
                         std::string* out) const {
  const YAML::Node value = map_[key];
  if (!value) return required ? Missing(key, "<text>") : Status::Ok();
  if (!value.IsScalar() || value.Scalar().empty()) {
    return TypeError(
        value, key, "a string",
        "write the text after the colon, e.g. '" + key + ": my-name'");
  }
  *out = value.Scalar();
  return Status::Ok();
}

Status MapReader::StringList(const std::string& key,
                             std::vector<std::string>* out) const {
  const YAML::Node value = map_[key];
  if (!value) return Status::Ok();
  const std::string hint = "write a list such as '" + key + ": [a, b]'";
  std::vector<std::string> items;
  if (value.IsScalar()) {
    items.push_back(value.Scalar());
  } else if (value.IsSequence()) {
    for (const auto& item : value) {
      if (!item.IsScalar() || item.Scalar().empty()) {
        return TypeError(item, key, "a list of strings", hint);
      }
      items.push_back(item.Scalar());
    }
  } else {
    return TypeError(value, key, "a list of strings", hint);
  }
  *out = std::move(items);
  return Status::Ok();
}

Status MapReader::IntList(const std::string& key, int64_t min_value,
                          std::vector<int64_t>* out) const {
  return IntListImpl(key, min_value, nullptr, out);
}

Status MapReader::IntList(const std::string& key, int64_t min_value,
                          const SizeLimit& limit,
                          std::vector<int64_t>* out) const {
  return IntListImpl(key, min_value, &limit, out);
}

Status MapReader::IntListImpl(const std::string& key, int64_t min_value,
                              const SizeLimit* limit,
                              std::vector<int64_t>* out) const {
  const YAML::Node value = map_[key];
  if (!value) return Status::Ok();
  std::vector<int64_t> items;
  if (value.IsSequence()) {
    if (value.size() == 0) {
      return TypeError(value, key, "an integer or a non-empty list",
                       "leave the key out to allow every value");
    }
    for (const auto& item : value) {
      StatusOr<int64_t> v = ParseInt(item, key, min_value, limit);
      if (!v.ok()) return v.status();
      items.push_back(*v);
    }
  } else {
    StatusOr<int64_t> v = ParseInt(value, key, min_value, limit);
    if (!v.ok()) return v.status();
    items.push_back(*v);
  }
  std::sort(items.begin(), items.end());
  items.erase(std::unique(items.begin(), items.end()), items.end());
  *out = std::move(items);
  return Status::Ok();
}

Status MapReader::BoolList(const std::string& key,
                           std::vector<bool>* out) const {
  const YAML::Node value = map_[key];
  if (!value) return Status::Ok();
  std::vector<bool> items;
  if (value.IsSequence()) {
    if (value.size() == 0) {
      return TypeError(value, key, "true, false or a non-empty list",
                       "leave the key out to allow both");
    }
    for (const auto& item : value) {
      StatusOr<bool> v = ParseBool(item, key);
      if (!v.ok()) return v.status();
      items.push_back(*v);
    }
  } else {
    StatusOr<bool> v = ParseBool(value, key);
    if (!v.ok()) return v.status();
    items.push_back(*v);
  }
  // Canonical order false, true; duplicates removed.
  std::vector<bool> canonical;
  for (bool b : {false, true}) {
    if (std::find(items.begin(), items.end(), b) != items.end()) {
      canonical.push_back(b);
    }
  }
  *out = std::move(canonical);
  return Status::Ok();
}

Status MapReader::EnumList(const std::string& key,
                           const std::vector<std::string>& allowed,
                           std::vector<std::string>* out) const {
  const YAML::Node value = map_[key];
  if (!value) return Status::Ok();
  const std::string expected = "one of " + Join(allowed, ", ");
  const std::string hint = "write e.g. '" + key + ": " + allowed.front() + "'";
  std::vector<YAML::Node> nodes;
  if (value.IsSequence()) {
    if (value.size() == 0) {
      return TypeError(value, key, expected + " or a non-empty list", hint);
    }
    for (const auto& item : value) nodes.push_back(item);
  } else {
    nodes.push_back(value);
  }
  std::vector<std::string> items;
  for (const auto& node : nodes) {
    if (!node.IsScalar()) return TypeError(node, key, expected, hint);
    auto it = std::find_if(
        allowed.begin(), allowed.end(),
        [&](const std::string& a) { return Lower(a) == Lower(node.Scalar()); });
    if (it == allowed.end()) return TypeError(node, key, expected, hint);
    if (std::find(items.begin(), items.end(), *it) == items.end()) {
      items.push_back(*it);
    }
  }
  *out = std::move(items);
  return Status::Ok();
}

Status MapReader::Enum(const std::string& key, bool required,
                       const std::vector<std::string>& allowed,
                       std::string* out) const {
  const YAML::Node value = map_[key];
  if (!value) return required ? Missing(key, allowed.front()) : Status::Ok();
  const std::string expected = "one of " + Join(allowed, ", ");
  const std::string hint = "write e.g. '" + key + ": " + allowed.front() + "'";
  if (!value.IsScalar()) return TypeError(value, key, expected, hint);
  for (const std::string& a : allowed) {
    if (Lower(a) == Lower(value.Scalar())) {
      *out = a;
      return Status::Ok();
    }
  }
  return TypeError(value, key, expected, hint);
}

}  // namespace meshtune::search_spaces::yaml_util
