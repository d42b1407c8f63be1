#include "tuner/io/terminal.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <utility>

namespace meshtune::tuner {
namespace {

// One command per process (tune_main.cc); written once before any output.
ColorMode g_color_mode = ColorMode::kAuto;
bool g_quiet = false;

bool IsDumbTerminal(const char* term) {
  return term != nullptr && std::string_view(term) == "dumb";
}

double SteadyNowS() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

StatusOr<ColorMode> ParseColorMode(const std::string& text) {
  if (text == "auto") return ColorMode::kAuto;
  if (text == "always") return ColorMode::kAlways;
  if (text == "never") return ColorMode::kNever;
  return Status::InvalidArgument("--color: unknown mode '" + text + "'",
                                 "use --color auto, always or never");
}

bool DecideColor(ColorMode mode, bool is_tty, const char* no_color,
                 const char* term) {
  switch (mode) {
    case ColorMode::kAlways:
      return true;
    case ColorMode::kNever:
      return false;
    case ColorMode::kAuto:
      break;
  }
  // no-color.org: set and non-empty disables; an explicit flag overrides.
  if (no_color != nullptr && *no_color != '\0') return false;
  return is_tty && !IsDumbTerminal(term);
}

void AddTerminalFlags(CLI::App* app, TerminalFlags* flags) {
  app->add_flag("-q,--quiet", flags->quiet,
                "print only the result: no headers, notes or progress");
  app->add_option("--color", flags->color,
                  "colour the output: auto (default: on a terminal, unless "
                  "NO_COLOR is set), always or never")
      ->type_name("WHEN");
}

Status ApplyTerminalFlags(const TerminalFlags& flags) {
  auto mode = ParseColorMode(flags.color);
  if (!mode.ok()) return mode.status();
  SetColorMode(mode.value());
  SetQuietMode(flags.quiet);
  return Status::Ok();
}

void SetColorMode(ColorMode mode) { g_color_mode = mode; }

void SetQuietMode(bool quiet) { g_quiet = quiet; }
bool QuietMode() { return g_quiet; }

std::string Style::Wrap(const char* code, std::string_view text) const {
  if (!enabled_ || text.empty()) return std::string(text);
  std::string s = "\033[";
  s += code;
  s += 'm';
  s += text;
  s += "\033[0m";
  return s;
}

std::string Style::Bold(std::string_view text) const { return Wrap("1", text); }
std::string Style::Green(std::string_view text) const {
  return Wrap("1;32", text);
}
std::string Style::Dim(std::string_view text) const { return Wrap("2", text); }
std::string Style::Red(std::string_view text) const {
  return Wrap("1;31", text);
}

Style StyleFor(const std::ostream& stream) {
  int fd = -1;
  if (&stream == &std::cout) {
    fd = STDOUT_FILENO;
  } else if (&stream == &std::cerr) {
    fd = STDERR_FILENO;
  } else {
    return Style(false);
  }
  return Style(DecideColor(g_color_mode, isatty(fd) == 1,
                           std::getenv("NO_COLOR"), std::getenv("TERM")));
}

bool ProgressAllowed(const std::ostream& err, bool quiet) {
  return !quiet && &err == &std::cerr && isatty(STDERR_FILENO) == 1 &&
         !IsDumbTerminal(std::getenv("TERM"));
}

ProgressBar::Options DefaultProgressOptions(const std::ostream& err,
                                            bool quiet) {
  ProgressBar::Options options;
  options.enabled = ProgressAllowed(err, quiet);
  options.now_s = SteadyNowS;
  return options;
}

ProgressBar::ProgressBar(std::ostream& err, std::string label, int64_t total,
                         Options options)
    : err_(err),
      label_(std::move(label)),
      total_(std::max<int64_t>(total, 1)),
      options_(std::move(options)) {
  if (!options_.now_s) options_.now_s = SteadyNowS;
  start_s_ = options_.now_s();
}

ProgressBar::~ProgressBar() { Finish(); }

std::string ProgressBar::Frame(int64_t done) const {
  const int64_t clamped = std::clamp<int64_t>(done, 0, total_);
  const int width = std::max(options_.width, 1);
  const int filled = static_cast<int>(clamped * width / total_);
  std::string bar = label_ + " [";
  bar.append(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(width - filled), '.');
  bar += "] " + std::to_string(clamped) + "/" + std::to_string(total_);
  return bar;
}

void ProgressBar::Update(int64_t done) {
  if (!options_.enabled || finished_) return;
  const double now = options_.now_s();
  if (now - start_s_ < options_.delay_s) return;
  // The last unit always draws, so a bar that appeared ends full.
  if (drawn_ && done < total_ && now - last_draw_s_ < options_.min_interval_s) {
    return;
  }
  // \033[K clears what a longer previous frame left to the right.
  err_ << '\r' << Frame(done) << "\033[K" << std::flush;
  drawn_ = true;
  last_draw_s_ = now;
}

void ProgressBar::Update(int64_t done, int64_t total) {
  total_ = std::max<int64_t>(total, 1);
  Update(done);
}

void ProgressBar::Finish() {
  if (finished_) return;
  finished_ = true;
  if (drawn_) err_ << "\r\033[K" << std::flush;
}

ProgressAndRows::ProgressAndRows(std::ostream& out, std::ostream& progress)
    : out_(out), progress_target_(progress) {}

ProgressAndRows::~ProgressAndRows() {
  out_stream_.flush();
  ClearProgress();
  out_.flush();
}

void ProgressAndRows::ClearProgress() {
  if (!line_open_ || !transient_) return;
  progress_target_ << "\r\033[K" << std::flush;
  line_open_ = false;
  transient_ = false;
}

int ProgressAndRows::ProgressBuf::overflow(int c) {
  if (c == traits_type::eof()) return traits_type::not_eof(c);
  ProgressAndRows& o = *owner_;
  if (c == '\r') {
    // A new frame: the rows written so far go to the screen first.
    o.out_.flush();
    o.transient_ = true;
    o.line_open_ = true;
  } else if (c == '\n') {
    if (o.transient_) return c;  // held back: the next row erases the line
    o.line_open_ = false;
  } else if (!o.line_open_) {
    o.line_open_ = true;  // an ordinary line (a note): kept, not erased
    o.transient_ = false;
  }
  o.progress_target_.put(static_cast<char>(c));
  return o.progress_target_ ? c : traits_type::eof();
}

int ProgressAndRows::ProgressBuf::sync() {
  owner_->progress_target_.flush();
  return 0;
}

int ProgressAndRows::RowBuf::overflow(int c) {
  if (c == traits_type::eof()) return traits_type::not_eof(c);
  owner_->ClearProgress();
  owner_->out_.put(static_cast<char>(c));
  return owner_->out_ ? c : traits_type::eof();
}

std::streamsize ProgressAndRows::RowBuf::xsputn(const char* s,
                                                std::streamsize n) {
  if (n <= 0) return 0;
  owner_->ClearProgress();
  owner_->out_.write(s, n);
  return owner_->out_ ? n : 0;
}

int ProgressAndRows::RowBuf::sync() {
  owner_->out_.flush();
  return 0;
}

}  // namespace meshtune::tuner
