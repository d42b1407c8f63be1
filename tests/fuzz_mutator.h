// Seeded-mutation fuzzing for the input parsers (issue 16): a deterministic
// stream of hostile variants of valid seed texts, and the check every parser
// must pass on each of them.
//
// Not coverage-guided: CI runs a fixed seed and a fixed number of inputs per
// parser in a few seconds, so a failure reproduces exactly (the message names
// the input's index; FuzzMutator(seed) regenerates it). The mutations are the
// ones that broke parsers before: byte flips, deletions, duplicated lines,
// huge and negative numbers, NaN/inf spellings, deep nesting, very long
// strings, binary bytes, truncation and swapped keys.
#ifndef MESHTUNE_TESTS_FUZZ_MUTATOR_H_
#define MESHTUNE_TESTS_FUZZ_MUTATOR_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "search_spaces/status.h"

namespace meshtune::testing {

class FuzzMutator {
 public:
  explicit FuzzMutator(uint64_t seed) : state_(seed) {}

  // A variant of `seed_text`: 1 to 4 mutations applied in turn.
  std::string Mutate(std::string text) {
    const int rounds = 1 + static_cast<int>(Below(4));
    for (int i = 0; i < rounds; ++i) text = MutateOnce(std::move(text));
    return text;
  }

  // Uniform in [0, n) (n > 0). SplitMix64, so the stream is the same on
  // every platform and standard library.
  uint64_t Below(uint64_t n) { return Next() % n; }

 private:
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  template <typename T>
  const T& Pick(const std::vector<T>& items) {
    return items[Below(items.size())];
  }

  size_t Position(const std::string& text) { return Below(text.size() + 1); }

  // [begin, end) of every run of digits.
  static std::vector<std::pair<size_t, size_t>> Numbers(
      const std::string& text) {
    std::vector<std::pair<size_t, size_t>> out;
    for (size_t i = 0; i < text.size();) {
      if (text[i] >= '0' && text[i] <= '9') {
        size_t j = i;
        while (j < text.size() && text[j] >= '0' && text[j] <= '9') ++j;
        out.emplace_back(i, j);
        i = j;
      } else {
        ++i;
      }
    }
    return out;
  }

  // Replaces a random number of `text` (or inserts at a random place when
  // there is none) with `value`.
  std::string ReplaceNumber(std::string text, const std::string& value) {
    const auto numbers = Numbers(text);
    if (numbers.empty()) return text.insert(Position(text), value);
    const auto [b, e] = Pick(numbers);
    return text.replace(b, e - b, value);
  }

  static std::vector<std::string> Lines(const std::string& text) {
    std::vector<std::string> lines;
    size_t start = 0;
    while (start <= text.size()) {
      const size_t nl = text.find('\n', start);
      if (nl == std::string::npos) {
        lines.push_back(text.substr(start));
        break;
      }
      lines.push_back(text.substr(start, nl - start));
      start = nl + 1;
    }
    return lines;
  }

