// `glmserve bench serve --report` end to end on the echo engine (no model): the HTML page it
// writes holds the method, the three prompts, every section and its charts, and bad report
// inputs fail with one line before anything is measured.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "cli_util.h"

namespace {

using glm::testing::CliRun;
using glm::testing::run_cli;

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

class BenchServeReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/glm-report-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const char* f : {"/r.html", "/browser.json"}) std::remove((dir_ + f).c_str());
    ::rmdir(dir_.c_str());
  }
  std::string dir_;
};

// The smallest run that fills every section: 2 runs, no warm-up, 2 tokens, 1 and 2 users, 2 turns.
constexpr const char* kSmall =
    "bench serve --echo --runs 2 --warmup 0 --max-tokens 2 --concurrency 1,2 --turns 2";

TEST_F(BenchServeReportTest, WritesOneSelfContainedPageWithEverySection) {
  const std::string html_path = dir_ + "/r.html";
  {
    std::ofstream b(dir_ + "/browser.json");
    b << R"({"prompt":"<b>typed</b>","warmup":3,"first_char_ms":[30,31,32],)"
      << R"("engine_ttft_ms":[20,20,20]})";
  }
  const CliRun r = run_cli(std::string(kSmall) + " --report " + html_path + " --browser " + dir_ +
                           "/browser.json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("report: " + html_path), std::string::npos) << r.out;
  const std::string html = read_all(html_path);
  ASSERT_EQ(html.rfind("<!doctype html>", 0), 0u) << html.substr(0, 200);
  EXPECT_NE(html.find("</body></html>"), std::string::npos);
  // The study's three prompts (the code review's quotes escaped), the machine and the command.
  EXPECT_NE(html.find("short question"), std::string::npos);
  EXPECT_NE(html.find("marketing copy"), std::string::npos);
  EXPECT_NE(html.find("code review"), std::string::npos);
  EXPECT_NE(html.find("新能源汽车"), std::string::npos);
  EXPECT_NE(html.find("Gradio 1247 ms; Streamlit 312 ms"), std::string::npos);  // the study's
  EXPECT_NE(html.find("os.system(f&#39;echo"), std::string::npos);
  EXPECT_NE(html.find("glmserve bench serve --echo --runs 2"), std::string::npos);
  EXPECT_NE(html.find("echo engine"), std::string::npos);
  EXPECT_EQ(html.find("unknown CPU"), std::string::npos);  // /proc/cpuinfo was read
  // Every section: layers (in-process and socket rows for each prompt), browser, sweep, turns.
  EXPECT_EQ(count(html, "<td>in-process</td>"), 3u);
  EXPECT_EQ(count(html, "<td>socket</td>"), 3u);
  EXPECT_NE(html.find("Real browser: click to first character"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;typed&lt;/b&gt;"), std::string::npos);
  EXPECT_NE(html.find("31.00 ± 0.00"), std::string::npos);  // 30 and 32 dropped
  EXPECT_NE(html.find("Concurrency sweep"), std::string::npos);
  EXPECT_NE(html.find("2 users"), std::string::npos);
  EXPECT_NE(html.find("Multi-turn TTFT by turn"), std::string::npos);
  EXPECT_NE(html.find("turn 2"), std::string::npos);
  EXPECT_NE(html.find("Reference: the seed study"), std::string::npos);
  // 3 layer charts, 1 browser, 2 sweep, 1 turns; nothing loaded from outside.
  EXPECT_EQ(count(html, "<svg"), 7u);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(count(html, "href="), 1u);
}

TEST_F(BenchServeReportTest, SkippedSectionsAndBadInputs) {
  const std::string html_path = dir_ + "/r.html";
  const CliRun r = run_cli(std::string(kSmall) + " --no-sweep --no-turns --report " + html_path);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string html = read_all(html_path);
  EXPECT_EQ(count(html, "<svg"), 3u);
  EXPECT_NE(html.find("Not measured in this run (<code>--no-sweep</code>)"), std::string::npos);
  // Bad inputs: one line, exit non-zero, before measuring.
  for (const std::string& bad : {std::string(" --report /nonexistent-dir/r.html"),
                                 " --report " + html_path + " --browser " + dir_ + "/missing.json",
                                 " --browser " + dir_ + "/missing.json"}) {
    const CliRun b = run_cli(std::string(kSmall) + bad);
    EXPECT_NE(b.exit_code, 0) << bad;
    EXPECT_EQ(count(b.out, "\n"), 1u) << b.out;
    EXPECT_EQ(b.out.find("| prompt |"), std::string::npos) << b.out;
  }
}

}  // namespace
