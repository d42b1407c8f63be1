#include "search_spaces/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace meshtune::search_spaces {
namespace {

std::string Quoted(const std::string& path) { return "'" + path + "'"; }

std::string ErrnoText(int err) { return std::strerror(err); }

// Writes all of `data` to `fd`, retrying short writes and EINTR.
bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

Status CheckRegularFile(const std::string& path, const std::string& what) {
  if (path.empty()) {
    return Status::InvalidArgument(what + " path is empty",
                                   "give the path of a file");
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return Status::NotFound(what + " " + Quoted(path) + " not found",
                              "check the path");
    }
    return Status::IoError(
        "cannot read " + what + " " + Quoted(path) + ": " + ErrnoText(err),
        "check the path and its permissions");
  }
  if (S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(
        what + " " + Quoted(path) + " is a directory",
        "give the path of a regular file inside it");
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(
        what + " " + Quoted(path) +
            " is not a regular file (a FIFO, socket or device)",
        "give the path of a regular file; copy a stream to a file first");
  }
  return Status::Ok();
}

StatusOr<std::string> ReadRegularFile(const std::string& path,
                                      const std::string& what) {
  MESHTUNE_RETURN_IF_ERROR(CheckRegularFile(path, what));
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    return Status::IoError(
        "cannot read " + what + " " + Quoted(path) + ": " + ErrnoText(errno),
        "check the file's permissions");
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(
        what + " " + Quoted(path) +
            " is not a regular file (a FIFO, socket or device)",
        "give the path of a regular file; copy a stream to a file first");
  }
  std::string text;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return Status::IoError(
          "cannot read " + what + " " + Quoted(path) + ": " + ErrnoText(err),
          "check the file and the disk");
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

Status WriteFileAtomically(const std::string& path, const std::string& contents,
                           const std::string& what) {
  if (path.empty()) {
    return Status::InvalidArgument(what + " path is empty",
                                   "give the path of the file to write");
  }
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(
        "cannot write " + what + " " + Quoted(path) + ": it is a directory",
        "give a file name, e.g. " + path + "/out");
  }
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  const int fd =
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::IoError(
        "cannot write " + what + " " + Quoted(path) + ": " + ErrnoText(errno),
        "check that the directory exists and is writable");
  }
  const bool written =
      WriteAll(fd, contents.data(), contents.size()) && ::fsync(fd) == 0;
  const int write_err = errno;
  const bool closed = ::close(fd) == 0;
  const int close_err = errno;
  if (!written || !closed) {
    ::unlink(tmp.c_str());
    return Status::IoError("cannot write " + what + " " + Quoted(path) + ": " +
                               ErrnoText(written ? close_err : write_err),
                           "free disk space or choose another path; the "
                           "previous file, if any, is unchanged");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Status::IoError(
        "cannot write " + what + " " + Quoted(path) + ": " + ErrnoText(err),
        "check that the directory is writable");
  }
  return Status::Ok();
}

}  // namespace meshtune::search_spaces
