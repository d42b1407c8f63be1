// Number formatting for the tuner's text output, in one place: printf-style
// strings, fixed-point numbers and UTC times (the C locale's "%.*f", as every
// report, table and generated script prints them).
#ifndef MESHTUNE_TUNER_IO_TEXT_FORMAT_H_
#define MESHTUNE_TUNER_IO_TEXT_FORMAT_H_

#include <cstdint>
#include <string>

namespace meshtune::tuner {

// printf into a std::string of any length.
std::string Fmt(const char* format, ...) __attribute__((format(printf, 1, 2)));

// `v` with `digits` digits after the point (Fixed(2.345, 1) == "2.3").
std::string Fixed(double v, int digits);

// "2026-11-30 11:48" (UTC) for a Unix time in seconds; "-" when the time
// cannot be broken down.
std::string UtcMinuteText(int64_t unix_s);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_IO_TEXT_FORMAT_H_
