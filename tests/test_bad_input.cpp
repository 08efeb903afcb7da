// Bad input to every command that reads text: files that are not regular files, outputs that would
// replace a directory or a device, invalid UTF-8, control characters, byte-order marks, CR LF,
// numbers out of range, empty references and sentences: one line on stderr, never a hang.
#include <fmt/format.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli_run.h"
#include "tapestry/models/corpus.h"
#include "tapestry/models/text_input.h"

using namespace tapestry;
using namespace tapestry::testing;
using Catch::Contains;
using Strings = std::vector<std::string>;
using namespace std::string_literals;

namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A tiny model trained once for the whole file (translate, eval and explain --model need one).
const std::string& tiny_run() {
  static TempDir dir("bad_input_run");
  static const std::string run = [] {
    const CommandResult r = run_tapestry(
        "train --task reverse --min-len 3 --max-len 5 --symbols 6 --train-size 60 --valid-size 8 "
        "--test-size 8 --hidden 8 --emb 4 --batch-size 16 --threads 1 --epochs 1 --out run",
        dir.str());
    INFO(r.output);
    REQUIRE(r.status == 0);
    return dir / "run";
  }();
  return run;
}

// `tapestry ARGS` in `dir` as run_tapestry runs it, but killed after 10 s (exit status 137), so
// that a command that hangs (on a named pipe, say) fails the test instead of stalling the suite.
CommandResult run_limited(const std::string& args, const std::string& dir) {
  std::string cmd = "cd '" + dir + "' && timeout -s KILL 10 '";
  cmd.append(TAPESTRY_BINARY_DIR).append("/tapestry' ").append(args).append(" 2>&1");
  return run_command(cmd);
}

// Expects `tapestry ARGS` (run in `dir`) to be refused: exit `status`, one line (nothing goes to
// standard output, so this is standard error) starting "tapestry COMMAND: ", holding every part of
// `says`, never the errno text "Success"; a hang is killed by run_limited and fails the status.
void refused(const std::string& args, int status, const Strings& says,
             const std::string& dir = "") {
  const std::string command = args.substr(0, args.find(' '));
  const std::string stdin_redirect = args.find('<') == std::string::npos ? " </dev/null" : "";
  const CommandResult r = run_limited(args + stdin_redirect, dir.empty() ? "." : dir);
  const std::string& out = r.output;
  INFO("tapestry " << args << "\n" << out);
  CHECK(r.status == status);
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);
  CHECK(out.starts_with("tapestry " + command + ": "));
  for (const auto& s : says) CHECK_THAT(out, Contains(s));
  CHECK_THAT(out, !Contains("Success"));
}

}  // namespace

// ---- 5: files that are not regular files, and outputs that are not meant for a file ----

TEST_CASE("a named pipe, a directory or /dev/zero as an input file is refused at once",
          "[bad_input]") {
  TempDir dir("bad_input_kinds");
  const std::string run = tiny_run();
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  std::filesystem::create_directory(dir / "folder");
  write(dir / "ok.txt", "a b c\n");
  const std::vector<std::pair<std::string, std::string>> kinds = {
      {"fifo", "a named pipe (FIFO), not a regular file"},
      {"folder", "a directory, not a regular file"},
      {"/dev/zero", "a character device, not a regular file"}};
  for (const auto& [file, kind] : kinds) {
    refused(fmt::format("bleu {} ok.txt", file), 1, {file + ": " + kind}, dir.str());
    refused(fmt::format("bleu ok.txt {}", file), 1, {file + ": " + kind}, dir.str());
    refused(fmt::format("translate --model '{}' --input {}", run, file), 1, {file + ": " + kind},
            dir.str());
    refused(fmt::format("eval --model '{}' --src {} --ref ok.txt", run, file), 1,
            {file + ": " + kind}, dir.str());
    refused(fmt::format("eval --model '{}' --src ok.txt --ref {}", run, file), 1,
            {file + ": " + kind}, dir.str());
    refused(fmt::format("train --data {} --epochs 1 --out r", file), 1, {file + ": " + kind},
            dir.str());
  }
  // Parallel files: the name is the prefix and the language.
  REQUIRE(::mkfifo((dir / "p.de").c_str(), 0600) == 0);
  write(dir / "p.en", "a\n");
  refused("train --train-prefix p --valid-prefix p --test-prefix p --src de --tgt en", 1,
          {"p.de: a named pipe (FIFO), not a regular file"}, dir.str());
  // A model given as a named pipe or a device.
  refused("translate --model fifo --input ok.txt", 1, {"model 'fifo' is a named pipe (FIFO)"},
          dir.str());
  refused("eval --model /dev/zero --src ok.txt --ref ok.txt", 1,
          {"model '/dev/zero' is a character device"}, dir.str());
  refused("explain --model fifo --source 'a b'", 1, {"model 'fifo' is a named pipe (FIFO)"},
          dir.str());
  refused("export --model fifo --out pkg", 1, {"model 'fifo' is a named pipe (FIFO)"}, dir.str());
}

