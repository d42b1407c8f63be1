// `tune`: thin main over the tuner library (tuner/commands/cli.h), plus the one
// check only main can make: that standard output really received the report.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "tuner/commands/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  int code = meshtune::tuner::RunTune(args, std::cout, std::cerr);
  // std::cout writes through stdio's buffer, so a full disk or a closed pipe
  // shows up here at the latest. Without this check `tune models >
  // /dev/full` would exit 0 with nothing written; a script must see the
  // failure. An earlier error keeps its own exit code.
  // cout's flush is stdio's: on failure glibc drops the buffer, so errno
  // is read right after it (the second fflush then succeeds).
  errno = 0;
  std::cout.flush();
  int err = errno;
  const bool flushed = std::fflush(stdout) == 0;
  if (err == 0) err = errno;
  const bool failed = !flushed || std::ferror(stdout) || std::cout.fail();
  if (failed && err == 0) {
    // Output larger than stdio's buffer failed during RunTune, and that
    // errno is gone: write one byte again to learn the reason.
    std::clearerr(stdout);
    errno = 0;
    std::fputc('\n', stdout);
    std::fflush(stdout);
    err = errno;
  }
  if (failed) {
    std::fprintf(stderr, "tune: error: cannot write to standard output: %s\n",
                 std::strerror(err != 0 ? err : EIO));
    if (code == 0) code = 1;
  }
  return code;
}
