// Checks of the HTML pages Tapestry writes: that nothing in them is fetched from anywhere, and how
// headless Chromium leaves a page after its script ran (its DOM and what its console said).
#pragma once

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tapestry::testing {

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Nothing that a browser would fetch: no external script, stylesheet, image or frame source, no
// URL but the SVG namespace, and url() only for fragments of the page itself. Inline scripts and
// frames filled by the page (srcdoc) are allowed.
inline void check_self_contained(const std::string& html) {
  for (const char* ref : {"<link", "<img", "src=", "@import"}) {
    INFO(ref);
    CHECK(html.find(ref) == std::string::npos);
  }
  for (size_t at = 0; (at = html.find("url(", at)) != std::string::npos; at += 4)
    CHECK(html.compare(at + 4, 1, "#") == 0);
  for (size_t at = 0; (at = html.find("http", at)) != std::string::npos; at += 4)
    CHECK(html.compare(at, 26, "http://www.w3.org/2000/svg") == 0);
}

inline bool have_chromium() {
  return std::filesystem::exists("/usr/bin/chromium");
}

// The page as headless Chromium leaves it after its script ran (and, with a budget, after that
// much virtual time: timers and frames filled later), and what the console said.
struct Browser {
  std::string dom, console;
};
inline Browser load_in_chromium(const std::string& html_path, int budget_ms = 0) {
  const std::string log = html_path + ".console";
  const std::string cmd = fmt::format(
      "chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
      "--disable-background-networking --disable-component-update --disable-sync "
      "--user-data-dir='{0}.profile' --enable-logging=stderr --v=0 {2} --dump-dom 'file://{0}' "
      "2>'{1}'",
      html_path, log, budget_ms > 0 ? fmt::format("--virtual-time-budget={}", budget_ms) : "");
  Browser b;
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  for (size_t got; (got = fread(buf, 1, sizeof buf, pipe)) > 0;) b.dom.append(buf, got);
  pclose(pipe);
  std::istringstream lines(slurp(log));
  for (std::string line; std::getline(lines, line);)
    if (line.find(":CONSOLE") != std::string::npos) b.console += line + "\n";
  return b;
}

// The page with a script of the test's own run after the page's scripts.
inline std::string with_script(std::string page, const std::string& script) {
  page.replace(page.rfind("</body>"), 7, "<script>" + script + "</script></body>");
  return page;
}

}  // namespace tapestry::testing
