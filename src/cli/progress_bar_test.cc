#include "cli/progress_bar.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace loom {
namespace {

// Everything a ProgressBar writes, through open_memstream.
class Captured {
 public:
  Captured() : file_(open_memstream(&buf_, &size_)) {}
  ~Captured() {
    if (file_ != nullptr) std::fclose(file_);
    std::free(buf_);
  }
  FILE* file() { return file_; }
  std::string text() {
    std::fflush(file_);
    return std::string(buf_, size_);
  }

 private:
  char* buf_ = nullptr;
  size_t size_ = 0;
  FILE* file_;
};

TEST(ProgressBarTest, ATerminalGetsARedrawnBarThenTheSummary) {
  Captured out;
  double now = 100;
  ProgressBar bar("weights", out.file(), /*tty=*/true, [&] { return now; });
  now = 101;
  bar.Update(500'000'000, 2'000'000'000);  // 500 MB in 1 s: 1.5 GB left at 500 MB/s
  EXPECT_EQ(out.text(),
            "\r\033[Kloading weights [######------------------] 500.0 MB / 2.00 GB  500.0 MB/s  "
            "ETA 3 s");
  const size_t drawn = out.text().size();
  now = 101.05;  // within 100 ms of the last draw: not redrawn
  bar.Update(510'000'000, 2'000'000'000);
  EXPECT_EQ(out.text().size(), drawn);
  now = 102;
  bar.Update(1'000'000'000, 2'000'000'000);
  EXPECT_NE(out.text().find("[############------------] 1.00 GB / 2.00 GB"), std::string::npos);
  now = 104;
  bar.Update(2'000'000'000, 2'000'000'000);
  const std::string text = out.text();
  EXPECT_EQ(text.substr(text.rfind('\r')),
            "\r\033[Kloaded 2.00 GB of weights in 4.0 s (500.0 MB/s)\n");
  bar.Update(2'000'000'000, 2'000'000'000);  // after the end: nothing
  EXPECT_EQ(out.text(), text);
}

TEST(ProgressBarTest, ALogGetsOneLineAtTheEnd) {
  Captured out;
  double now = 0;
  ProgressBar bar("weights", out.file(), /*tty=*/false, [&] { return now; });
  for (int i = 1; i <= 10; ++i) {
    now = i * 0.5;
    bar.Update(i * 100'000'000LL, 1'000'000'000);
  }
  EXPECT_EQ(out.text(), "loaded 1.00 GB of weights in 5.0 s (200.0 MB/s)\n");
}

TEST(ProgressBarTest, FormatBytes) {
  EXPECT_EQ(ProgressBar::FormatBytes(512), "512 B");
  EXPECT_EQ(ProgressBar::FormatBytes(12'345), "12.3 kB");
  EXPECT_EQ(ProgressBar::FormatBytes(9'400'000), "9.4 MB");
  EXPECT_EQ(ProgressBar::FormatBytes(2'870'000'000), "2.87 GB");
}

}  // namespace
}  // namespace loom