TEST_CASE("standard input: /dev/zero is refused at its first byte, a directory at once",
          "[bad_input]") {
  TempDir dir("bad_input_stdin");
  const std::string run = tiny_run();
  refused(fmt::format("translate --model '{}' < /dev/zero", run), 1,
          {"<stdin>:1: control character U+0000 (NUL) at byte 1 of the line"}, dir.str());
  std::filesystem::create_directory(dir / "folder");
  refused(fmt::format("translate --model '{}' < folder", run), 1,
          {"<stdin>: standard input is a directory"}, dir.str());
  // A pipe stays allowed, and "--input -" is standard input too.
  const CommandResult piped =
      run_limited(fmt::format("translate --model '{}' --input - < '{}/test.src'", run, run), ".");
  INFO(piped.output);
  CHECK(piped.status == 0);
  const std::string src = read(run + "/test.src");
  CHECK(std::count(piped.output.begin(), piped.output.end(), '\n') ==
        std::count(src.begin(), src.end(), '\n'));
}

TEST_CASE("an output file that is a directory, a pipe or in no directory is refused before work",
          "[bad_input]") {
  TempDir dir("bad_input_out");
  const std::string run = tiny_run();
  std::filesystem::create_directory(dir / "mine");
  write(dir / "mine/notes.txt", "keep me\n");
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  const std::string translate =
      fmt::format("translate --model '{}' --input '{}/test.src'", run, run);
  for (const char* flag : {"--attention", "--heatmap"}) {
    refused(fmt::format("{} {} mine", translate, flag), 2,
            {fmt::format("{} 'mine' is a directory", flag)}, dir.str());
    refused(fmt::format("{} {} fifo", translate, flag), 2,
            {fmt::format("{} 'fifo' is a named pipe (FIFO)", flag)}, dir.str());
    refused(fmt::format("{} {} nowhere/a.html", translate, flag), 2,
            {fmt::format("{} 'nowhere/a.html': the directory 'nowhere' does not exist", flag)},
            dir.str());
  }
  refused("explain --out mine", 2, {"--out 'mine' is a directory"}, dir.str());
  refused("explain --format html --out fifo", 2, {"--out 'fifo' is a named pipe (FIFO)"},
          dir.str());
  refused(fmt::format("eval --model '{}' --json mine", run), 2, {"--json 'mine' is a directory"},
          dir.str());
  refused(fmt::format("export --model '{}' --out mine", run), 1, {"'mine' exists and is not empty"},
          dir.str());
  refused(fmt::format("report --model '{}' --out mine", run), 2, {"--out 'mine' is a directory"},
          dir.str());
  refused("train --task reverse --epochs 1 --out mine", 1,
          {"--out 'mine' holds other files and is not a Tapestry run"}, dir.str());
  // Nothing was written into, over or beside the directory or the pipe.
  CHECK(read(dir / "mine/notes.txt") == "keep me\n");
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) {
    (void)e;
    ++entries;
  }
  CHECK(entries == 2);
  CHECK(std::filesystem::is_fifo(dir / "fifo"));
}

// ---- 6: the real cause and place ----

TEST_CASE("report: a run's files that are pipes or not text are refused by name", "[bad_input]") {
  TempDir dir("bad_input_report");
  std::filesystem::copy(tiny_run(), dir / "run", std::filesystem::copy_options::recursive);
  std::filesystem::remove(dir / "run/metrics.jsonl");
  REQUIRE(::mkfifo((dir / "run/metrics.jsonl").c_str(), 0600) == 0);
  refused("report --model run", 1, {"metrics.jsonl' is a named pipe (FIFO), not a regular file"},
          dir.str());
  std::filesystem::remove(dir / "run/metrics.jsonl");
  std::filesystem::copy(tiny_run() + "/metrics.jsonl", dir / "run/metrics.jsonl");
  write(dir / "run/test.src", "a b\xff c\n");
  refused("report --model run", 1, {"test.src:1: invalid UTF-8"}, dir.str());
}

