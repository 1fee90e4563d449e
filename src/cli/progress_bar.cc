#include "cli/progress_bar.h"

#include <algorithm>
#include <chrono>

namespace loom {
namespace {

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

constexpr int kBarWidth = 24;
constexpr double kRedrawInterval_s = 0.1;

}  // namespace

ProgressBar::ProgressBar(std::string what, FILE* out, bool tty, Clock clock)
    : what_(std::move(what)),
      out_(out),
      tty_(tty),
      clock_(clock ? std::move(clock) : Clock(SteadySeconds)),
      start_s_(clock_()) {}

std::string ProgressBar::FormatBytes(double bytes) {
  char buf[32];
  if (bytes < 1e3) {
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  } else if (bytes < 1e6) {
    std::snprintf(buf, sizeof buf, "%.1f kB", bytes / 1e3);
  } else if (bytes < 1e9) {
    std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  }
  return buf;
}

void ProgressBar::Update(int64_t done, int64_t total) {
  if (finished_) return;
  const double now = clock_();
  const double elapsed = std::max(now - start_s_, 1e-6);
  const double rate = static_cast<double>(done) / elapsed;  // bytes per second
  if (done >= total) {
    finished_ = true;
    std::fprintf(out_, "%sloaded %s of %s in %.1f s (%s/s)\n", drew_ ? "\r\033[K" : "",
                 FormatBytes(static_cast<double>(done)).c_str(), what_.c_str(), now - start_s_,
                 FormatBytes(rate).c_str());
    std::fflush(out_);
    return;
  }
  if (!tty_ || (last_draw_s_ >= 0 && now - last_draw_s_ < kRedrawInterval_s)) return;
  last_draw_s_ = now;
  const double fraction = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 0;
  const int filled = static_cast<int>(fraction * kBarWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kBarWidth - filled), '-');
  std::string eta = "ETA ?";
  if (done > 0) {
    const double left_s = static_cast<double>(total - done) / rate;
    char buf[32];
    std::snprintf(buf, sizeof buf, "ETA %.0f s", left_s);
    eta = buf;
  }
  std::fprintf(out_, "\r\033[Kloading %s [%s] %s / %s  %s/s  %s", what_.c_str(), bar.c_str(),
               FormatBytes(static_cast<double>(done)).c_str(),
               FormatBytes(static_cast<double>(total)).c_str(), FormatBytes(rate).c_str(),
               eta.c_str());
  std::fflush(out_);
  drew_ = true;
}

ProgressFn ProgressBar::AsProgressFn() {
  return [this](int64_t done, int64_t total) { Update(done, total); };
}

}  // namespace loom
