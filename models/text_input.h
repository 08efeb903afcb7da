// Text input read into lines, the one way every command reads text: regular files or standard
// input, a byte-order mark dropped, CR LF endings, and every bad byte named with its file and line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tapestry/core/errors.h"

namespace tapestry::models {

// A data file that cannot be used: the message names the file and, for a bad line, its number.
class DataError : public Error {
 public:
  using Error::Error;
};

// The path that means standard input, and the name it goes by in messages ("<stdin>:3: ...").
inline constexpr std::string_view kStdinPath = "-";
inline constexpr std::string_view kStdinName = "<stdin>";

// Why `text` is not text, or "" if it is: "invalid UTF-8 at byte 4" or "control character U+0000
// (NUL) at byte 1" (bytes counted from 1). Tab is text; every other C0 control character and DEL
// are not, so a binary file or a stray NUL is refused rather than tokenised.
std::string text_problem(std::string_view text);

// Splits bytes into lines as they arrive, checking each byte once, so that an endless input (a
// device, a pipe) is refused at its first bad byte instead of being read to the end. A UTF-8
// byte-order mark at the very start is dropped; lines end at '\n', a '\r' just before it (or at
// the very end) belongs to the ending; a final newline ends the last line rather than starting an
// empty one. Throws DataError "NAME:LINE: <text_problem> of the line".
class LineSplitter {
 public:
  explicit LineSplitter(std::string name) : name_(std::move(name)) {}
  void feed(std::string_view bytes);
  // The lines; call once, after the last feed.
  std::vector<std::string> finish();

 private:
  void scan(bool at_end);
  std::string name_, pending_;  // pending_: the bytes after the last complete line
  size_t checked_ = 0;          // bytes of pending_ already checked
  int64_t line_ = 1;            // the number of the line pending_ starts
  bool started_ = false;        // the byte-order mark has been looked for
  std::vector<std::string> lines_;
};

// What the file at `path` is if it is not a regular file, for messages: "a directory", "a named
// pipe (FIFO)", "a character device", "a block device", "a socket"; "" for a regular file or a path
// that cannot be examined.
std::string special_file_kind(const std::string& path);

// The lines of the file at `path`, or of standard input for "-", split and checked as above.
// Throws DataError naming the file: missing or unreadable (with the system's reason), or not a
// regular file (a directory, a named pipe, a device: refused from its stat, before it is opened,
// so nothing waits on a pipe or reads a device without end). Standard input may be a pipe or a
// terminal, but not a directory.
std::vector<std::string> read_lines(const std::string& path);

}  // namespace tapestry::models