TEST_CASE("invalid UTF-8 is named with file and line by every command that reads text",
          "[bad_input]") {
  TempDir dir("bad_input_utf8");
  const std::string run = tiny_run();
  write(dir / "ok.txt", "a b\nc d\n");
  write(dir / "bad.txt", "a b\nc \xC3(\n");
  const std::string at = "bad.txt:2: invalid UTF-8 at byte 3 of the line";
  refused("bleu bad.txt ok.txt", 1, {at}, dir.str());
  refused("bleu ok.txt bad.txt", 1, {at}, dir.str());
  refused(fmt::format("translate --model '{}' --input bad.txt", run), 1, {at}, dir.str());
  refused(fmt::format("translate --model '{}' < bad.txt", run), 1,
          {"<stdin>:2: invalid UTF-8 at byte 3 of the line"}, dir.str());
  refused(fmt::format("eval --model '{}' --src bad.txt --ref ok.txt", run), 1, {at}, dir.str());
  refused(fmt::format("eval --model '{}' --src ok.txt --ref bad.txt", run), 1, {at}, dir.str());
  write(dir / "bad.tsv", "a\tb\nc\td \xFF\n");
  refused("train --data bad.tsv --epochs 1 --out r", 1,
          {"bad.tsv:2: invalid UTF-8 at byte 5 of the line"}, dir.str());
  // A sentence given on the command line names its flag.
  refused("explain --source \"$(printf 'the \\377 cat')\"", 2,
          {"--source: invalid UTF-8 at byte 5"});
}

TEST_CASE("a missing file gives the system's reason, never 'Success'", "[bad_input]") {
  TempDir dir("bad_input_missing");
  const std::string run = tiny_run();
  write(dir / "ok.txt", "a\n");
  const std::string why = "missing.txt: cannot open: No such file or directory";
  refused("bleu missing.txt ok.txt", 1, {why}, dir.str());
  refused(fmt::format("translate --model '{}' --input missing.txt", run), 1, {why}, dir.str());
  refused(fmt::format("eval --model '{}' --src ok.txt --ref missing.txt", run), 1, {why},
          dir.str());
  refused("train --data missing.txt --epochs 1 --out r", 1, {why}, dir.str());
  // Through a file that is not a directory: ENOTDIR, read at once rather than after a reset.
  refused("bleu ok.txt/x ok.txt", 1, {"ok.txt/x: cannot open: Not a directory"}, dir.str());
}

TEST_CASE("a number beyond what the type holds is out of range, not 'not a number'",
          "[bad_input]") {
  refused("train --task reverse --epochs 99999999999999999999", 2,
          {"--epochs: 99999999999999999999 is out of range [1, "});
  refused("train --task reverse --epochs -99999999999999999999", 2,
          {"--epochs: -99999999999999999999 is out of range"});
  refused("train --task reverse --lr 1e999", 2, {"--lr: 1e999 is out of range ["});
  refused("train --task reverse --epochs 12x", 2, {"--epochs: '12x' is not a whole number"});
  refused("train --task reverse --lr inf", 2, {"--lr: 'inf' is not a finite number"});
  refused("explain --step 99999999999999999999", 2,
          {"--step: 99999999999999999999 is out of range"});
  refused("explain --step -1", 2, {"--step: '-1' is not a step number (0, 1, ...) or 'all'"});
  refused("explain --eps 1e-400", 2, {"--eps: 1e-400 is outside [1e-08, 0.1]"});
  refused("eval --model x --buckets 10,99999999999999999999", 2,
          {"--buckets: 99999999999999999999 is out of range"});
  refused("bleu a b -s floor -sv 1e999", 2, {"--smooth-value: 1e999 is out of range (at least 0)"});
}

