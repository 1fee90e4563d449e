// ProgressBar: draws a ProgressFn's reports (base/progress.h) for a person watching a model load.
// On a terminal one line is redrawn in place, at most every 100 ms:
//   loading weights [##########--------------]  1.21 / 2.87 GB  612 MB/s  ETA 3 s
// When the work is done (done == total) the line is replaced by the summary, which is all that a
// log (not a terminal) gets:
//   loaded 2.87 GB of weights in 4.7 s (612 MB/s)
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "base/progress.h"

namespace loom {

class ProgressBar {
 public:
  // Seconds on a monotonic clock.
  using Clock = std::function<double()>;

  // `what`: the thing loaded ("weights"). `out`: where to draw (not owned; stderr); `tty`: whether
  // it is a terminal (isatty). `clock`: the steady clock unless a test fakes it.
  ProgressBar(std::string what, FILE* out, bool tty, Clock clock = nullptr);

  // One report (ProgressFn's contract). Not thread-safe: one loading thread calls it.
  void Update(int64_t done, int64_t total);
  // A ProgressFn that calls Update; `this` must outlive it.
  ProgressFn AsProgressFn();
  // Bytes as a person reads them: "512 B", "12.3 MB", "2.87 GB" (powers of 1000).
  static std::string FormatBytes(double bytes);

 private:
  std::string what_;
  FILE* out_;
  bool tty_;
  Clock clock_;
  double start_s_;
  double last_draw_s_ = -1;
  bool drew_ = false;      // a bar line is on the terminal (to be replaced)
  bool finished_ = false;  // the summary is printed; later reports are ignored
};

}  // namespace loom
