#include "bench/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bench/seed_prompts.h"
#include "core/json.h"

namespace glm::bench {
namespace {

constexpr const char* kStudyUrl = "http://www.maplevalley.com.cn/news/1031136";
constexpr const char* kStudyTitle =
    "ChatGLM3-6B效果实测：相同prompt在Gradio与Streamlit架构下的延迟对比";
// One color per series, in order; readable on white and distinguishable in grey.
constexpr const char* kColors[] = {"#3b6ea5", "#e08a2c", "#4a9a5b", "#b2474b", "#7a5ca8"};

std::string num(double v, int decimals = 2) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

// "12.34 ± 0.56" (mean ± sd of the kept runs); a dash when nothing was measured.
std::string mean_sd(const Summary& s) {
  if (s.n == 0) return "–";
  return num(s.mean) + " ± " + num(s.stddev);
}
std::string median(const Summary& s) { return s.n == 0 ? "–" : num(s.median); }

// A value of a bar chart: mean with a ± sd whisker; absent bars (n == 0) are skipped.
struct Cell {
  double value = 0, sd = 0;
  bool present = false;
};
Cell cell(const Summary& s) { return {s.mean, s.stddev, s.n > 0}; }

// The smallest "nice" step (1, 2, 5 x 10^k) that splits [0, top] into at most 5 intervals.
double nice_step(double top) {
  const double raw = top / 5;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= raw) return m * p;
  }
  return 10 * p;
}