TEST_CASE("an empty reference line is named with its file and line", "[bad_input]") {
  TempDir dir("bad_input_emptyref");
  const std::string run = tiny_run();
  write(dir / "hyp.txt", "a b\nc d\ne f\n");
  write(dir / "ref.txt", "a b\n  \ne f\n");
  write(dir / "ref2.txt", "a b\n\ne f\n");
  refused("bleu hyp.txt ref.txt", 1, {"ref.txt:2: the reference line is empty;"}, dir.str());
  refused("bleu hyp.txt ref.txt ref2.txt", 1,
          {"ref.txt:2, ref2.txt:2: the reference line is empty in every reference file"},
          dir.str());
  // The model's own test split, with one reference emptied.
  std::string src = read(run + "/test.src"), ref = read(run + "/test.ref");
  write(dir / "src.txt", src);
  write(dir / "ref.txt", ref.substr(0, ref.find('\n') + 1) + "\n" +
                             ref.substr(ref.find('\n', ref.find('\n') + 1) + 1));
  refused(fmt::format("eval --model '{}' --src src.txt --ref ref.txt", run), 1,
          {"ref.txt:2: empty reference line"}, dir.str());
}

// ---- 7: normalisation: byte-order marks, CR LF, control characters ----

TEST_CASE("a byte-order mark is dropped and CR LF ends a line, in files and on standard input",
          "[bad_input]") {
  TempDir dir("bad_input_bom");
  const std::string run = tiny_run();
  const std::string src = read(run + "/test.src");
  std::string crlf;
  for (char c : src) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  write(dir / "plain.txt", src);
  write(dir / "bom.txt", "\xEF\xBB\xBF" + crlf);
  const CommandResult plain =
      run_limited(fmt::format("translate --model '{}' --input plain.txt", run), dir.str());
  const CommandResult bom =
      run_limited(fmt::format("translate --model '{}' --input bom.txt", run), dir.str());
  const CommandResult piped =
      run_limited(fmt::format("translate --model '{}' < bom.txt", run), dir.str());
  REQUIRE(plain.status == 0);
  CHECK(bom.status == 0);
  CHECK(bom.output == plain.output);
  CHECK(piped.output == plain.output);
  // bleu: a BOM and CR LF on the hypotheses change nothing; the scores match exactly.
  const CommandResult same = run_limited("bleu -b plain.txt plain.txt", dir.str());
  const CommandResult bom_hyp = run_limited("bleu -b bom.txt plain.txt", dir.str());
  CHECK(same.output == "100.00\n");
  CHECK(bom_hyp.output == "100.00\n");
  // The corpus readers: the first token is the word, not the mark.
  write(dir / "bom.tsv", "\xEF\xBB\xBFhello\tbonjour\r\nbye\tsalut\r\n");
  const models::Corpus c = models::read_tsv(dir / "bom.tsv", {});
  REQUIRE(c.pairs.size() == 2);
  CHECK(c.pairs[0].src == Strings{"hello"});
  CHECK(c.pairs[1].tgt == Strings{"salut"});
}

TEST_CASE("NUL and other control characters are refused with file and line; tab is text",
          "[bad_input]") {
  TempDir dir("bad_input_control");
  const std::string run = tiny_run();
  write(dir / "ok.txt", "a b\nc d\n");
  write(dir / "nul.txt", "a b\nc\0d\n"s);
  write(dir / "cr.txt", "a b\rc d\n");
  write(dir / "esc.txt", "a b\nc d\n\x1b[31m\n");
  refused("bleu nul.txt ok.txt", 1, {"nul.txt:2: control character U+0000 (NUL) at byte 2"},
          dir.str());
  refused("bleu ok.txt cr.txt", 1,
          {"cr.txt:1: control character U+000D (carriage return) at byte 4"}, dir.str());
  refused("bleu esc.txt ok.txt", 1, {"esc.txt:3: control character U+001B (escape) at byte 1"},
          dir.str());
  refused(fmt::format("translate --model '{}' < nul.txt", run), 1,
          {"<stdin>:2: control character U+0000 (NUL) at byte 2"}, dir.str());
  refused(fmt::format("eval --model '{}' --src ok.txt --ref nul.txt", run), 1,
          {"nul.txt:2: control character U+0000 (NUL)"}, dir.str());
  write(dir / "ctl.tsv", "a\tb\nc\x7f\td\n");
  refused("train --data ctl.tsv --epochs 1 --out r", 1,
          {"ctl.tsv:2: control character U+007F (DEL) at byte 2"}, dir.str());
  refused("explain --target \"$(printf 'le\\001chat')\"", 2,
          {"--target: control character U+0001 (SOH) at byte 3"});
  // Tab separates a TSV's columns and is whitespace in plain text.
  write(dir / "tab.txt", "a\tb\nc d\n");
  const CommandResult tab = run_limited("bleu -b tab.txt ok.txt", dir.str());
  CHECK(tab.status == 0);
  CHECK(tab.output == run_limited("bleu -b ok.txt ok.txt", dir.str()).output);
}

