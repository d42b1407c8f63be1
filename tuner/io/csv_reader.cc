#include "tuner/io/csv_reader.h"

#include <utility>

#include "search_spaces/file_io.h"
#include "search_spaces/yaml_util.h"

namespace meshtune::tuner {
namespace {

using search_spaces::yaml_util::Printable;

constexpr const char* kCsvHint =
    "the file must be RFC 4180 CSV: a header row, one record per line, "
    "fields with commas, quotes or line breaks in double quotes";

// A record as read, before the header check.
struct RawRecord {
  int64_t line = 0;
  std::vector<std::string> fields;
};

// Splits `text` into records. A state machine over characters, so quoted
// fields may span lines; `line` counts physical lines for messages.
StatusOr<std::vector<RawRecord>> SplitRecords(const std::string& text,
                                              const std::string& source) {
  std::vector<RawRecord> records;
  size_t i = 0;
  // A UTF-8 byte-order mark (spreadsheet exports) is not part of the header.
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) i = 3;
  int64_t line = 1;
  while (i < text.size()) {
    RawRecord record;
    record.line = line;
    std::string field;
    bool record_done = false;
    while (!record_done) {
      // One field, starting at text[i] (or at the end of the text).
      if (i < text.size() && text[i] == '"') {
        const int64_t quote_line = line;
        ++i;
        bool closed = false;
        while (i < text.size()) {
          const char ch = text[i];
          if (ch == '"') {
            if (i + 1 < text.size() && text[i + 1] == '"') {
              field += '"';
              i += 2;
              continue;
            }
            ++i;
            closed = true;
            break;
          }
          if (ch == '\n') ++line;
          field += ch;
          ++i;
        }
        if (!closed) {
          return Status::InvalidArgument(
              source + ":" + std::to_string(quote_line) +
                  ": quoted field is never closed (missing '\"')",
              kCsvHint);
        }
        if (i < text.size() && text[i] != ',' && text[i] != '\n' &&
            !(text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') &&
            !(text[i] == '\r' && i + 1 == text.size())) {
          return Status::InvalidArgument(
              source + ":" + std::to_string(line) + ": unexpected '" +
                  Printable(std::string(1, text[i])) +
                  "' after a closing quote in field " +
                  std::to_string(record.fields.size() + 1),
              "write a quote inside a quoted field as two quotes (\"\")");
        }
      } else {
        while (i < text.size() && text[i] != ',' && text[i] != '\n' &&
               !(text[i] == '\r' &&
                 (i + 1 == text.size() || text[i + 1] == '\n'))) {
          if (text[i] == '"') {
            return Status::InvalidArgument(
                source + ":" + std::to_string(line) +
                    ": quote inside unquoted field " +
                    std::to_string(record.fields.size() + 1),
                "quote the whole field and double the inner quotes (\"a \"\"b"
                "\"\" c\")");
          }
          field += text[i];
          ++i;
        }
      }
      record.fields.push_back(std::move(field));
      field.clear();
      if (i < text.size() && text[i] == ',') {
        ++i;
        continue;
      }
      // End of record: CRLF, LF, a lone CR at the end, or end of text.
      if (i < text.size() && text[i] == '\r') ++i;
      if (i < text.size() && text[i] == '\n') {
        ++i;
        ++line;
      }
      record_done = true;
    }
    // A blank line is one empty field: not a record.
    if (record.fields.size() == 1 && record.fields[0].empty()) continue;
    records.push_back(std::move(record));
  }
  return records;
}

}  // namespace

CsvTable::CsvTable(std::string source, std::vector<std::string> header,
                   std::vector<CsvRecord> records)
    : source_(std::move(source)),
      header_(std::move(header)),
      records_(std::move(records)) {
  for (size_t c = 0; c < header_.size(); ++c) {
    columns_.emplace(header_[c], static_cast<int>(c));
  }
}

int CsvTable::Column(const std::string& name) const {
  const auto it = columns_.find(name);
  return it == columns_.end() ? -1 : it->second;
}

const std::string& CsvTable::Cell(const CsvRecord& record,
                                  const std::string& name) const {
  static const std::string* const kEmpty = new std::string();
  const int c = Column(name);
  if (c < 0 || static_cast<size_t>(c) >= record.fields.size()) return *kEmpty;
  return record.fields[c];
}

std::string CsvTable::Where(const CsvRecord& record) const {
  return source_ + ":" + std::to_string(record.line);
}

StatusOr<CsvTable> ParseCsv(const std::string& text,
                            const std::string& source) {
  auto split = SplitRecords(text, source);
  if (!split.ok()) return split.status();
  std::vector<RawRecord>& raw = split.value();
  if (raw.empty()) {
    return Status::InvalidArgument(source + ":1: empty file (no header row)",
                                   kCsvHint);
  }
  std::vector<std::string> header = std::move(raw.front().fields);
  for (size_t c = 0; c < header.size(); ++c) {
    if (header[c].empty()) {
      return Status::InvalidArgument(
          source + ":" + std::to_string(raw.front().line) + ": header column " +
              std::to_string(c + 1) + " has no name",
          "give every column a name in the first row");
    }
    for (size_t d = 0; d < c; ++d) {
      if (header[d] == header[c]) {
        return Status::InvalidArgument(
            source + ":" + std::to_string(raw.front().line) +
                ": header names column '" + Printable(header[c]) + "' twice",
            "rename or remove one of the two columns");
      }
    }
  }
  std::vector<CsvRecord> records;
  records.reserve(raw.size() - 1);
  for (size_t r = 1; r < raw.size(); ++r) {
    if (raw[r].fields.size() != header.size()) {
      return Status::InvalidArgument(
          source + ":" + std::to_string(raw[r].line) + ": record has " +
              std::to_string(raw[r].fields.size()) + " fields, the header " +
              std::to_string(header.size()),
          "add or remove commas so every row has one field per column; "
          "quote fields that contain commas");
    }
    records.push_back(CsvRecord{raw[r].line, std::move(raw[r].fields)});
  }
  return CsvTable(source, std::move(header), std::move(records));
}

StatusOr<CsvTable> ReadCsvFile(const std::string& path) {
  // Only a regular file is opened: a FIFO would block the read for ever and
  // a directory would read as an empty file (search_spaces/file_io.h).
  auto text = search_spaces::ReadRegularFile(path, "CSV file");
  if (!text.ok()) {
    const Status& s = text.status();
    return s.code() == Status::Code::kNotFound
               ? Status::NotFound(s.message(), "check the path given to --csv")
               : s;
  }
  return ParseCsv(text.value(), path);
}

}  // namespace meshtune::tuner
