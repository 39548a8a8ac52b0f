#include "train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "core/log.h"
#include "core/strings.h"

namespace sg::train {

Progress::Progress(std::string label, int64_t total, bool interactive, int64_t start)
    : label_(std::move(label)), total_(std::max<int64_t>(total, 1)), start_step_(std::max<int64_t>(start, 0)),
      interactive_(interactive), start_(std::chrono::steady_clock::now()) {}

double Progress::eta_seconds(double elapsed, int64_t done, int64_t start, int64_t total) {
  const int64_t this_run = done - start;
  if (this_run <= 0) return -1.0;
  return elapsed / static_cast<double>(this_run) * static_cast<double>(std::max<int64_t>(total - done, 0));
}

Progress::~Progress() { finish(); }

bool Progress::stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

std::string Progress::format_duration(double seconds) {
  if (!(seconds >= 0)) return "?";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return strprintf("%lldh%02lldm", static_cast<long long>(s / 3600), static_cast<long long>(s % 3600 / 60));
  if (s >= 60) return strprintf("%lldm%02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  return strprintf("%llds", static_cast<long long>(s));
}

void Progress::clear_bar() {
  if (bar_visible_) {
    std::fprintf(stderr, "\r\033[2K");
    bar_visible_ = false;
  }
}

void Progress::update(int64_t done, const std::string& status) {
  if (!interactive_) return;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double fraction = std::clamp(static_cast<double>(done) / static_cast<double>(total_), 0.0, 1.0);
  const double eta = eta_seconds(elapsed, done, start_step_, total_);
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(fraction * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  last_bar_ = strprintf("%s [%s] %lld/%lld  %s  ETA %s", label_.c_str(), bar.c_str(),
                        static_cast<long long>(done), static_cast<long long>(total_), status.c_str(),
                        format_duration(eta).c_str());
  std::fprintf(stderr, "\r\033[2K%s", last_bar_.c_str());
  std::fflush(stderr);
  bar_visible_ = true;
}

void Progress::line(const std::string& text) {
  if (log::level() > log::Level::info) return;  // info-level: quiet runs (data-parallel ranks other than 0)
  clear_bar();
  std::fprintf(stderr, "%s\n", text.c_str());
  if (interactive_ && !last_bar_.empty()) {
    std::fprintf(stderr, "%s", last_bar_.c_str());
    bar_visible_ = true;
  }
  std::fflush(stderr);
}

void Progress::finish() {
  clear_bar();
  std::fflush(stderr);
}

}  // namespace sg::train
