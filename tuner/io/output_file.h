// The files a command writes under a user-given name (search/launch --out,
// report --html, db export --csv, regress baseline export --file): checked
// before the command does its work, so that a mistyped directory fails at
// once and as an input error, and written atomically when done
// (search_spaces/file_io.h), so that a full disk, a kill or a signal leaves
// the previous file intact instead of a truncated one.
#ifndef MESHTUNE_TUNER_IO_OUTPUT_FILE_H_
#define MESHTUNE_TUNER_IO_OUTPUT_FILE_H_

#include <string>

#include "search_spaces/status.h"

namespace meshtune::tuner {

// InvalidArgument (exit 2), the message starting with `flag` ("--out"), when
// `path` is empty, names a directory, or its directory is missing or not a
// directory. OK otherwise; nothing is created.
Status CheckOutputPath(const std::string& path, const std::string& flag);

// CheckOutputPath, then writes `contents` through a temporary file renamed
// over `path`. On a failing write (a full disk: IoError, exit 1, naming
// `flag`, the path and errno's text) `path` keeps its previous content and
// no temporary file is left.
Status WriteOutputFile(const std::string& path, const std::string& contents,
                       const std::string& flag);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_IO_OUTPUT_FILE_H_
