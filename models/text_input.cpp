// Text input: stat before open, chunked reads, and a byte-by-byte check of UTF-8 and control
// characters that keeps the line number of every byte.
#include "tapestry/models/text_input.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "tapestry/models/text.h"

namespace tapestry::models {

namespace {

constexpr std::array<const char*, 32> kC0Names = {
    "NUL", "SOH", "STX", "ETX",       "EOT",          "ENQ",       "ACK",
    "BEL", "BS",  "tab", "line feed", "vertical tab", "form feed", "carriage return",
    "SO",  "SI",  "DLE", "DC1",       "DC2",          "DC3",       "DC4",
    "NAK", "SYN", "ETB", "CAN",       "EM",           "SUB",       "escape",
    "FS",  "GS",  "RS",  "US"};

bool is_control(unsigned char c) {
  return (c < 0x20 && c != '\t') || c == 0x7F;
}

std::string control_problem(unsigned char c, size_t at) {
  return fmt::format("control character U+{:04X} ({}) at byte {}", c,
                     c == 0x7F ? "DEL" : kC0Names[c], at + 1);
}

// The length of the UTF-8 sequence a lead byte starts, or 0 for a byte no sequence starts with.
size_t sequence_length(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 0;
}

// Checks s[from, end) as text. Returns where the check stopped: `end`, or, unless `complete`, the
// start of a UTF-8 sequence that `end` cuts (the rest may arrive later). Sets `why` for the first
// bad byte (counted from `line_start`) and returns its offset.
size_t scan_text(std::string_view s, size_t from, size_t end, size_t line_start, bool complete,
                 std::string& why) {
  size_t i = from;
  while (i < end) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (is_control(c)) {
        why = control_problem(c, i - line_start);
        return i;
      }
      ++i;
      continue;
    }
    const size_t n = sequence_length(c);
    if (n != 0 && i + n > end && !complete) return i;
    char32_t cp;
    if (n == 0 || i + n > end || utf8_decode_at(s.substr(0, end), i, cp) != n) {
      why = fmt::format("invalid UTF-8 at byte {}", i - line_start + 1);
      return i;
    }
    i += n;
  }
  return i;
}

std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a named pipe (FIFO)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Closes a descriptor this file opened.
struct Fd {
  int fd;
  ~Fd() { ::close(fd); }
};

// Feeds everything `fd` holds to `split`; throws DataError naming `name` on a read error.
void read_all(int fd, const std::string& name, LineSplitter& split) {
  std::string buffer(1 << 16, '\0');
  while (true) {
    const ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int e = errno;
      throw DataError(fmt::format("{}: cannot read: {}", name, std::strerror(e)));
    }
    if (got == 0) return;
    split.feed(std::string_view(buffer.data(), static_cast<size_t>(got)));
  }
}

}  // namespace

std::string special_file_kind(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return "";
  return file_kind(st.st_mode);
}

std::string text_problem(std::string_view text) {
  std::string why;
  scan_text(text, 0, text.size(), 0, true, why);
  return why;
}

void LineSplitter::feed(std::string_view bytes) {
  pending_.append(bytes);
  scan(false);
}

std::vector<std::string> LineSplitter::finish() {
  scan(true);
  return std::move(lines_);
}

void LineSplitter::scan(bool at_end) {
  if (!started_) {
    static constexpr std::string_view kBom = "\xEF\xBB\xBF";
    if (pending_.size() < kBom.size() && !at_end && kBom.starts_with(pending_)) return;
    if (std::string_view(pending_).starts_with(kBom)) pending_.erase(0, kBom.size());
    started_ = true;
  }
  size_t start = 0, i = checked_;  // the current line's start; its first byte not yet checked
  std::string why;
  auto check = [&](size_t end, bool complete) {
    i = scan_text(pending_, i, end, start, complete, why);
    if (!why.empty()) throw DataError(fmt::format("{}:{}: {} of the line", name_, line_, why));
  };
  // The end of the line's text: a '\r' last is part of the line ending. Without a newline yet,
  // such a '\r' is left unchecked until the next bytes show whether a '\n' follows it.
  auto text_end = [&](size_t end) {
    return end > start && pending_[end - 1] == '\r' ? end - 1 : end;
  };
  while (true) {
    const size_t newline = pending_.find('\n', i);
    if (newline == std::string::npos) {
      const size_t end = text_end(pending_.size());
      check(end, at_end);
      if (at_end && start < pending_.size()) {  // the last line, without a newline
        lines_.emplace_back(pending_, start, end - start);
        start = i = pending_.size();
      }
      break;
    }
    const size_t end = text_end(newline);
    check(end, true);
    lines_.emplace_back(pending_, start, end - start);
    ++line_;
    start = i = newline + 1;
  }
  pending_.erase(0, start);
  checked_ = i - start;
}

std::vector<std::string> read_lines(const std::string& path) {
  if (path == kStdinPath) {
    const std::string name(kStdinName);
    struct stat st;
    if (::fstat(STDIN_FILENO, &st) == 0 && S_ISDIR(st.st_mode))
      throw DataError(fmt::format("{}: standard input is a directory, not text", name));
    LineSplitter split(name);
    read_all(STDIN_FILENO, name, split);
    return split.finish();
  }
  // stat first: opening a named pipe waits for a writer, and a device may never end.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    const int e = errno;
    throw DataError(fmt::format("{}: cannot open: {}", path, std::strerror(e)));
  }
  if (!S_ISREG(st.st_mode))
    throw DataError(fmt::format("{}: {}, not a regular file of text", path, file_kind(st.st_mode)));
  // O_NONBLOCK: should the path have become a pipe since the stat, open returns at once and the
  // fstat below refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int e = errno;
    throw DataError(fmt::format("{}: cannot open: {}", path, std::strerror(e)));
  }
  Fd closer{fd};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    throw DataError(fmt::format("{}: cannot stat: {}", path, std::strerror(e)));
  }
  if (!S_ISREG(st.st_mode))
    throw DataError(fmt::format("{}: {}, not a regular file of text", path, file_kind(st.st_mode)));
  LineSplitter split(path);
  read_all(fd, path, split);
  return split.finish();
}

}  // namespace tapestry::models
