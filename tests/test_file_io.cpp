// Atomic file replacement: the whole new file or the old one, temporary files of one's own, and
// errors that name the file.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli_run.h"
#include "tapestry/core/file_io.h"

using namespace tapestry;
using Catch::Matchers::Contains;
using tapestry::testing::TempDir;
namespace fs = std::filesystem;

namespace {
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
size_t files_in(const fs::path& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.is_regular_file() || e.is_symlink();
  return n;
}
}  // namespace

TEST_CASE("write_file_atomic replaces a file whole", "[file_io]") {
  TempDir dir("file_io");
  const std::string path = dir / "a.txt";
  write_file_atomic(path, "first\n");
  CHECK(slurp(path) == "first\n");
  write_file_atomic(path, std::string(100000, 'x'));
  CHECK(slurp(path) == std::string(100000, 'x'));
  CHECK(files_in(dir.path) == 1);  // no temporary file left
}

TEST_CASE("two writers of one path in one process use temporary files of their own", "[file_io]") {
  TempDir dir("file_io_two");
  const std::string path = dir / "b.txt";
  {
    AtomicFile one(path), two(path);
    one.write("one");
    two.write("two");
    CHECK(files_in(dir.path) == 2);  // two temporary files, not one shared
    two.commit();
    one.commit();
  }
  CHECK(slurp(path) == "one");
  CHECK(files_in(dir.path) == 1);
}

TEST_CASE("an uncommitted file leaves the old one, and its temporary file goes", "[file_io]") {
  TempDir dir("file_io_abort");
  const std::string path = dir / "c.txt";
  write_file_atomic(path, "old");
  {
    AtomicFile f(path);
    f.write("new, never committed");
  }
  CHECK(slurp(path) == "old");
  CHECK(files_in(dir.path) == 1);
}

TEST_CASE("a file that cannot be written is a FileError naming it", "[file_io]") {
  TempDir dir("file_io_error");
  const std::string path = dir / "missing/d.txt";
  REQUIRE_THROWS_AS(write_file_atomic(path, "x"), FileError);
  REQUIRE_THROWS_WITH(write_file_atomic(path, "x"), Contains("missing/d.txt.tmp."));
  REQUIRE_THROWS_WITH(write_file_atomic("/dev/full/e.txt", "x"), Contains("/dev/full/e.txt"));
}

TEST_CASE("a path that is not a regular file is never replaced", "[file_io]") {
  TempDir dir("file_io_special");
  fs::create_directory(dir / "a_directory");
  std::ofstream(dir / "a_directory/inside.txt") << "kept\n";
  CHECK_THROWS_WITH(write_file_atomic(dir / "a_directory", "x"),
                    Contains("is a directory, not a regular file: it is not replaced"));
  CHECK(slurp(dir / "a_directory/inside.txt") == "kept\n");
  CHECK(files_in(dir.path) == 0);  // no temporary file beside it either
  if (fs::exists("/dev/null")) {   // as root, a rename would replace the device itself
    CHECK_THROWS_AS(write_file_atomic("/dev/null", "x"), FileError);
    CHECK(fs::is_character_file("/dev/null"));
  }
}

TEST_CASE("append_file adds to the end and creates the file", "[file_io]") {
  TempDir dir("file_io_append");
  const std::string path = dir / "log.txt";
  append_file(path, "one\n");
  append_file(path, "two\n");
  CHECK(slurp(path) == "one\ntwo\n");
  CHECK_THROWS_WITH(append_file(dir / "no/such/dir.txt", "x"), Contains("cannot open"));
}
