// CsvTable: an RFC 4180 comma-separated file with a header row.
//
// Fields may be quoted; quoted fields may hold commas, line breaks and
// doubled quotes (`""` is one `"`). Records end with LF or CRLF; a UTF-8
// byte-order mark and blank lines are ignored. Every record must have as many
// fields as the header (ragged rows are an error, not silently padded).
// Errors are InvalidArgument (NotFound for a missing file) with a
// `file:line: message` naming the record's first line and a hint; text from
// the file is quoted escaped (yaml_util::Printable), so every message is one
// line.
#ifndef MESHTUNE_TUNER_IO_CSV_READER_H_
#define MESHTUNE_TUNER_IO_CSV_READER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "search_spaces/status.h"

namespace meshtune::tuner {

struct CsvRecord {
  int64_t line = 0;  // 1-based line of the file where the record starts
  std::vector<std::string> fields;  // one per header column
};

class CsvTable {
 public:
  CsvTable() = default;
  CsvTable(std::string source, std::vector<std::string> header,
           std::vector<CsvRecord> records);

  const std::string& source() const { return source_; }
  const std::vector<std::string>& header() const { return header_; }
  const std::vector<CsvRecord>& records() const { return records_; }
  // Column index of `name`, or -1 when the header has no such column.
  int Column(const std::string& name) const;
  // The cell of `record` in column `name`; "" when the column is absent.
  const std::string& Cell(const CsvRecord& record,
                          const std::string& name) const;
  // "file:line" of a record, for error messages.
  std::string Where(const CsvRecord& record) const;

 private:
  std::string source_;
  std::vector<std::string> header_;
  std::vector<CsvRecord> records_;
  std::map<std::string, int> columns_;
};

// Parses CSV `text`; `source` names the file in messages.
StatusOr<CsvTable> ParseCsv(const std::string& text, const std::string& source);
// Reads and parses the regular file at `path`. Missing: NotFound "CSV file
// '<path>' not found"; a directory, FIFO, socket or device: InvalidArgument
// (never opened, so a FIFO cannot block); a failing read: IoError.
StatusOr<CsvTable> ReadCsvFile(const std::string& path);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_IO_CSV_READER_H_
