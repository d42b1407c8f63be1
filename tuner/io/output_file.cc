#include "tuner/io/output_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "search_spaces/file_io.h"

namespace meshtune::tuner {
namespace {

std::string Quoted(const std::string& path) { return "'" + path + "'"; }

// The directory `path` is created in: "." for a bare file name.
std::string ParentDirectory(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

Status CheckOutputPath(const std::string& path, const std::string& flag) {
  if (path.empty()) {
    return Status::InvalidArgument(flag + ": the file name is empty",
                                   "give the path of the file to write");
  }
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(
        flag + ": " + Quoted(path) + " is a directory",
        "give a file name, e.g. " + path + "/out");
  }
  const std::string dir = ParentDirectory(path);
  if (::stat(dir.c_str(), &st) != 0) {
    return Status::InvalidArgument(
        flag + ": cannot write " + Quoted(path) + ": directory " + Quoted(dir) +
            ": " + std::strerror(errno),
        "create the directory first, or write somewhere else");
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(flag + ": cannot write " + Quoted(path) +
                                       ": " + Quoted(dir) +
                                       " is not a directory",
                                   "give a path inside a directory");
  }
  return Status::Ok();
}

Status WriteOutputFile(const std::string& path, const std::string& contents,
                       const std::string& flag) {
  MESHTUNE_RETURN_IF_ERROR(CheckOutputPath(path, flag));
  return search_spaces::WriteFileAtomically(path, contents, flag + " file");
}

}  // namespace meshtune::tuner
