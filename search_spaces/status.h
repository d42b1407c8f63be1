// Status and StatusOr: how user-input and I/O errors travel (LevelDB style).
//
// A Status is either OK or carries a kind, a one-line message that names the
// problem (with a `file:line:` location when it came from a file) and an
// optional hint line that names the fix. Broken internal invariants are not
// Status values: they abort through MESHTUNE_CHECK.
#ifndef MESHTUNE_SEARCH_SPACES_STATUS_H_
#define MESHTUNE_SEARCH_SPACES_STATUS_H_

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace meshtune {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,  // bad user input: flags, YAML values, presets (exit 2)
    kNotFound,         // unknown preset, missing file (exit 2)
    kInfeasible,       // the request has no valid configuration (exit 2)
    kIoError,          // cannot read or write a file (exit 1)
    kUnimplemented,    // a capability that is not built yet (exit 1)
    kInternal,         // a bug (exit 1)
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg, std::string hint = "") {
    return Status(Code::kInvalidArgument, std::move(msg), std::move(hint));
  }
  static Status NotFound(std::string msg, std::string hint = "") {
    return Status(Code::kNotFound, std::move(msg), std::move(hint));
  }
  static Status Infeasible(std::string msg, std::string hint = "") {
    return Status(Code::kInfeasible, std::move(msg), std::move(hint));
  }
  static Status IoError(std::string msg, std::string hint = "") {
    return Status(Code::kIoError, std::move(msg), std::move(hint));
  }
  static Status Unimplemented(std::string msg, std::string hint = "") {
    return Status(Code::kUnimplemented, std::move(msg), std::move(hint));
  }
  static Status Internal(std::string msg) {
    return Status(Code::kInternal, std::move(msg), "");
  }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::string& hint() const { return hint_; }

  // Process exit code for this status: 0 ok, 2 usage/input, 1 runtime.
  int ExitCode() const {
    switch (code_) {
      case Code::kOk:
        return 0;
      case Code::kInvalidArgument:
      case Code::kNotFound:
      case Code::kInfeasible:
        return 2;
      default:
        return 1;
    }
  }

 private:
  Status(Code code, std::string msg, std::string hint)
      : code_(code), message_(std::move(msg)), hint_(std::move(hint)) {}
  Code code_ = Code::kOk;
  std::string message_;
  std::string hint_;
};

// A value or the Status explaining why there is none.
template <typename T>
class StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT: implicit
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& operator*() const { return *value_; }
  const T* operator->() const { return &*value_; }
  T* operator->() { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace meshtune

// Aborts with file:line when an internal invariant is broken.
#define MESHTUNE_CHECK(cond)                                                \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
                   #cond);                                                  \
      std::abort();                                                         \
    }                                                                       \
  } while (0)

#define MESHTUNE_RETURN_IF_ERROR(expr) \
  do {                                 \
    ::meshtune::Status _st = (expr);   \
    if (!_st.ok()) return _st;         \
  } while (0)

// Evaluates `expr` (a StatusOr<T>): returns its Status on error, else moves
// the value into `target` (an existing variable).
#define MESHTUNE_ASSIGN_OR_RETURN(target, expr) \
  do {                                          \
    auto _value = (expr);                       \
    if (!_value.ok()) return _value.status();   \
    (target) = std::move(_value).value();       \
  } while (0)

#endif  // MESHTUNE_SEARCH_SPACES_STATUS_H_
