// The seed study as a report: `glmserve bench serve --report out.html` writes one self-contained
// HTML page (inline CSS and SVG charts; no script, no font, no network) from the results of one
// bench serve run (docs/performance.md#serving-latency). Also reads the JSON that
// tests/browser/measure.mjs writes (GLM_MEASURE_JSON) for the browser layer.
// Thread-safety: pure functions. Cost: linear in the number of rows.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bench/latency_probe.h"
#include "core/status.h"

namespace glm::bench {

// One prompt at one layer: each Summary is over the measured runs (min and max dropped).
struct LayerRow {
  std::string prompt;  // the prompt's short name ("short question")
  std::string layer;   // "in-process", "socket", "http"
  Summary ttft, tpot, e2e;
  int tokens = 0;  // tokens of the last reply
};

// The page's click-to-first-character for one prompt (tests/browser/measure.mjs).
struct BrowserLayer {
  std::string prompt;  // the text typed into the page
  int warmup = 0;
  std::vector<double> first_char_ms;   // click -> first character on screen, per measured run
  std::vector<double> engine_ttft_ms;  // the engine's own TTFT of the same requests
};

struct SweepRow {
  int users = 0;
  Summary ttft, tpot, e2e;
  Summary tokens_per_s;  // aggregate over all users, per round
};

struct TurnRow {
  int turn = 0;                                 // 1-based
  double prompt_tokens = 0, cached_tokens = 0;  // means over the conversations
  Summary ttft;
};

struct ReportPrompt {
  std::string name, text;
};

struct ReportInput {
  std::string command_line;  // as typed, shell-quoted
  std::string date_utc;      // "2026-12-02 04:50 UTC"
  std::string cpu_model;     // /proc/cpuinfo "model name"
  int cpus = 0;              // logical CPUs online
  std::string threads;       // engine threads ("2", "default (physical cores)")
  std::string model_name, model_type;
  int runs = 0, warmup = 0, max_tokens = 0;
  std::vector<ReportPrompt> prompts;
  std::vector<LayerRow> layers;
  std::vector<BrowserLayer> browser;  // empty without --browser
  Summary socket_overhead;            // socket TTFT - in-process TTFT, paired runs
  std::vector<SweepRow> sweep;        // empty with --no-sweep
  std::vector<TurnRow> turns;         // empty with --no-turns
};

// Escapes & < > " ' for text and attribute values.
std::string html_escape(std::string_view text);

// The whole page, UTF-8, starting with "<!doctype html>".
std::string render_report_html(const ReportInput& in);

// The JSON that measure.mjs writes: {"prompt", "warmup", "first_char_ms": [...],
// "engine_ttft_ms": [...]}. invalid_argument naming what is wrong otherwise.
StatusOr<BrowserLayer> parse_browser_json(std::string_view json_text);

// "model name" of /proc/cpuinfo; "unknown CPU" when absent.
std::string cpu_model_name();

}  // namespace glm::bench
