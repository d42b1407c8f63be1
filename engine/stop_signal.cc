#include "engine/stop_signal.h"

#include <signal.h>

#include <atomic>
#include <string>

namespace meshtune::engine {
namespace {

// Lock-free atomics are async-signal-safe; the handler writes, the
// trainer reads.
std::atomic<int> g_stop_signal{0};
std::atomic<bool> g_repeat_kills{false};
std::atomic<bool> g_stopped{false};
static_assert(std::atomic<int>::is_always_lock_free);
static_assert(std::atomic<bool>::is_always_lock_free);

void OnStopSignal(int signal) {
  int expected = 0;
  if (g_stop_signal.compare_exchange_strong(expected, signal)) return;
  if (!g_repeat_kills.load()) return;
  // Second signal: die of it, as if no handler were installed.
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(signal, &dfl, nullptr);
  raise(signal);
}

}  // namespace

void InstallStopSignalHandlers(bool repeat_kills) {
  g_repeat_kills.store(repeat_kills);
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  // SA_RESTART: reads and writes of the data and checkpoint files resume
  // instead of failing with EINTR.
  action.sa_flags = SA_RESTART;
  for (int signal : {SIGTERM, SIGINT, SIGHUP}) {
    // An ignored signal (nohup's SIGHUP) stays ignored.
    struct sigaction current = {};
    sigaction(signal, nullptr, &current);
    if (current.sa_handler != SIG_IGN) sigaction(signal, &action, nullptr);
  }
}

int StopSignal() { return g_stop_signal.load(); }

void RequestStop(int signal) {
  int expected = 0;
  g_stop_signal.compare_exchange_strong(expected, signal);
}

void ClearStopRequest() {
  g_stop_signal.store(0);
  g_stopped.store(false);
}

void MarkStoppedAtStepBoundary() { g_stopped.store(true); }

Status StopAtStepBoundary(int64_t iteration, int64_t train_iters,
                          const std::string& save_dir) {
  const int signal = StopSignal();
  MarkStoppedAtStepBoundary();
  const std::string by =
      signal != 0 ? SignalName(signal) : "a signal to another rank";
  std::string text = "stopped by " + by + " after iteration " +
                     std::to_string(iteration) + " of " +
                     std::to_string(train_iters);
  text += save_dir.empty()
              ? "; no checkpoint saved (the run has no --save)"
              : "; checkpoint of iteration " + std::to_string(iteration) +
                    " saved in " + save_dir;
  return Status::IoError(text);
}
bool StoppedAtStepBoundary() { return g_stopped.load(); }

std::string SignalName(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "signal " + std::to_string(signal);
  }
}

}  // namespace meshtune::engine