// ---- 8 (part): an empty sentence is not silently replaced by the default ----

TEST_CASE("explain: an empty or blank --source, --reference or --target is refused",
          "[bad_input]") {
  refused("explain --source ''", 2, {"--source '' has no words"});
  refused("explain --source '   '", 2, {"--source '   ' has no words"});
  refused("explain --reference ''", 2, {"--reference '' has no words"});
  refused("explain --target ' '", 2, {"--target ' ' has no words"});
  refused(fmt::format("explain --model '{}' --source ''", tiny_run()), 2,
          {"--source '' has no words"});
}

// ---- the shared reader itself ----

TEST_CASE("read_lines: chunk boundaries change nothing; errors count lines and bytes",
          "[bad_input]") {
  auto split = [](const std::string& bytes, size_t chunk) {
    models::LineSplitter s("t");
    for (size_t i = 0; i < bytes.size(); i += chunk)
      s.feed(std::string_view(bytes).substr(i, chunk));
    return s.finish();
  };
  const std::vector<std::pair<std::string, Strings>> cases = {
      {"", {}},
      {"\n", {""}},
      {"a", {"a"}},
      {"a\n", {"a"}},
      {"a\r\n", {"a"}},
      {"a\r", {"a"}},
      {"a\n\nb", {"a", "", "b"}},
      {"\xEF\xBB\xBF", {}},
      {"\xEF\xBB\xBFx\r\ny\r\n", {"x", "y"}},
      {"\xEF\xBB", {"\xEF\xBB"}},  // refused below: not a whole mark
      {"caf\xC3\xA9\tb\r\n\xF0\x9F\x98\x80\n", {"caf\xC3\xA9\tb", "\xF0\x9F\x98\x80"}},
      {"x\xEF\xBB\xBF\n", {"x\xEF\xBB\xBF"}},  // a mark inside the text is a character
  };
  for (const auto& [bytes, lines] : cases) {
    for (size_t chunk : {1, 2, 3, 1000}) {
      INFO(bytes << " in chunks of " << chunk);
      if (bytes == "\xEF\xBB") {
        CHECK_THROWS_WITH(split(bytes, chunk), Contains("t:1: invalid UTF-8 at byte 1"));
        continue;
      }
      CHECK(split(bytes, chunk) == lines);
    }
  }
  for (size_t chunk : {1, 2, 1000}) {
    CHECK_THROWS_WITH(split("ok\nab\rc\n", chunk),
                      Contains("t:2: control character U+000D (carriage return) at byte 3"));
    CHECK_THROWS_WITH(split("ok\nok\n\xE2\x82", chunk), Contains("t:3: invalid UTF-8 at byte 1"));
    CHECK_THROWS_WITH(split("\xE2\x82\nok", chunk), Contains("t:1: invalid UTF-8 at byte 1"));
    CHECK_THROWS_AS(split("a\0"s, chunk), models::DataError);
  }
  // An endless input is refused at its first bad byte, before its end: one NUL fed, no finish().
  models::LineSplitter endless("<stdin>");
  CHECK_THROWS_WITH(endless.feed(std::string(1, '\0')),
                    Contains("<stdin>:1: control character U+0000 (NUL) at byte 1 of the line"));
  CHECK(models::special_file_kind("/dev/zero") == "a character device");
  CHECK(models::special_file_kind(std::filesystem::temp_directory_path()) == "a directory");
  CHECK(models::special_file_kind(TAPESTRY_SOURCE_DIR "/CMakeLists.txt") == "");
  CHECK(models::text_problem("le chat\tnoir") == "");
  CHECK(models::text_problem("a\nb") == "control character U+000A (line feed) at byte 2");
}
