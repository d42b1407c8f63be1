// Helpers shared by the model, cluster and search-space YAML parsers: loading
// text with located parse errors, reading typed values out of a mapping with
// `file:line:` messages, and "did you mean" suggestions by edit distance.
//
// Every error this file produces is one line `source:line: message` (line is
// 1-based, from yaml-cpp's Mark) plus a hint that names the fix.
#ifndef MESHTUNE_SEARCH_SPACES_YAML_UTIL_H_
#define MESHTUNE_SEARCH_SPACES_YAML_UTIL_H_

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "search_spaces/limits.h"
#include "search_spaces/status.h"

namespace meshtune::search_spaces::yaml_util {

// Lower-cased copy (ASCII), for case-insensitive name matching.
std::string Lower(const std::string& s);

// Levenshtein distance (insert, delete, substitute each cost 1).
int EditDistance(const std::string& a, const std::string& b);

// The `k` candidates closest to `target` (its first 64 bytes) by edit
// distance (ties keep the candidates' order). Used for unknown-key and
// unknown-preset hints.
std::vector<std::string> Closest(const std::string& target,
                                 const std::vector<std::string>& candidates,
                                 size_t k);

// `text` made safe to quote inside a one-line message: line breaks, tabs and
// other control bytes are escaped (as \n, \t, \x01) and text longer than
// `max_chars` is cut there with "..." appended (0 = no cut). Values from user
// files go through this before they are quoted in a Status.
std::string Printable(const std::string& text, size_t max_chars = 80);

// `text` as a YAML double-quoted scalar that reads back as `text`: quotes
// and backslashes escaped, control characters as \xNN. Written values that
// YAML would otherwise retype ("1.3b", "yes", "null") or that hold a newline
// (a model file's name may) stay one string on one line.
std::string DoubleQuoted(const std::string& text);

// Joins with `sep` ("a, b, c").
std::string Join(const std::vector<std::string>& parts,
                 const std::string& sep = ", ");

// "source:line" for a node (line 1-based); "source" alone when the node has no
// mark (e.g. an empty document).
std::string Where(const std::string& source, const YAML::Node& node);

// Parses YAML text. A yaml-cpp ParserException (including its nesting-depth
// guard) becomes InvalidArgument "source:line: malformed YAML: <yaml-cpp
// message>".
StatusOr<YAML::Node> Load(const std::string& text, const std::string& source);

// Reads a whole regular file (search_spaces/file_io.h). NotFound when it does
// not exist; InvalidArgument when it is a directory, a FIFO, a socket or a
// device (never opened for reading, so a FIFO cannot block); IoError when a
// regular file cannot be read. `what` names the kind of file in messages
// ("model file").
StatusOr<std::string> ReadFile(const std::string& path,
                               const std::string& what);

// True when `arg` should be read from disk instead of looked up as a preset:
// it ends in .yaml/.yml, or something exists at that path (a file, and also a
// directory, FIFO or device, so that those are refused as "not a regular
// file" instead of being looked up as a preset name).
bool LooksLikePath(const std::string& arg);

// Typed, located reads out of one YAML mapping. `what` names the mapping in
// messages ("model", "cluster", "gpu", "search space"). Each getter returns
// OK and leaves *out untouched when an optional key is absent.
class MapReader {
 public:
  MapReader(YAML::Node map, std::string source, std::string what);

  // InvalidArgument unless the node is a mapping.
  Status CheckIsMap() const;
  // Rejects keys not in `known` (hint: the closest known key) and duplicates.
  Status CheckKeys(const std::vector<std::string>& known) const;

  bool Has(const std::string& key) const;
  // "source:line" of the key's value, or of the mapping when absent.
  std::string WhereKey(const std::string& key) const;
  // "source:line" of the mapping itself.
  std::string WhereMap() const;
  // InvalidArgument "<where>: <what> is missing required key '<key>'".
  Status Missing(const std::string& key, const std::string& example) const;

  // Integers: `min_value` is 1 for sizes ("expected a positive integer") and
  // 0 for counts that may be zero ("expected a non-negative integer").
  Status Int(const std::string& key, bool required, int64_t min_value,
             int64_t* out) const;
  // The same, bounded above by `limit` (search_spaces/limits.h): a larger
  // value, or one too large for int64_t, is "<where>: <key>: <value> is above
  // the limit of <max>".
  Status Int(const std::string& key, bool required, int64_t min_value,
             const SizeLimit& limit, int64_t* out) const;
  // Non-negative real numbers ("expected a non-negative number").
  Status Double(const std::string& key, bool required, double* out) const;
  Status Bool(const std::string& key, bool required, bool* out) const;
  Status String(const std::string& key, bool required, std::string* out) const;
  // A string or a list of strings.
  Status StringList(const std::string& key,
                    std::vector<std::string>* out) const;
  // A scalar or a list of integers >= min_value (search-space axes).
  Status IntList(const std::string& key, int64_t min_value,
                 std::vector<int64_t>* out) const;
  // The same, each item bounded above by `limit`.
  Status IntList(const std::string& key, int64_t min_value,
                 const SizeLimit& limit, std::vector<int64_t>* out) const;
  // A scalar or a list of booleans.
  Status BoolList(const std::string& key, std::vector<bool>* out) const;
  // A scalar or a list of strings, each one of `allowed` (case-insensitive);
  // returns the canonical spellings from `allowed`.
  Status EnumList(const std::string& key,
                  const std::vector<std::string>& allowed,
                  std::vector<std::string>* out) const;
  // One of `allowed` (case-insensitive); *out gets the canonical spelling.
  Status Enum(const std::string& key, bool required,
              const std::vector<std::string>& allowed, std::string* out) const;

 private:
  Status TypeError(const YAML::Node& value, const std::string& key,
                   const std::string& expected, const std::string& hint) const;
  // `limit` may be null (no upper bound but int64_t's).
  StatusOr<int64_t> ParseInt(const YAML::Node& value, const std::string& key,
                             int64_t min_value, const SizeLimit* limit) const;
  Status IntImpl(const std::string& key, bool required, int64_t min_value,
                 const SizeLimit* limit, int64_t* out) const;
  Status IntListImpl(const std::string& key, int64_t min_value,
                     const SizeLimit* limit, std::vector<int64_t>* out) const;
  StatusOr<bool> ParseBool(const YAML::Node& value,
                           const std::string& key) const;

  YAML::Node map_;
  std::string source_;
  std::string what_;
};

}  // namespace meshtune::search_spaces::yaml_util

#endif  // MESHTUNE_SEARCH_SPACES_YAML_UTIL_H_