// A grouped bar chart as inline SVG: one group per x label, one bar per series in each group
// (values[g][s]), a y axis in `unit` with nice ticks, ± sd whiskers, a legend when several
// series. Every bar carries a <title> with its value (a hover tooltip without script).
std::string bar_chart(const std::string& title, const std::string& unit,
                      const std::vector<std::string>& groups,
                      const std::vector<std::string>& series,
                      const std::vector<std::vector<Cell>>& values) {
  const int width = 680, height = 290, left = 64, right = 16, top = 50, bottom = 48;
  const int plot_w = width - left - right, plot_h = height - top - bottom;
  double max_v = 0;
  for (const auto& row : values) {
    for (const Cell& c : row) {
      if (c.present) max_v = std::max(max_v, c.value + c.sd);
    }
  }
  if (!(max_v > 0)) max_v = 1;
  const double step = nice_step(max_v * 1.05);
  const double y_top = std::ceil(max_v * 1.05 / step) * step;
  auto y_of = [&](double v) { return top + plot_h - v / y_top * plot_h; };
  std::string s;
  s += "<figure><svg class=\"chart\" viewBox=\"0 0 " + std::to_string(width) + " " +
       std::to_string(height) + "\" role=\"img\" aria-label=\"" + html_escape(title) + "\">";
  s += "<text class=\"t\" x=\"" + std::to_string(left) + "\" y=\"18\">" + html_escape(title) +
       "</text>";
  // Y axis: ticks, grid lines, label.
  const int decimals = step >= 1 ? 0 : step >= 0.1 ? 1 : 2;
  for (double v = 0; v <= y_top + step / 2; v += step) {
    const std::string y = num(y_of(v), 1);
    s += "<line class=\"grid\" x1=\"" + std::to_string(left) + "\" x2=\"" +
         std::to_string(left + plot_w) + "\" y1=\"" + y + "\" y2=\"" + y + "\"/>";
    s += "<text class=\"yt\" x=\"" + std::to_string(left - 6) + "\" y=\"" + y + "\">" +
         num(v, decimals) + "</text>";
  }
  s += "<text class=\"yl\" transform=\"translate(14," + std::to_string(top + plot_h / 2) +
       ") rotate(-90)\">" + html_escape(unit) + "</text>";
  s += "<line class=\"axis\" x1=\"" + std::to_string(left) + "\" x2=\"" + std::to_string(left) +
       "\" y1=\"" + std::to_string(top) + "\" y2=\"" + std::to_string(top + plot_h) + "\"/>";
  s += "<line class=\"axis\" x1=\"" + std::to_string(left) + "\" x2=\"" +
       std::to_string(left + plot_w) + "\" y1=\"" + std::to_string(top + plot_h) + "\" y2=\"" +
       std::to_string(top + plot_h) + "\"/>";
  // Bars.
  const double group_w = groups.empty() ? plot_w : static_cast<double>(plot_w) / groups.size();
  // Bars at most 64 px wide, centred in their group.
  const size_t n_series = std::max<size_t>(1, series.size());
  const double bar_w = std::min(group_w * 0.8 / n_series, 64.0);
  for (size_t g = 0; g < groups.size(); ++g) {
    const double gx = left + g * group_w + (group_w - bar_w * n_series) / 2;
    for (size_t k = 0; k < series.size() && g < values.size() && k < values[g].size(); ++k) {
      const Cell& c = values[g][k];
      if (!c.present) continue;
      const double x = gx + k * bar_w;
      const double y = y_of(c.value);
      s += "<rect fill=\"" + std::string(kColors[k % 5]) + "\" x=\"" + num(x, 1) + "\" y=\"" +
           num(y, 1) + "\" width=\"" + num(bar_w * 0.9, 1) + "\" height=\"" +
           num(top + plot_h - y, 1) + "\"><title>" + html_escape(groups[g]) + ", " +
           html_escape(series[k]) + ": " + num(c.value) + " ± " + num(c.sd) + " " +
           html_escape(unit) + "</title></rect>";
      if (c.sd > 0) {
        const std::string cx = num(x + bar_w * 0.45, 1);
        const std::string lo = num(y_of(std::max(0.0, c.value - c.sd)), 1);
        const std::string hi = num(y_of(c.value + c.sd), 1);
        const std::string l = num(x + bar_w * 0.3, 1), r = num(x + bar_w * 0.6, 1);
        s += "<path class=\"wh\" d=\"M" + cx + " " + lo + "V" + hi + "M" + l + " " + hi + "H" + r +
             "M" + l + " " + lo + "H" + r + "\"/>";
      }
    }
    s += "<text class=\"xt\" x=\"" + num(left + (g + 0.5) * group_w, 1) + "\" y=\"" +
         std::to_string(top + plot_h + 18) + "\">" + html_escape(groups[g]) + "</text>";
  }
  // Legend, on its own line under the title.
  if (series.size() > 1) {
    int lx = left;
    for (size_t k = 0; k < series.size(); ++k, lx += 140) {
      s += "<rect fill=\"" + std::string(kColors[k % 5]) + "\" x=\"" + std::to_string(lx) +
           "\" y=\"26\" width=\"10\" height=\"10\"/><text class=\"lg\" x=\"" +
           std::to_string(lx + 14) + "\" y=\"35\">" + html_escape(series[k]) + "</text>";
    }
  }
  s += "</svg></figure>\n";
  return s;
}

