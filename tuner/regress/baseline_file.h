// Baseline files of `tune regress`: one baseline and the fingerprint of the
// machine it was measured on, as JSON, so a baseline can be committed to a
// repository and checked against elsewhere (docs/regress.md).
//
//   {"format": "meshtune-regress-baseline", "version": 1,
//    "name": "ci", "benchmark": "cpu-gpt-tiny-v1", "spec": "model=...",
//    "hardware": {"id", "backend", "cpu_model", "cpu_cores", "memory_gib",
//                 "gpu_model", "gpu_count", "driver_version",
//                 "library_versions"},
//    "result": {"tool_version", "git_revision", "created_unix_s", "threads",
//               "warmup_steps", "steps_per_repeat", "tokens_per_step",
//               "tokens_per_s": [...], "cpu_tokens_per_s": [...],
//               "tokens_per_s_median", "tokens_per_s_spread",
//               "cpu_tokens_per_s_median", "cpu_tokens_per_s_spread",
//               "losses": [...]},
//    "set": {"tool_version", "git_revision", "created_unix_s"}}
//
// Numbers are written with 17 significant digits, so losses round-trip
// exactly. Reading validates everything: the format tag and version, every
// key's presence and type (unknown keys are errors), a known benchmark whose
// definition (spec) matches this build's, a hardware id that matches its
// fields, and medians and spreads that match the repeats.
#ifndef MESHTUNE_TUNER_REGRESS_BASELINE_FILE_H_
#define MESHTUNE_TUNER_REGRESS_BASELINE_FILE_H_

#include <string>

#include "results/store.h"
#include "search_spaces/status.h"

namespace meshtune::tuner {

inline constexpr const char* kBaselineFileFormat = "meshtune-regress-baseline";
inline constexpr int kBaselineFileVersion = 1;

struct BaselineFile {
  results::RegressBaseline baseline;  // source_result_id is 0 (imported)
  results::HardwareFingerprint hardware;
};

// The file's text (pretty-printed JSON, newline-terminated).
std::string BaselineFileText(const BaselineFile& file);

// Writes BaselineFileText to `path` atomically (tuner/io/output_file.h): errors
// name --file; on a failed write the previous file is left as it was.
Status WriteBaselineFile(const std::string& path, const BaselineFile& file);

// Reads and validates `path`; every problem is InvalidArgument (NotFound
// for a missing file) starting with "<path>: " and naming the key.
StatusOr<BaselineFile> ReadBaselineFile(const std::string& path);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_REGRESS_BASELINE_FILE_H_