  static std::string JoinLines(const std::vector<std::string>& lines) {
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) out += '\n';
      out += lines[i];
    }
    return out;
  }

  std::string MutateOnce(std::string text) {
    switch (Below(12)) {
      case 0: {  // flip one bit of one byte
        if (text.empty()) return "\x01";
        const size_t i = Below(text.size());
        text[i] = static_cast<char>(text[i] ^ (1 << Below(8)));
        return text;
      }
      case 1: {  // delete a span
        if (text.empty()) return text;
        const size_t b = Below(text.size());
        return text.erase(b, 1 + Below(std::min<size_t>(64, text.size() - b)));
      }
      case 2: {  // duplicate a line
        std::vector<std::string> lines = Lines(text);
        const size_t i = Below(lines.size());
        lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(i), lines[i]);
        return JoinLines(lines);
      }
      case 3:  // a huge number
        return ReplaceNumber(
            std::move(text),
            Pick<std::string>({"9223372036854775807", "9223372036854775808",
                               "18446744073709551616", "4611686018427387904",
                               "2000000000", "4294967296", "2147483648",
                               "99999999999999999999999999999", "1e308",
                               "1e400", "0x7fffffffffffffff"}));
      case 4:  // a negative number or zero
        return ReplaceNumber(
            std::move(text),
            Pick<std::string>({"-1", "0", "-0", "-9223372036854775808",
                               "-9223372036854775809", "-2000000000",
                               "-1e308"}));
      case 5:  // NaN and infinity spellings
        return ReplaceNumber(
            std::move(text),
            Pick<std::string>({"nan", "NaN", ".nan", "inf", "-inf", ".inf",
                               "-.inf", "Infinity", "1e999", "-nan"}));
      case 6: {  // deep nesting
        const size_t depth = 1 + Below(5000);
        std::string open;
        switch (Below(3)) {
          case 0:
            for (size_t i = 0; i < depth; ++i) open += '[';
            break;
          case 1:
            for (size_t i = 0; i < depth; ++i) open += "{a: ";
            break;
          default:
            for (size_t i = 0; i < depth; ++i) {
              open += std::string(i % 64, ' ') + "- \n";
            }
        }
        return text.insert(Position(text), open);
      }
      case 7: {  // a very long string
        const size_t length = 1000 + Below(50000);
        const char fill = "A9-:'\" #,\\"[Below(10)];
        return text.insert(Position(text), std::string(length, fill));
      }
      case 8: {  // binary bytes
        std::string bytes;
        const size_t n = 1 + Below(32);
        for (size_t i = 0; i < n; ++i) bytes += static_cast<char>(Below(256));
        return text.insert(Position(text), bytes);
      }
      case 9:  // truncation
        return text.substr(0, Position(text));
      case 10: {  // swap the keys (before ':' or the first word) of two lines
        std::vector<std::string> lines = Lines(text);
        if (lines.size() < 2) return text;
        std::string& a = lines[Below(lines.size())];
        std::string& b = lines[Below(lines.size())];
        const size_t ka = std::min(a.find_first_of(": "), a.size());
        const size_t kb = std::min(b.find_first_of(": "), b.size());
        const std::string key_a = a.substr(0, ka);
        const std::string key_b = b.substr(0, kb);
        if (&a == &b) return text;
        a = key_b + a.substr(ka);
        b = key_a + b.substr(kb);
        return JoinLines(lines);
      }
      default: {  // swap two whole lines
        std::vector<std::string> lines = Lines(text);
        std::swap(lines[Below(lines.size())], lines[Below(lines.size())]);
        return JoinLines(lines);
      }
    }
  }

  uint64_t state_;
};

// Runs `parse` on `count` mutants of `seeds` (fixed `seed`) and checks the
// contract on each: no exception escapes, and a rejection is a non-OK Status
// whose message (and hint) is one non-empty line. A crash or a hang fails
// the test binary itself. Prints and records the number of inputs. `parse`
// returns the Status of one input.
inline void FuzzParser(const std::string& name,
                       const std::vector<std::string>& seeds, int count,
                       uint64_t seed,
                       const std::function<Status(const std::string&)>& parse) {
  ASSERT_FALSE(seeds.empty());
  FuzzMutator mutator(seed);
  int accepted = 0;
  int failures = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < count && failures < 5; ++i) {
    const std::string& base = seeds[mutator.Below(seeds.size())];
    const std::string input = mutator.Mutate(base);
    Status status;
    try {
      status = parse(input);
    } catch (const std::exception& e) {
      ADD_FAILURE() << name << " input " << i << " (seed " << seed
                    << "): exception escaped: " << e.what();
      ++failures;
      continue;
    } catch (...) {
      ADD_FAILURE() << name << " input " << i << " (seed " << seed
                    << "): unknown exception escaped";
      ++failures;
      continue;
    }
    if (status.ok()) {
      ++accepted;
      continue;
    }
    const bool one_line = !status.message().empty() &&
                          status.message().find('\n') == std::string::npos &&
                          status.hint().find('\n') == std::string::npos;
    if (!one_line) {
      ADD_FAILURE() << name << " input " << i << " (seed " << seed
                    << "): rejection is not one non-empty line: ["
                    << status.message() << "] hint [" << status.hint() << "]";
      ++failures;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::cout << "[ fuzz     ] " << name << ": " << count << " inputs (seed "
            << seed << "), " << accepted << " accepted, " << count - accepted
            << " rejected, " << seconds << " s\n";
  ::testing::Test::RecordProperty(name + "_inputs", count);
}

}  // namespace meshtune::testing

#endif  // MESHTUNE_TESTS_FUZZ_MUTATOR_H_
