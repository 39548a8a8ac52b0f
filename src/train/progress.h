#pragma once
// Progress display: a redrawn bar with ETA on a terminal, plain log lines otherwise (CI, pipes, files).
#include <chrono>
#include <cstdint>
#include <string>

namespace sg::train {

class Progress {
 public:
  // `interactive` = stderr is a terminal; pass false to force plain lines. `start`: steps already
  // done when the clock starts (a resumed run), so the ETA counts only this run's pace.
  Progress(std::string label, int64_t total, bool interactive, int64_t start = 0);
  ~Progress();
  // Redraws the bar (terminal) or does nothing (plain); `status` is a short suffix ("loss 2.31").
  void update(int64_t done, const std::string& status);
  // A line that stays: printed above the bar on a terminal, plainly otherwise; an info-level message
  // (not printed when log::level() is warn or above).
  void line(const std::string& text);
  void finish();
  static bool stderr_is_terminal();
  // "1h02m", "3m05s", "12s".
  static std::string format_duration(double seconds);
  // Seconds left after `done` of `total` steps, `elapsed` seconds after step `start`; -1 (unknown)
  // before this run finished a step.
  static double eta_seconds(double elapsed, int64_t done, int64_t start, int64_t total);

 private:
  void clear_bar();
  std::string label_;
  int64_t total_;
  int64_t start_step_;
  bool interactive_;
  bool bar_visible_ = false;
  std::chrono::steady_clock::time_point start_;
  std::string last_bar_;
};

}  // namespace sg::train
