// Reading and writing whole files safely: the one home for the rules every
// command follows with user-named paths (DEVELOPERS' quality bar, issue 16).
//
// - Only regular files are read. A FIFO, socket or device given as a model
//   YAML or a checkpoint shard would block open() or read() for ever, so the
//   type is checked first and the file is opened with O_NONBLOCK (a FIFO
//   swapped in between the check and the open still cannot hang us).
// - Files are written to a temporary name in the same directory, flushed to
//   disk and renamed over the target, so a full disk, a kill or a signal
//   leaves either the old file or the new one, never a truncated mix.
//
// Errors are one line naming the path and the problem, with a hint naming the
// fix. A path that is missing, a directory or not a regular file is an input
// error (exit 2); a failing read or write of a regular file is an I/O error.
#ifndef MESHTUNE_SEARCH_SPACES_FILE_IO_H_
#define MESHTUNE_SEARCH_SPACES_FILE_IO_H_

#include <string>

#include "search_spaces/status.h"

namespace meshtune::search_spaces {

// OK when `path` names an existing regular file (symlinks followed). `what`
// names the file in messages ("model file", "checkpoint shard"). Missing:
// NotFound; a directory, FIFO, socket or device: InvalidArgument.
Status CheckRegularFile(const std::string& path, const std::string& what);

// The whole content of the regular file `path` (after CheckRegularFile).
StatusOr<std::string> ReadRegularFile(const std::string& path,
                                      const std::string& what);

// Writes `contents` to `path` through `<path>.tmp-<pid>` in the same
// directory: write, fsync, rename. On any failure the temporary file is
// removed, the previous `path` (if any) is left untouched, and an IoError
// names the path and errno's text. A `path` naming a directory is an
// InvalidArgument. `what` names the file in messages ("HTML report").
Status WriteFileAtomically(const std::string& path, const std::string& contents,
                           const std::string& what);

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_FILE_IO_H_
