// The RFC 4180 reader behind `tune accuracy`: quoting, doubled quotes,
// embedded commas and line breaks, CRLF, and file:line errors.
#include "tuner/io/csv_reader.h"

#include <gtest/gtest.h>

#include <string>

namespace meshtune::tuner {
namespace {

TEST(CsvReader, QuotedFieldsHoldCommasDoubledQuotesAndLineBreaks) {
  const std::string text =
      "a,b,c\n"
      "1,\"x, y\",\"say \"\"hi\"\"\"\n"
      "2,\"line one\nline two\",\n"
      "3,plain,last\n";
  auto t = ParseCsv(text, "t.csv");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->records().size(), 3u);
  const CsvRecord& r0 = t->records()[0];
  EXPECT_EQ(t->Cell(r0, "b"), "x, y");
  EXPECT_EQ(t->Cell(r0, "c"), "say \"hi\"");
  const CsvRecord& r1 = t->records()[1];
  EXPECT_EQ(t->Cell(r1, "b"), "line one\nline two");
  EXPECT_EQ(t->Cell(r1, "c"), "");  // trailing empty field
  // The record after a two-line record starts on line 5.
  EXPECT_EQ(t->records()[0].line, 2);
  EXPECT_EQ(r1.line, 3);
  EXPECT_EQ(t->records()[2].line, 5);
  EXPECT_EQ(t->Where(t->records()[2]), "t.csv:5");
  EXPECT_EQ(t->Cell(r0, "no_such_column"), "");
  EXPECT_EQ(t->Column("c"), 2);
  EXPECT_EQ(t->Column("d"), -1);
}

TEST(CsvReader, CrlfBomAndBlankLines) {
  const std::string text =
      "\xEF\xBB\xBFname,value\r\n"
      "\r\n"
      "alpha,\"1\r\n2\"\r\n"
      "beta,3\r\n"
      "\n";
  auto t = ParseCsv(text, "w.csv");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->header()[0], "name");  // no BOM in the first column name
  ASSERT_EQ(t->records().size(), 2u);
  EXPECT_EQ(t->Cell(t->records()[0], "value"), "1\r\n2");
  EXPECT_EQ(t->Cell(t->records()[1], "name"), "beta");
  EXPECT_EQ(t->Cell(t->records()[1], "value"), "3");  // no stray '\r'
  EXPECT_EQ(t->records()[0].line, 3);
  EXPECT_EQ(t->records()[1].line, 5);
}

TEST(CsvReader, NoFinalNewline) {
  auto t = ParseCsv("a,b\n1,2", "n.csv");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->records().size(), 1u);
  EXPECT_EQ(t->Cell(t->records()[0], "b"), "2");
}

TEST(CsvReader, RaggedRowIsAnErrorAtItsLine) {
  auto t = ParseCsv("a,b,c\n1,2,3\n\"x\ny\",2\n", "r.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "r.csv:3: record has 2 fields, the header 3");
  EXPECT_NE(t.status().hint().find("quote fields that contain commas"),
            std::string::npos);
  auto long_row = ParseCsv("a,b\n1,2,3\n", "r.csv");
  ASSERT_FALSE(long_row.ok());
  EXPECT_EQ(long_row.status().message(),
            "r.csv:2: record has 3 fields, the header 2");
}

TEST(CsvReader, MalformedQuotingIsAnErrorAtItsLine) {
  auto unclosed = ParseCsv("a,b\n1,2\n3,\"open\nstill open\n", "q.csv");
  ASSERT_FALSE(unclosed.ok());
  EXPECT_EQ(unclosed.status().message(),
            "q.csv:3: quoted field is never closed (missing '\"')");

  auto after = ParseCsv("a,b\n\"x\"y,2\n", "q.csv");
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().message(),
            "q.csv:2: unexpected 'y' after a closing quote in field 1");

  auto stray = ParseCsv("a,b\n1,ab\"c\n", "q.csv");
  ASSERT_FALSE(stray.ok());
  EXPECT_EQ(stray.status().message(), "q.csv:2: quote inside unquoted field 2");
}

TEST(CsvReader, HeaderErrors) {
  auto empty = ParseCsv("", "e.csv");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), "e.csv:1: empty file (no header row)");

  auto twice = ParseCsv("a,b,a\n1,2,3\n", "h.csv");
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().message(), "h.csv:1: header names column 'a' twice");

  auto unnamed = ParseCsv("a,,c\n", "h.csv");
  ASSERT_FALSE(unnamed.ok());
  EXPECT_EQ(unnamed.status().message(), "h.csv:1: header column 2 has no name");
}

TEST(CsvReader, MissingFileIsNotFound) {
  auto t = ReadCsvFile("/nonexistent/dir/runs.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(t.status().message(),
            "CSV file '/nonexistent/dir/runs.csv' not found");
  EXPECT_EQ(t.status().hint(), "check the path given to --csv");
}

}  // namespace
}  // namespace meshtune::tuner