const char* kCss = R"(
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI","Noto Sans CJK SC",sans-serif;
max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1d232b;background:#fff}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.25rem;margin-top:2rem;
border-bottom:1px solid #d5dae0}table{border-collapse:collapse;margin:.6rem 0;font-size:.9rem}
th,td{border:1px solid #d5dae0;padding:.25rem .55rem;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}th{background:#f1f3f6}
code,pre{font:13px/1.4 ui-monospace,"DejaVu Sans Mono",monospace;background:#f5f6f8}
pre{padding:.5rem;white-space:pre-wrap;word-break:break-all}figure{margin:.8rem 0}
svg.chart{width:100%;max-width:680px;height:auto;font-size:11px}
svg .t{font-size:13px;font-weight:600}svg .grid{stroke:#e6e9ed}svg .axis{stroke:#58616b}
svg .yt{text-anchor:end;dominant-baseline:middle}svg .xt,svg .yl{text-anchor:middle}
svg .wh{stroke:#1d232b;stroke-width:1.2;fill:none}.note{color:#58616b;font-size:.9rem}
)";

std::string row(std::initializer_list<std::string> cells, std::initializer_list<bool> numeric) {
  std::string s = "<tr>";
  auto n = numeric.begin();
  for (const std::string& c : cells) {
    const bool is_num = n != numeric.end() && *n++;
    s += is_num ? "<td class=\"n\">" : "<td>";
    s += c;
    s += "</td>";
  }
  return s + "</tr>\n";
}

std::vector<std::string> unique_in_order(const std::vector<LayerRow>& rows, bool prompts) {
  std::vector<std::string> out;
  for (const LayerRow& r : rows) {
    const std::string& v = prompts ? r.prompt : r.layer;
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

// Drops min and max like the rest of the report; overhead per run = first char - engine TTFT.
Summary browser_overhead(const BrowserLayer& b) {
  std::vector<double> d;
  for (size_t i = 0; i < b.first_char_ms.size() && i < b.engine_ttft_ms.size(); ++i) {
    d.push_back(b.first_char_ms[i] - b.engine_ttft_ms[i]);
  }
  return summarize(d);
}

void layers_section(const ReportInput& in, std::string* out) {
  std::string& s = *out;
  s += "<h2>Per layer: TTFT, TPOT, end-to-end</h2>\n<p>Each measured run sends the prompt "
       "through every layer in turn (engine in-process, engine socket";
  s += std::any_of(in.layers.begin(), in.layers.end(),
                   [](const LayerRow& r) { return r.layer == "http"; })
           ? ", HTTP gateway"
           : "";
  s += "), so machine-speed drift hits every layer alike. Times in ms: mean ± sd of the runs "
       "without min and max; median of all runs beside it.</p>\n";
  s += "<table><tr><th>prompt</th><th>layer</th><th>TTFT ms</th><th>median</th><th>TPOT ms</th>"
       "<th>end-to-end ms</th><th>median</th><th>tokens</th><th>kept runs</th></tr>\n";
  for (const LayerRow& r : in.layers) {
    s += row({html_escape(r.prompt), html_escape(r.layer), mean_sd(r.ttft), median(r.ttft),
              mean_sd(r.tpot), mean_sd(r.e2e), median(r.e2e), std::to_string(r.tokens),
              std::to_string(r.ttft.n)},
             {false, false, true, true, true, true, true, true, true});
  }
  s += "</table>\n";
  s += "<p>Socket overhead (socket TTFT − in-process TTFT, paired runs): median <b>" +
       median(in.socket_overhead) + " ms</b>, mean " + mean_sd(in.socket_overhead) + " ms.</p>\n";
  const std::vector<std::string> prompts = unique_in_order(in.layers, true);
  const std::vector<std::string> layers = unique_in_order(in.layers, false);
  struct Metric {
    const char* title;
    const Summary LayerRow::*field;
  };
  for (const Metric& m : {Metric{"TTFT by prompt and layer", &LayerRow::ttft},
                          Metric{"TPOT by prompt and layer", &LayerRow::tpot},
                          Metric{"End-to-end by prompt and layer", &LayerRow::e2e}}) {
    std::vector<std::vector<Cell>> v(prompts.size(), std::vector<Cell>(layers.size()));
    for (const LayerRow& r : in.layers) {
      const size_t g = std::find(prompts.begin(), prompts.end(), r.prompt) - prompts.begin();
      const size_t k = std::find(layers.begin(), layers.end(), r.layer) - layers.begin();
      v[g][k] = cell(r.*m.field);
    }
    s += bar_chart(std::string(m.title) + " (mean ± sd, ms)", "ms", prompts, layers, v);
  }
}

void browser_section(const ReportInput& in, std::string* out) {
  std::string& s = *out;
  s += "<h2>Real browser: click to first character</h2>\n";
  if (in.browser.empty()) {
    s += "<p class=\"note\">Not measured in this run (pass <code>--browser FILE</code>, the JSON "
         "that <code>GLM_MEASURE_JSON=FILE node tests/browser/measure.mjs</code> writes).</p>\n";
    return;
  }
  s += "<p>Measured by <code>tests/browser/measure.mjs</code> in Debian's chromium: the time from "
       "pressing Enter to the first character of the answer on screen, beside the engine's own "
       "TTFT for the same request; the difference is what the gateway and the page add.</p>\n"
       "<table><tr><th>prompt</th><th>click → first character ms</th><th>median</th>"
       "<th>engine TTFT ms</th><th>overhead ms</th><th>median</th><th>runs</th>"
       "<th>warm-ups</th></tr>\n";
  std::vector<std::string> groups;
  std::vector<std::vector<Cell>> v;
  for (const BrowserLayer& b : in.browser) {
    const Summary fc = summarize(b.first_char_ms), et = summarize(b.engine_ttft_ms);
    const Summary ov = browser_overhead(b);
    s += row({html_escape(b.prompt), mean_sd(fc), median(fc), mean_sd(et), mean_sd(ov), median(ov),
              std::to_string(b.first_char_ms.size()), std::to_string(b.warmup)},
             {false, true, true, true, true, true, true, true});
    groups.push_back(b.prompt.size() > 24 ? b.prompt.substr(0, 21) + "..." : b.prompt);
    v.push_back({cell(fc), cell(et)});
  }
  s += "</table>\n";
  for (std::string& g : groups) {  // a cut may split a UTF-8 character: drop its tail bytes
    while (!g.empty() && (static_cast<unsigned char>(g.back()) & 0xC0) == 0x80) g.pop_back();
  }
  s += bar_chart("Click → first character vs engine TTFT (mean ± sd, ms)", "ms", groups,
                 {"click → first char", "engine TTFT"}, v);
}

void sweep_section(const ReportInput& in, std::string* out) {
  std::string& s = *out;
  s += "<h2>Concurrency sweep</h2>\n";
  if (in.sweep.empty()) {
    s += "<p class=\"note\">Not measured in this run (<code>--no-sweep</code>).</p>\n";
    return;
  }
  s += "<p>N users send the marketing-copy prompt at once through the engine socket; one warm-up "
       "round, then the measured rounds. Times in ms, mean ± sd without min and max.</p>\n"
       "<table><tr><th>users</th><th>TTFT ms</th><th>TPOT ms</th><th>end-to-end ms</th>"
       "<th>aggregate tokens/s</th><th>vs " +
       std::to_string(in.sweep.front().users) + (in.sweep.front().users == 1 ? " user" : " users") +
       "</th></tr>\n";
  const double base = in.sweep.front().tokens_per_s.mean;
  std::vector<std::string> groups;
  std::vector<std::vector<Cell>> lat, tps;
  for (const SweepRow& r : in.sweep) {
    s += row({std::to_string(r.users), mean_sd(r.ttft), mean_sd(r.tpot), mean_sd(r.e2e),
              mean_sd(r.tokens_per_s), base > 0 ? num(r.tokens_per_s.mean / base) + "x" : "–"},
             {true, true, true, true, true, true});
    groups.push_back(std::to_string(r.users) + (r.users == 1 ? " user" : " users"));
    lat.push_back({cell(r.ttft), cell(r.e2e)});
    tps.push_back({cell(r.tokens_per_s)});
  }
  s += "</table>\n";
  s += bar_chart("Latency by number of users (mean ± sd, ms)", "ms", groups, {"TTFT", "end-to-end"},
                 lat);
  s += bar_chart("Aggregate throughput by number of users (tokens/s)", "tokens/s", groups,
                 {"tokens/s"}, tps);
}

void turns_section(const ReportInput& in, std::string* out) {
  std::string& s = *out;
  s += "<h2>Multi-turn TTFT by turn</h2>\n";
  if (in.turns.empty()) {
    s += "<p class=\"note\">Not measured in this run (<code>--no-turns</code>).</p>\n";
    return;
  }
  s += "<p>Conversations whose new user message has the same length every turn, through the "
       "engine socket; turn 1 is a cold prefill, later turns reuse the conversation's KV cache "
       "(cached tokens).</p>\n<table><tr><th>turn</th><th>prompt tokens</th>"
       "<th>cached tokens</th><th>TTFT ms</th><th>median</th><th>vs turn 1</th></tr>\n";
  const double first = in.turns.front().ttft.mean;
  std::vector<std::string> groups;
  std::vector<std::vector<Cell>> v;
  for (const TurnRow& t : in.turns) {
    s += row({std::to_string(t.turn), num(t.prompt_tokens, 0), num(t.cached_tokens, 0),
              mean_sd(t.ttft), median(t.ttft), first > 0 ? num(t.ttft.mean / first) + "x" : "–"},
             {true, true, true, true, true, true});
    groups.push_back("turn " + std::to_string(t.turn));
    v.push_back({cell(t.ttft)});
  }
  s += "</table>\n";
  s += bar_chart("TTFT by turn (mean ± sd, ms)", "ms", groups, {"TTFT"}, v);
}

void reference_section(std::string* out) {
  std::string& s = *out;
  s += "<h2>Reference: the seed study</h2>\n<p>The method of this report comes from <a href=\"";
  s += kStudyUrl;
  s += "\">";
  s += html_escape(kStudyTitle);
  s += "</a> (<code>";
  s += kStudyUrl;
  s += "</code>), which measured ChatGLM3-6B-32k behind two Python front ends, Gradio and "
       "Streamlit, with three fixed prompts of the same three kinds (a short question, "
       "~200 characters of marketing copy, a code security review). This report sends the "
       "study's own three prompts.</p>\n"
       "<table><tr><th></th><th>seed study</th><th>this report</th></tr>\n"
       "<tr><td>hardware</td><td>NVIDIA RTX 4090D GPU (24 GB), AMD Ryzen 9 7950X host</td>"
       "<td>CPU only (see Machine above)</td></tr>\n"
       "<tr><td>model and runtime</td><td>ChatGLM3-6B-32k, FP16, Hugging Face transformers "
       "4.40.2 (PyTorch, CUDA)</td><td>see Model above; glmserve's own C++ engine</td></tr>\n"
       "<tr><td>front ends</td><td>Gradio; Streamlit</td><td>engine in-process, engine socket, "
       "HTTP gateway, the glmserve page in chromium</td></tr>\n"
       "<tr><td>published TTFT</td><td>Gradio ";
  s += std::to_string(kSeedReportedTtftMs.gradio);
  s += " ms; Streamlit ";
  s += std::to_string(kSeedReportedTtftMs.streamlit);
  s += " ms (the study's mean of 10 runs without min and max)</td><td>the TTFT tables above"
       "</td></tr>\n</table>\n";
  s += "<p class=\"note\">Hardware difference: the study ran its model on a GPU; this report "
       "runs on the CPU named above, so absolute times are not comparable between the two. "
       "What carries over is the method and the question it asks: how many milliseconds the "
       "serving stack adds above the model's own time to first token.</p>\n";
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string render_report_html(const ReportInput& in) {
  std::string s;
  s.reserve(64 << 10);
  s += "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
       "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n"
       "<title>glmserve serving latency: " +
       html_escape(in.model_name) + "</title>\n<style>" + kCss + "</style></head><body>\n";
  s += "<h1>Serving latency, the seed study's method</h1>\n<p class=\"note\">glmserve bench "
       "serve, " +
       html_escape(in.date_utc) + "</p>\n";
  // Method.
  s += "<h2>Method</h2>\n<p>Three fixed prompts (a short question, ~200 characters of marketing "
       "copy, a code security review); <b>" +
       std::to_string(in.warmup) + "</b> warm-up runs, then <b>" + std::to_string(in.runs) +
       "</b> measured runs per prompt and layer; the minimum and maximum are dropped and the "
       "report gives mean ± standard deviation of the middle runs (the seed study: 3 warm-ups, "
       "10 runs, the 8 middle ones). Greedy decoding, " +
       std::to_string(in.max_tokens) +
       " tokens per request; every request carries a unique tag so that no layer is served "
       "from another's prefix cache.</p>\n<table><tr><th>prompt</th><th>text</th></tr>\n";
  for (const ReportPrompt& p : in.prompts) {
    s += "<tr><td>" + html_escape(p.name) + "</td><td><pre>" + html_escape(p.text) +
         "</pre></td></tr>\n";
  }
  s += "</table>\n";
  // Machine, model, command.
  s += "<h2>Machine and model</h2>\n<table>\n";
  s += "<tr><th>CPU</th><td>" + html_escape(in.cpu_model) + "</td></tr>\n";
  s += "<tr><th>logical CPUs</th><td>" + std::to_string(in.cpus) + "</td></tr>\n";
  s += "<tr><th>engine threads</th><td>" + html_escape(in.threads) + "</td></tr>\n";
  s += "<tr><th>model</th><td>" + html_escape(in.model_name) + "</td></tr>\n";
  s += "<tr><th>model type</th><td>" + html_escape(in.model_type) + "</td></tr>\n";
  s += "<tr><th>date</th><td>" + html_escape(in.date_utc) + "</td></tr>\n";
  s += "<tr><th>command</th><td><pre>" + html_escape(in.command_line) + "</pre></td></tr>\n";
  s += "</table>\n";
  layers_section(in, &s);
  browser_section(in, &s);
  sweep_section(in, &s);
  turns_section(in, &s);
  reference_section(&s);
  s += "</body></html>\n";
  return s;
}

StatusOr<BrowserLayer> parse_browser_json(std::string_view json_text) {
  auto j = parse_json(json_text, "the --browser file");
  if (!j.ok()) return j.status();
  BrowserLayer b;
  auto bad = [](const std::string& what) {
    return invalid_argument(
        "the --browser file: " + what +
        " (write it with GLM_MEASURE_JSON=FILE node tests/browser/measure.mjs)");
  };
  if (!j->is_object()) return bad("expected a JSON object");
  if (!j->contains("prompt") || !(*j)["prompt"].is_string()) return bad("no \"prompt\" string");
  b.prompt = (*j)["prompt"].get<std::string>();
  if (j->contains("warmup") && (*j)["warmup"].is_number_integer()) {
    b.warmup = (*j)["warmup"].get<int>();
  }
  for (const char* key : {"first_char_ms", "engine_ttft_ms"}) {
    if (!j->contains(key) || !(*j)[key].is_array()) {
      return bad(std::string("no \"") + key + "\" array");
    }
    std::vector<double>& dst =
        std::string(key) == "first_char_ms" ? b.first_char_ms : b.engine_ttft_ms;
    for (const auto& v : (*j)[key]) {
      if (!v.is_number()) return bad(std::string("\"") + key + "\" holds a non-number");
      dst.push_back(v.get<double>());
    }
  }
  if (b.first_char_ms.empty()) return bad("\"first_char_ms\" is empty");
  if (b.first_char_ms.size() != b.engine_ttft_ms.size()) {
    return bad("\"first_char_ms\" and \"engine_ttft_ms\" differ in length");
  }
  return b;
}

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        size_t b = colon + 1;
        while (b < line.size() && line[b] == ' ') ++b;
        return line.substr(b);
      }
    }
  }
  return "unknown CPU";
}

}  // namespace glm::bench
