// Atomic file replacement: write a temporary file completely, sync it, rename it over the target.
#include "tapestry/core/file_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tapestry {

namespace {

std::string system_reason() {
  return std::strerror(errno);
}

// TAPESTRY_FAULT_INJECT=KIND:N (see file_io.h), read once.
struct Fault {
  enum Kind { none, enospc, efbig, kill, trace } kind = none;
  int64_t at = 0;
};
const Fault& fault() {
  static const Fault f = [] {
    Fault f;
    const char* env = std::getenv("TAPESTRY_FAULT_INJECT");
    if (!env) return f;
    const std::string_view s(env);
    const size_t colon = s.find(':');
    if (colon == std::string_view::npos) return f;
    const std::string_view kind = s.substr(0, colon), n = s.substr(colon + 1);
    int64_t at = 0;
    if (std::from_chars(n.data(), n.data() + n.size(), at).ptr != n.data() + n.size() || at < 1)
      return f;
    f.at = at;
    f.kind = kind == "enospc"  ? Fault::enospc
             : kind == "efbig" ? Fault::efbig
             : kind == "kill"  ? Fault::kill
             : kind == "trace" ? Fault::trace
                               : Fault::none;
    return f;
  }();
  return f;
}
std::atomic<int64_t> writes{0};

// Counts one write; for the injected one, fails as the fault says. `fd`, `data` and `n`: what the
// write is about to write (a kill writes the first half of it first).
void write_point(int fd, const void* data, uint64_t n, const std::string& name) {
  const int64_t k = ++writes;
  const Fault& f = fault();
  if (f.kind == Fault::trace)
    std::fprintf(stderr, "tapestry: write %lld: %s\n", static_cast<long long>(k), name.c_str());
  if (f.kind == Fault::none || f.kind == Fault::trace || k != f.at) return;
  if (f.kind == Fault::kill) {
    if (fd >= 0 && n > 1) (void)!::write(fd, data, n / 2);
    ::raise(SIGKILL);
  }
  errno = f.kind == Fault::enospc ? ENOSPC : EFBIG;
  throw FileError(fmt::format("cannot write '{}': {}", name, system_reason()));
}

// Writes all n bytes to fd, retrying short writes and interruptions; `name` is for the message.
void write_all(int fd, const void* data, uint64_t n, const std::string& name) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::write(fd, p, std::min<uint64_t>(n, 1u << 30));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0)
      throw FileError(
          fmt::format("cannot write '{}': {}", name, k < 0 ? system_reason() : "no bytes written"));
    p += k;
    n -= static_cast<uint64_t>(k);
  }
}

// Makes a rename in the directory of `path` durable. Best effort: the file is already complete
// and in place.
void sync_directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return;
  (void)::fsync(dir_fd);
  ::close(dir_fd);
}

}  // namespace

void rename_file(const std::string& from, const std::string& to) {
  write_point(-1, nullptr, 0, from);
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw FileError(fmt::format("cannot rename '{}' to '{}': {}", from, to, system_reason()));
  sync_directory_of(to);
}

int64_t file_writes_so_far() {
  return writes.load();
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  // The rename would put the file in the place of a directory's entry or a device (as root, even
  // /dev/null): only a regular file, or a link to one, is ever replaced.
  struct stat st;
  if (::stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw FileError(fmt::format("'{}' is {}, not a regular file: it is not replaced", path_,
                                S_ISDIR(st.st_mode)    ? "a directory"
                                : S_ISCHR(st.st_mode)  ? "a character device"
                                : S_ISBLK(st.st_mode)  ? "a block device"
                                : S_ISFIFO(st.st_mode) ? "a named pipe (FIFO)"
                                                       : "a socket"));
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
  write_point(fd_, data, n, tmp_);
  write_all(fd_, data, n, tmp_);
}

void AtomicFile::commit() {
  write_point(-1, nullptr, 0, tmp_);
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
  sync_directory_of(path_);
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  AtomicFile f(path);
  f.write(bytes);
  f.commit();
}

void append_file(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw FileError(fmt::format("cannot open '{}': {}", path, system_reason()));
  struct Closer {
    int fd;
    ~Closer() {
      if (fd >= 0) ::close(fd);
    }
  } closer{fd};
  write_point(fd, bytes.data(), bytes.size(), path);
  write_all(fd, bytes.data(), bytes.size(), path);
  if (::fsync(fd) != 0) throw FileError(fmt::format("cannot sync '{}': {}", path, system_reason()));
  closer.fd = -1;
  if (::close(fd) != 0)
    throw FileError(fmt::format("cannot close '{}': {}", path, system_reason()));
}

}  // namespace tapestry
