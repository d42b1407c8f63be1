// Terminal output: whether to colour, the few ANSI styles the reports use,
// and a progress bar for stderr. One place decides, so that every command
// behaves the same way (the conventions of cargo and ninja):
//
//   colour    only on a terminal: --color auto (the default) colours a
//             stream that is a TTY unless NO_COLOR is set and non-empty
//             (no-color.org) or TERM is "dumb"; --color always / never
//             override both. Pipes, files and test captures stay plain, so
//             goldens never see an escape code.
//   progress  on stderr, only when stderr is a TTY and --quiet is absent;
//             drawn only once the work has run for a while (a fast search
//             prints nothing), redrawn at most ten times a second, erased
//             when done so that the report starts on a clean line.
//   --quiet   the commands print only their essential result (docs/
//             terminal.md lists it per command); errors and warnings still
//             print.
//
// The colour decision is process-wide (SetColorMode, called once by a
// command after parsing its flags): `tune` is one command per process, and
// the reports ask StyleFor(stream) rather than threading a flag through
// every Print function. Streams other than std::cout/std::cerr (string
// streams in tests) are always plain.
#ifndef MESHTUNE_TUNER_IO_TERMINAL_H_
#define MESHTUNE_TUNER_IO_TERMINAL_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <streambuf>
#include <string>
#include <string_view>

#include "search_spaces/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace meshtune::tuner {

enum class ColorMode { kAuto, kAlways, kNever };

// "auto", "always", "never"; anything else is a usage error naming --color.
StatusOr<ColorMode> ParseColorMode(const std::string& text);

// The decision itself, pure for tests. `no_color` and `term` are the values
// of $NO_COLOR and $TERM (null when unset).
bool DecideColor(ColorMode mode, bool is_tty, const char* no_color,
                 const char* term);

// The flags every reporting command shares: --quiet/-q and --color WHEN.
struct TerminalFlags {
  bool quiet = false;
  std::string color = "auto";
};
void AddTerminalFlags(CLI::App* app, TerminalFlags* flags);

// Parses flags->color and makes it the process's colour mode, and
// flags->quiet its quiet mode. Call first in Run(), so that a bad --color
// fails before any work.
Status ApplyTerminalFlags(const TerminalFlags& flags);

// The process-wide mode (default kAuto).
void SetColorMode(ColorMode mode);

// Whether the running command was given --quiet, process-wide like the
// colour mode: set by ApplyTerminalFlags (false for a command without
// terminal flags; RunTune resets it for every command), so that notes
// printed below the command (the first-use database note of
// tuner/store/results_db.h) obey --quiet without a flag threaded through.
void SetQuietMode(bool quiet);
bool QuietMode();

// ANSI styling for one stream; a disabled Style returns text unchanged.
class Style {
 public:
  explicit Style(bool enabled) : enabled_(enabled) {}
  bool enabled() const { return enabled_; }
  std::string Bold(std::string_view text) const;
  std::string Green(std::string_view text) const;  // bold green: the winner
  std::string Dim(std::string_view text) const;    // rejected, secondary
  std::string Red(std::string_view text) const;    // bold red: errors

 private:
  std::string Wrap(const char* code, std::string_view text) const;
  bool enabled_;
};

// The style for `stream`: coloured when it is std::cout or std::cerr and
// the process's mode says so for its file descriptor; plain otherwise.
Style StyleFor(const std::ostream& stream);

// Whether a progress bar may draw on `err`: it is std::cerr, stderr is a
// TTY, TERM is not "dumb" and `quiet` is false.
bool ProgressAllowed(const std::ostream& err, bool quiet);

// A one-line progress bar, "label [#####.....] 123/456", redrawn in place
// with a carriage return. Nothing is drawn before `delay_s` has passed since
// construction, nor more often than every `min_interval_s`; Finish() (and
// the destructor) erases the line if anything was drawn.
class ProgressBar {
 public:
  struct Options {
    bool enabled = false;  // usually ProgressAllowed(err, quiet)
    double delay_s = 0.5;
    double min_interval_s = 0.1;
    int width = 30;  // characters between the brackets
    // Seconds on a monotonic clock; tests pass a fake one.
    std::function<double()> now_s;
  };

  ProgressBar(std::ostream& err, std::string label, int64_t total,
              Options options);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // `done` of `total` units finished.
  void Update(int64_t done);
  // The same, for work whose size is known only once it starts.
  void Update(int64_t done, int64_t total);
  // Erases the bar (once); later updates draw nothing.
  void Finish();

  // The text of one frame, without the carriage return (for tests).
  std::string Frame(int64_t done) const;

 private:
  std::ostream& err_;
  std::string label_;
  int64_t total_;
  Options options_;
  double start_s_ = 0;
  double last_draw_s_ = 0;
  bool drawn_ = false;
  bool finished_ = false;
};

// A progress line drawn in place ("\r  [3/10] gemm ...") on one stream while
// report rows go to another, both on one terminal (tune profile: rows on
// stdout, progress on stderr). Written naively, each row lands right after
// the progress text on the same screen line. Through these two streams:
//   progress()  forwards to `progress`; a line that starts with '\r' is
//               transient: its final '\n' is held back, and `out` is flushed
//               before each frame so rows reach the screen first
//   out()       forwards to `out`; its first write after a transient line
//               erases that line ("\r\033[K" on `progress`)
// The destructor erases a transient line still showing and flushes both.
// With `progress` not a terminal (a null stream) only the rows remain.
class ProgressAndRows {
 public:
  ProgressAndRows(std::ostream& out, std::ostream& progress);
  ~ProgressAndRows();
  ProgressAndRows(const ProgressAndRows&) = delete;
  ProgressAndRows& operator=(const ProgressAndRows&) = delete;

  std::ostream& out() { return out_stream_; }
  std::ostream& progress() { return progress_stream_; }

 private:
  class ProgressBuf : public std::streambuf {
   public:
    explicit ProgressBuf(ProgressAndRows* owner) : owner_(owner) {}

   protected:
    int overflow(int c) override;
    int sync() override;

   private:
    ProgressAndRows* owner_;
  };
  class RowBuf : public std::streambuf {
   public:
    explicit RowBuf(ProgressAndRows* owner) : owner_(owner) {}

   protected:
    int overflow(int c) override;
    std::streamsize xsputn(const char* s, std::streamsize n) override;
    int sync() override;

   private:
    ProgressAndRows* owner_;
  };

  // Erases a transient line if one is showing.
  void ClearProgress();

  std::ostream& out_;
  std::ostream& progress_target_;
  bool line_open_ = false;  // characters of the current progress line shown
  bool transient_ = false;  // the current progress line began with '\r'
  ProgressBuf progress_buf_{this};
  RowBuf row_buf_{this};
  std::ostream out_stream_{&row_buf_};
  std::ostream progress_stream_{&progress_buf_};
};

// Options with the steady clock and enabled = ProgressAllowed(err, quiet).
ProgressBar::Options DefaultProgressOptions(const std::ostream& err,
                                            bool quiet);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_IO_TERMINAL_H_
