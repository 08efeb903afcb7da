// Files written whole or not at all: a temporary file beside the target, every write checked,
// fsynced, then renamed over the target, so a reader sees the old file or the complete new one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tapestry/core/errors.h"

namespace tapestry {

// A file that cannot be created, written, synced or renamed; the message names the file and the
// system's reason ("cannot write 'm.safetensors.tmp.42': No space left on device").
class FileError : public Error {
 public:
  using Error::Error;
};

// A file written under `path + ".tmp.<pid>.<n>"` (created exclusively) and renamed over `path` by
// commit(). If commit() is never reached (an error, an exception) the temporary file is removed
// and `path` keeps its old contents. Throws FileError, also at once when `path` exists and is not
// a regular file (a directory, a device, a named pipe: never replaced).
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Writes all n bytes (retrying short writes and interruptions).
  void write(const void* data, uint64_t n);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // fsync, close, rename over the target, then (best effort) sync the directory.
  void commit();

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

// Replaces `path` with `bytes` through an AtomicFile. Throws FileError.
void write_file_atomic(const std::string& path, std::string_view bytes);

// Appends `bytes` to `path` (created if missing) with every write checked, then fsyncs it. A
// failure part way may leave part of the bytes at the end (a log's reader must expect a partial
// last line). Throws FileError.
void append_file(const std::string& path, std::string_view bytes);

// Fault injection, for tests of what a failed write leaves behind: with the environment variable
// TAPESTRY_FAULT_INJECT=KIND:N, the Nth write of this process through this file (each call of
// AtomicFile::write and commit, and of append_file, counts one) fails as KIND says: `enospc` or
// `efbig` throws FileError with that errno's text, `kill` writes half of the bytes and then
// kills the process with SIGKILL; `trace:1` fails nothing but prints each write's number and file
// to standard error. Unset, or not of that form, nothing is injected.
// The number of writes counted so far, so a test can find every point at which to fail.
int64_t file_writes_so_far();

// Renames `from` over `to` (counted as a write for fault injection), then syncs the directory.
// Throws FileError.
void rename_file(const std::string& from, const std::string& to);

}  // namespace tapestry
