#include "tuner/io/text_format.h"

#include <cstdarg>
#include <cstdio>
#include <ctime>

namespace meshtune::tuner {

std::string Fmt(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string out;
  if (n > 0) {
    out.resize(static_cast<size_t>(n) + 1);
    std::vsnprintf(out.data(), out.size(), format, again);
    out.resize(static_cast<size_t>(n));
  }
  va_end(again);
  return out;
}

std::string Fixed(double v, int digits) { return Fmt("%.*f", digits, v); }

std::string UtcMinuteText(int64_t unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  if (gmtime_r(&t, &tm) == nullptr) return "-";
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M", &tm);
  return buf;
}

}  // namespace meshtune::tuner
