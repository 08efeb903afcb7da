// Atomic file replacement: write a temporary file completely, sync it, rename it over the target.
#include "tapestry/core/file_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace tapestry {

namespace {
std::string system_reason() {
  return std::strerror(errno);
}
}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  // A name of this process's own, made exclusively: never a file (or a planted link) that exists,
  // and never one another thread of this process is writing.
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0;; ++attempt) {
    tmp_ = fmt::format("{}.tmp.{}.{}", path_, ::getpid(), counter++);
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd_ >= 0) return;
    if (errno != EEXIST || attempt >= 100)
      throw FileError(fmt::format("cannot create '{}': {}", tmp_, system_reason()));
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, uint64_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::write(fd_, p, std::min<uint64_t>(n, 1u << 30));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0)
      throw FileError(
          fmt::format("cannot write '{}': {}", tmp_, k < 0 ? system_reason() : "no bytes written"));
    p += k;
    n -= static_cast<uint64_t>(k);
  }
}

void AtomicFile::commit() {
  // fsync before rename: otherwise a crash could leave the new name on unwritten data.
  if (::fsync(fd_) != 0)
    throw FileError(fmt::format("cannot sync '{}': {}", tmp_, system_reason()));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0)
    throw FileError(fmt::format("cannot close '{}': {}", tmp_, system_reason()));
  if (::rename(tmp_.c_str(), path_.c_str()) != 0)
    throw FileError(fmt::format("cannot rename '{}' to '{}': {}", tmp_, path_, system_reason()));
  committed_ = true;
  // Makes the rename itself durable. Best effort: the new file is already complete and in place.
  const size_t slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path_.substr(0, slash + 1);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return;
  (void)::fsync(dir_fd);
  ::close(dir_fd);
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  AtomicFile f(path);
  f.write(bytes);
  f.commit();
}

}  // namespace tapestry
