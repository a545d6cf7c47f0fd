#include "bench/report_html.h"

#include <gtest/gtest.h>

#include <string>

namespace glm::bench {
namespace {

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

Summary summary(double mean, double sd, double med, int n = 8) {
  Summary s;
  s.n = n;
  s.mean = mean;
  s.stddev = sd;
  s.median = med;
  return s;
}

// Fixed results: two prompts x two layers, a browser layer, a 2-point sweep, 2 turns.
ReportInput fixed_input() {
  ReportInput in;
  in.command_line = "glmserve bench serve --model m.gguf --report out.html";
  in.date_utc = "2026-12-02 05:00 UTC";
  in.cpu_model = "Test CPU @ 1.00GHz";
  in.cpus = 2;
  in.threads = "2";
  in.model_name = "evil<script>alert(1)</script>";
  in.model_type = "chatglm, Q4_0";
  in.runs = 10;
  in.warmup = 3;
  in.max_tokens = 32;
  in.prompts = {{"short question", "你好 & <b>hi</b>"}, {"code review", "a = '1' + \"2\""}};
  in.layers = {
      {"short question", "in-process", summary(11.25, 0.5, 11.0), summary(3.5, 0.25, 3.5),
       summary(120.75, 2.5, 121), 32},
      {"short question", "socket", summary(11.5, 0.75, 11.25), summary(3.75, 0.25, 3.5),
       summary(121.5, 2.25, 121), 32},
      {"code review", "in-process", summary(98.5, 4.125, 97), summary(4.0, 0.5, 4.0),
       summary(230.25, 3.0, 230), 31},
      {"code review", "socket", summary(99.0, 4.0, 98), Summary{}, summary(231.0, 3.0, 231), 1},
  };
  in.socket_overhead = summary(0.2175, 0.044, 0.2125, 24);
  BrowserLayer b;
  b.prompt = "What is the capital of France?";
  b.warmup = 3;
  b.first_char_ms = {20, 21, 22, 23, 24};
  b.engine_ttft_ms = {10, 10, 10, 10, 10};
  in.browser.push_back(b);
  in.sweep = {{1, summary(17.77, 0.62, 17.5), summary(2, 0.1, 2), summary(19.56, 0.36, 19.5),
               summary(1224.5, 110.25, 1220)},
              {2, summary(16.87, 8.13, 15.0), summary(2, 0.1, 2), summary(37.38, 3.1, 37),
               summary(2449.0, 64.0, 2450)}};
  in.turns = {{1, 85, 0, summary(2.04, 0.58, 2.0)}, {2, 200, 116, summary(2.74, 1.04, 2.5)}};
  return in;
}

TEST(ReportHtmlTest, EscapesEveryMarkupCharacter) {
  EXPECT_EQ(html_escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  EXPECT_EQ(html_escape("你好"), "你好");
}

TEST(ReportHtmlTest, PageHoldsTheTablesNumbersAndOneSvgPerChart) {
  const std::string html = render_report_html(fixed_input());
  EXPECT_EQ(html.rfind("<!doctype html>", 0), 0u);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  // The layer table: mean ± sd and medians as given.
  for (const char* v : {"11.25 ± 0.50", "11.50 ± 0.75", "98.50 ± 4.12", "99.00 ± 4.00",
                        "120.75 ± 2.50", "231.00 ± 3.00", "3.75 ± 0.25", ">121.00<"}) {
    EXPECT_NE(html.find(v), std::string::npos) << v;
  }
  EXPECT_NE(html.find("median <b>0.21 ms</b>"), std::string::npos);  // socket overhead
  // A layer with no TPOT shows a dash, not 0.00.
  EXPECT_NE(html.find("<td class=\"n\">–</td>"), std::string::npos);
  // Browser: first char 21..23 kept -> 22.00 ± 1.00; overhead 12.00 ± 1.00.
  EXPECT_NE(html.find("22.00 ± 1.00"), std::string::npos);
  EXPECT_NE(html.find("12.00 ± 1.00"), std::string::npos);
  // Sweep and turns, with their ratios.
  EXPECT_NE(html.find("1224.50 ± 110.25"), std::string::npos);
  EXPECT_NE(html.find("2.00x"), std::string::npos);  // 2449 / 1224.5
  EXPECT_NE(html.find("2.74 ± 1.04"), std::string::npos);
  EXPECT_NE(html.find("1.34x"), std::string::npos);  // 2.74 / 2.04
  // Charts: TTFT, TPOT, E2E by layer; browser; sweep latency and throughput; turns.
  EXPECT_EQ(count(html, "<svg"), 7u);
  EXPECT_EQ(count(html, "</svg>"), 7u);
  // Whiskers drawn for bars with an sd.
  EXPECT_GT(count(html, "class=\"wh\""), 10u);
  // Machine, model, command, prompts (escaped).
  EXPECT_NE(html.find("Test CPU @ 1.00GHz"), std::string::npos);
  EXPECT_NE(html.find("chatglm, Q4_0"), std::string::npos);
  EXPECT_NE(html.find("glmserve bench serve --model m.gguf --report out.html"), std::string::npos);
  EXPECT_NE(html.find("你好 &amp; &lt;b&gt;hi&lt;/b&gt;"), std::string::npos);
  EXPECT_NE(html.find("a = &#39;1&#39; + &quot;2&quot;"), std::string::npos);
}

TEST(ReportHtmlTest, ModelNameIsEscapedAndNothingIsLoadedFromOutside) {
  const std::string html = render_report_html(fixed_input());
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("evil&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  for (const char* ref : {"src=", "<link", "@import", "url(", "<iframe", "<object", "<img"}) {
    EXPECT_EQ(html.find(ref), std::string::npos) << ref;
  }
  // The one outside address is the cited study, as a link (and its address shown as text).
  const std::string study = "http://www.maplevalley.com.cn/news/1031136";
  EXPECT_EQ(count(html, "href="), 1u);
  EXPECT_NE(html.find("<a href=\"" + study + "\">"), std::string::npos);
  std::string rest = html;
  for (size_t p; (p = rest.find(study)) != std::string::npos;) rest.erase(p, study.size());
  EXPECT_EQ(rest.find("http://"), std::string::npos);
  EXPECT_EQ(rest.find("https://"), std::string::npos);
  // The study's published figures, beside the page's own tables.
  EXPECT_NE(html.find("Gradio 1247 ms; Streamlit 312 ms"), std::string::npos);
}

TEST(ReportHtmlTest, SkippedSectionsSaySo) {
  ReportInput in = fixed_input();
  in.browser.clear();
  in.sweep.clear();
  in.turns.clear();
  const std::string html = render_report_html(in);
  EXPECT_NE(html.find("--no-sweep"), std::string::npos);
  EXPECT_NE(html.find("--no-turns"), std::string::npos);
  EXPECT_NE(html.find("--browser FILE"), std::string::npos);
  EXPECT_EQ(count(html, "<svg"), 3u);
}

TEST(ReportHtmlTest, BrowserJsonIsParsedAndCheckedWithOneLineErrors) {
  auto b = parse_browser_json(
      R"({"prompt":"hi","warmup":3,"first_char_ms":[1.5,2],"engine_ttft_ms":[1,1]})");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->prompt, "hi");
  EXPECT_EQ(b->warmup, 3);
  EXPECT_EQ(b->first_char_ms, (std::vector<double>{1.5, 2}));
  for (const char* bad : {"not json", "[]", R"({"first_char_ms":[1],"engine_ttft_ms":[1]})",
                          R"({"prompt":"p","first_char_ms":[1,2],"engine_ttft_ms":[1]})",
                          R"({"prompt":"p","first_char_ms":[],"engine_ttft_ms":[]})",
                          R"({"prompt":"p","first_char_ms":["x"],"engine_ttft_ms":[1]})"}) {
    auto r = parse_browser_json(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace glm::bench
