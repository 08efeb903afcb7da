// Entry point of the tapestry program: dispatches to subcommands.
#include <execinfo.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string_view>

#include "tapestry/core/blas.h"
#include "tapestry/core/errors.h"
#include "tools/cli.h"
#include "tools/heap_count.h"

// The global allocation functions, replaced ([replacement.functions]) so that `tapestry bench` can
// count the heap allocations of a steady training step (tools/heap_count.h). Outside a count they
// cost one relaxed load. The nothrow forms call these, as libstdc++'s do. Not under
// AddressSanitizer, which owns the allocator (and reports a free of its operator new's memory).
#if !defined(__SANITIZE_ADDRESS__)
#define TAPESTRY_COUNTS_HEAP 1
namespace {

void count_allocation(size_t n) {
  using tapestry::cli::heap_counter;
  if (!heap_counter.counting.load(std::memory_order_relaxed)) return;
  heap_counter.allocations.fetch_add(1, std::memory_order_relaxed);
  if (!heap_counter.trace.load(std::memory_order_relaxed)) return;
  // backtrace() may allocate (on its first call it loads the unwinder): not counted twice.
  thread_local bool inside = false;
  if (inside) return;
  inside = true;
  char line[64];
  const int len = std::snprintf(line, sizeof line, "heap allocation: %zu bytes\n", n);
  [[maybe_unused]] const ssize_t written = write(2, line, static_cast<size_t>(len));
  void* frames[24];
  backtrace_symbols_fd(frames, backtrace(frames, 24), 2);
  inside = false;
}

}  // namespace

void* operator new(size_t n) {
  count_allocation(n);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) {
  return ::operator new(n);
}
void* operator new(size_t n, std::align_val_t a) {
  count_allocation(n);
  const size_t align = static_cast<size_t>(a);
  if (void* p = std::aligned_alloc(align, (n + align - 1) / align * align)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n, std::align_val_t a) {
  return ::operator new(n, a);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, size_t, std::align_val_t) noexcept {
  std::free(p);
}
#endif

namespace {

using tapestry::cli::Args;

struct Command {
  const char* name;
  int (*run)(const Args&);
  const char* summary;
};

constexpr Command kCommands[] = {
    {"train", tapestry::cli::cmd_train, "train an attention model on a toy task or a corpus"},
    {"translate", tapestry::cli::cmd_translate, "translate sentences with a trained model"},
    {"eval", tapestry::cli::cmd_eval,
     "score a model: BLEU, exact match, perplexity, by source length"},
    {"gradcheck", tapestry::cli::cmd_gradcheck,
     "check every op's gradient against finite differences (float64)"},
    {"report", tapestry::cli::cmd_report, "an HTML page about a run: curves, attention, BLEU"},
    {"explain", tapestry::cli::cmd_explain,
     "backprop through attention at any decoder step, value by value, in words, checked"},
    {"bleu", tapestry::cli::cmd_bleu, "corpus BLEU of a hypothesis file, as sacreBLEU computes it"},
    {"bench", tapestry::cli::cmd_bench, "time training and decoding against the PyTorch reference"},
    {"export", tapestry::cli::cmd_export, "write a trained model as a PyTorch package"},
    {"plot", tapestry::cli::cmd_plot,
     "draw BLEU by source length of several models (eval --json files) as SVG"},
};

void print_help() {
  fmt::print("usage: tapestry <command> [options]\n\ncommands:\n");
  for (const auto& c : kCommands) fmt::print("  {:<12} {}\n", c.name, c.summary);
  fmt::print("  {:<12} {}\n", "help", "show this list");
  fmt::print("\n'tapestry <command> --help' describes a command's options.\n");
}

// One line on standard error; returns `status`.
int fail(std::string_view command, std::string_view message, int status) {
  fmt::print(stderr, "tapestry {}: {}\n", command, message);
  return status;
}

// Standard output's last buffered block, written and checked: output that could not be written
// (a full disk, >/dev/full) is an error, never a silent exit 0.
int finish_stdout(std::string_view command, int status) {
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int flush_errno = errno;
  const bool failed = !flushed || std::ferror(stdout);
  errno = 0;
  const bool closed = std::fclose(stdout) == 0;
  if (!failed && closed) return status;
  const int e = !flushed ? flush_errno : errno;
  fail(command,
       fmt::format("error: cannot write standard output: {}",
                   e != 0 ? std::strerror(e) : "a write failed (the output is incomplete)"),
       1);
  return status != 0 ? status : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // A write past the file-size limit then fails with EFBIG, which the writers report, instead of
  // the signal killing the program with no word said.
  std::signal(SIGXFSZ, SIG_IGN);
#ifdef TAPESTRY_COUNTS_HEAP
  tapestry::cli::heap_counter.installed = true;
#endif
  if (const char* trace = std::getenv("TAPESTRY_HEAP_TRACE"); trace && *trace && *trace != '0') {
    void* frame[1];
    backtrace(frame, 1);  // loads the unwinder now, not inside a counted allocation
    tapestry::cli::heap_counter.trace = true;
  }
  tapestry::blas::use_fastest_kernels(argv);
  if (argc < 2) {
    print_help();
    return 2;
  }
  std::string_view name = argv[1];
  if (name == "help" || name == "--help" || name == "-h") {
    print_help();
    return finish_stdout("help", 0);
  }
  Args args(argv + 2, argv + argc);
  for (const auto& c : kCommands) {
    if (name != c.name) continue;
    int status = 0;
    try {
      status = c.run(args);
    } catch (const tapestry::cli::UsageError& e) {
      status = fail(c.name, e.message, 2);
    } catch (const std::bad_alloc&) {
      status = fail(c.name,
                    "error: out of memory (a size given by a flag or a file is too large for this "
                    "machine)",
                    1);
    } catch (const std::exception& e) {
      status = fail(c.name, fmt::format("error: {}", e.what()), 1);
    }
    return finish_stdout(c.name, status);
  }
  std::string valid;
  for (const auto& c : kCommands) valid += fmt::format("{}{}", valid.empty() ? "" : ", ", c.name);
  fmt::print(stderr, "tapestry: unknown command '{}' (valid: {}, help)\n", name, valid);
  return 2;
}
