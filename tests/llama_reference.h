// Test helper (integration tests only): our models against logits that llama.cpp printed for
// the same random-weight files (tests/data/<arch>/README.md says how). The files are regenerated
// by gen-model with the same seed (it writes the same bytes), run through model::evaluate (the
// reference's first n_prefill rows as one prefill batch, the others as decode steps), and
// compared row by row.
#pragma once

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "convert/gen_model.h"
#include "model/eval.h"
#include "model/test_util.h"

namespace glm::testing {

// `gen-model --arch <family> --preset tiny --seed 7 --type <type>`, written once per run under
// a name starting with `stem`.
inline std::string tiny_model(const std::string& stem, convert::Family family, DType type,
                              const std::string& preset = "tiny") {
  const std::string path = model::testing::temp_path(stem + "-" + convert::family_name(family) +
                                                     "-" + dtype_name(type) + ".gguf");
  if (!model::testing::file_exists(path)) {
    convert::GenOptions o;
    o.family = family;
    o.preset = preset;
    o.type = type;
    o.seed = 7;
    Status s = convert::generate_model(o, path, nullptr);
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
  return path;
}

inline int argmax(const std::vector<float>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

inline float top2_margin(const std::vector<float>& v) {
  std::vector<float> s = v;
  std::partial_sort(s.begin(), s.begin() + 2, s.end(), std::greater<float>());
  return s[0] - s[1];
}

// The prompt length with which the tests compare a model with the llama.cpp logits under
// tests/data: 16 rows prefilled at once, the others decoded one at a time.
inline constexpr int kPrefill = 16;

struct Compare {
  float max_diff = 0;
  float max_abs = 0;  // largest |logit| of the reference
  int argmax_mismatches = 0;
  // Mismatches where the reference's top two logits are more than 0.1 apart (twice the
  // quantized tolerance): rounding cannot explain those.
  int clear_argmax_mismatches = 0;
};

// The model file `path` on `device` against the reference rows of `golden` (a JSONL of
// {"pos","token","values"}).
inline Compare compare_with_reference(const std::string& path, const std::string& golden,
                                      int n_prefill, DType kv, const std::string& device = "cpu") {
  const std::vector<model::testing::JsonRow> want = model::testing::read_jsonl(golden);
  EXPECT_GT(want.size(), static_cast<size_t>(n_prefill));
  std::vector<int32_t> prompt, decode;
  for (size_t i = 0; i < want.size(); ++i) {
    (static_cast<int>(i) < n_prefill ? prompt : decode).push_back(want[i].token);
  }
  auto m = model::testing::load(path, 2, true, device);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  if (!m.ok()) return {1e9f, 0, 0, 0};
  EXPECT_EQ((*m)->device_name().substr(0, 3), device.substr(0, 3));
  model::EvalOptions o;
  o.kv_type = kv;
  o.block_tokens = 4;
  auto rows = model::evaluate(**m, prompt, decode, o);
  EXPECT_TRUE(rows.ok()) << rows.status().to_string();
  if (!rows.ok()) return {1e9f, 0, 0, 0};
  Compare c;
  EXPECT_EQ(rows->size(), want.size());
  for (size_t i = 0; i < std::min(rows->size(), want.size()); ++i) {
    const std::vector<float>& got = (*rows)[i].values;
    EXPECT_EQ((*rows)[i].pos, want[i].pos);
    EXPECT_EQ(got.size(), want[i].values.size());
    if (got.size() != want[i].values.size()) continue;
    for (size_t j = 0; j < got.size(); ++j) {
      c.max_diff = std::max(c.max_diff, std::fabs(got[j] - want[i].values[j]));
      c.max_abs = std::max(c.max_abs, std::fabs(want[i].values[j]));
    }
    if (argmax(got) != argmax(want[i].values)) {
      ++c.argmax_mismatches;
      if (top2_margin(want[i].values) > 0.1f) ++c.clear_argmax_mismatches;
    }
  }
  return c;
}

// Greedy continuations of several prompts (a JSONL of {"prompt_ids","ids"}: llama.cpp's argmax
// loop) give the same ids: the prompt prefilled, then the ids generated so far one step each,
// the argmax of the last row.
inline void expect_greedy_ids_match(const std::string& path, const std::string& greedy) {
  std::ifstream in(greedy);
  ASSERT_TRUE(in.good()) << greedy;
  auto m = model::testing::load(path, 2);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    const auto prompt = j["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = j["ids"].get<std::vector<int32_t>>();
    std::vector<int32_t> got;
    for (size_t step = 0; step < want.size(); ++step) {
      auto rows = model::evaluate(**m, prompt, got, model::EvalOptions());
      ASSERT_TRUE(rows.ok()) << rows.status().to_string();
      got.push_back(argmax(rows->back().values));
    }
    EXPECT_EQ(got, want) << "prompt " << j["prompt_ids"].dump();
    ++cases;
  }
  EXPECT_GE(cases, 3);
}

}  // namespace glm::testing
