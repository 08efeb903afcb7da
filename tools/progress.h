// Progress: a progress bar on a terminal (epoch, step, loss, tokens/s, ETA), plain lines otherwise.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>

#include "tapestry/models/train.h"

namespace tapestry::cli {

class Progress {
 public:
  // Draws on `out` (stderr): a bar redrawn in place if it is a terminal, else a line every quarter
  // of an epoch.
  explicit Progress(std::FILE* out);
  void step(int64_t epoch, int64_t epochs, const models::StepProgress& p);
  // Clears the bar before the epoch's summary line is printed.
  void end_epoch();
  bool terminal() const { return tty_; }

 private:
  std::FILE* out_;
  bool tty_;
  bool drawn_ = false;
  int quarter_ = 0;
  std::chrono::steady_clock::time_point last_draw_{};
};

// "1:02:03" or "4:05".
std::string format_duration(double seconds);
// 12345.6 -> "12,346".
std::string format_count(double x);

}  // namespace tapestry::cli
