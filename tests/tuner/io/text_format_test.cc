#include "tuner/io/text_format.h"

#include <gtest/gtest.h>

#include <string>

namespace meshtune::tuner {
namespace {

TEST(TextFormat, FixedRoundsToTheDigitsAsked) {
  EXPECT_EQ(Fixed(2.25, 1), "2.2");  // binary 2.25 is exact: round-half-even
  EXPECT_EQ(Fixed(2.35, 1), "2.4");  // 2.35000000000000008882
  EXPECT_EQ(Fixed(-0.5, 0), "-0");
  EXPECT_EQ(Fixed(1234.5678, 3), "1234.568");
  EXPECT_EQ(Fixed(7, 0), "7");
}

// No fixed buffer: a long line comes back whole.
TEST(TextFormat, FmtKeepsLongStrings) {
  const std::string long_word(2000, 'x');
  EXPECT_EQ(Fmt("%s|%d", long_word.c_str(), 42), long_word + "|42");
  EXPECT_EQ(Fmt("%-6s|%5.1f", "tp", 3.14159), "tp    |  3.1");
  EXPECT_EQ(Fmt("%s", ""), "");
}

}  // namespace
}  // namespace meshtune::tuner
