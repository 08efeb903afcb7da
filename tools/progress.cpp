// Progress: the bar's layout and rate limiting.
#include "tools/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>

namespace tapestry::cli {

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(std::llround(std::max(seconds, 0.0)));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

std::string format_count(double x) {
  std::string digits = fmt::format("{}", static_cast<int64_t>(std::llround(x)));
  std::string out;
  const size_t lead = digits[0] == '-' ? 1 : 0;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > lead && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

Progress::Progress(std::FILE* out) : out_(out), tty_(isatty(fileno(out)) != 0) {}

void Progress::step(int64_t epoch, int64_t epochs, const models::StepProgress& p) {
  const double rate = p.seconds > 0 ? static_cast<double>(p.tokens) / p.seconds : 0;
  const double eta =
      p.step > 0 ? p.seconds * static_cast<double>(p.steps - p.step) / static_cast<double>(p.step)
                 : 0;
  if (tty_) {
    const auto now = std::chrono::steady_clock::now();
    if (p.step != p.steps && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(kWidth * p.step / std::max<int64_t>(p.steps, 1));
    fmt::print(out_, "\repoch {}/{} [{}{}] {}/{} loss {:.4f} {} tok/s ETA {}\x1b[K", epoch, epochs,
               std::string(static_cast<size_t>(filled), '#'),
               std::string(static_cast<size_t>(kWidth - filled), '.'), p.step, p.steps, p.mean_loss,
               format_count(rate), format_duration(eta));
    std::fflush(out_);
    drawn_ = true;
    return;
  }
  const int quarter = static_cast<int>(4 * p.step / std::max<int64_t>(p.steps, 1));
  if (quarter > quarter_ && quarter < 4) {
    fmt::print(out_, "epoch {}/{}: step {}/{}, loss {:.4f}, {} tok/s, ETA {}\n", epoch, epochs,
               p.step, p.steps, p.mean_loss, format_count(rate), format_duration(eta));
    std::fflush(out_);
  }
  quarter_ = quarter;
}

void Progress::end_epoch() {
  if (tty_ && drawn_) fmt::print(out_, "\r\x1b[K");
  drawn_ = false;
  quarter_ = 0;
}

}  // namespace tapestry::cli
