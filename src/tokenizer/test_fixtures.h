// Tokenizers for the tests, loaded once per process: from the vocab GGUFs of ../shared/data, and
// from GGUFs written by write_vocab from the tokenizer.model files (to a temp dir).
#pragma once

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "gguf/gguf.h"
#include "tokenizer/test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_convert.h"

namespace glm::tok::testing {

enum class Source { kVocabGguf, kWrittenGguf };

inline const char* source_name(Source s) {
  return s == Source::kVocabGguf ? "VocabGguf" : "WrittenGguf";
}

// A loaded model vocabulary: the GGUF (kept open) and its tokenizer.
struct Loaded {
  std::unique_ptr<gguf::File> file;
  std::unique_ptr<Tokenizer> tok;
  std::string error;  // why it could not be loaded (missing data), empty if loaded
};

// name: "chatglm3" or "glm4"; "stories" (models/stories260K.gguf, vocab GGUF only).
inline const Loaded& load(const std::string& name, Source source) {
  static std::map<std::pair<std::string, Source>, Loaded> cache;
  auto key = std::make_pair(name, source);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  Loaded& l = cache[key];
  std::string gguf_path;
  if (name == "stories") {
    gguf_path = shared("models/stories260K.gguf");
  } else if (source == Source::kVocabGguf) {
    gguf_path = shared("vocab/" + name + "-vocab.gguf");
  } else {
    const std::string model = shared("tokenizers/" + name + ".tokenizer.model");
    if (!exists(model)) {
      l.error = model + " is absent (see ../shared/data/README.md)";
      return l;
    }
    auto spec = read_tokenizer_model(model);
    if (!spec.ok()) {
      l.error = spec.status().to_string();
      return l;
    }
    gguf::Writer w;
    w.set("general.architecture", gguf::Value::string("chatglm"));
    write_vocab(*spec, &w);
    gguf_path = temp_path(name + "-written.gguf");
    Status st = w.begin(gguf_path);
    if (st.ok()) st = w.finish();
    if (!st.ok()) {
      l.error = st.to_string();
      return l;
    }
  }
  if (!exists(gguf_path)) {
    l.error = gguf_path + " is absent (see ../shared/data/README.md)";
    return l;
  }
  auto f = gguf::File::open(gguf_path);
  if (source == Source::kWrittenGguf && name != "stories") std::remove(gguf_path.c_str());
  if (!f.ok()) {
    l.error = f.status().to_string();
    return l;
  }
  auto t = Tokenizer::from_gguf(**f);
  if (!t.ok()) {
    l.error = t.status().to_string();
    return l;
  }
  l.file = std::move(f.value());
  l.tok = std::move(t.value());
  return l;
}

// Writes `spec` as a vocab-only GGUF (architecture `arch`) and loads it.
inline Loaded load_spec(const VocabSpec& spec, const std::string& name,
                        const std::string& arch = "chatglm") {
  Loaded l;
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::string(arch));
  write_vocab(spec, &w);
  const std::string path = temp_path(name + ".gguf");
  Status st = w.begin(path);
  if (st.ok()) st = w.finish();
  if (!st.ok()) {
    l.error = st.to_string();
    return l;
  }
  auto f = gguf::File::open(path);
  std::remove(path.c_str());
  if (!f.ok()) {
    l.error = f.status().to_string();
    return l;
  }
  auto t = Tokenizer::from_gguf(**f);
  if (!t.ok()) {
    l.error = t.status().to_string();
    return l;
  }
  l.file = std::move(f.value());
  l.tok = std::move(t.value());
  return l;
}

inline const nlohmann::json* cases() {
  static nlohmann::json j;
  static bool loaded = false;
  if (!loaded) {
    loaded = true;
    std::ifstream in(shared("tokenizers/cases.json"));
    if (in) j = nlohmann::json::parse(in, nullptr, false);
  }
  return j.is_object() ? &j : nullptr;
}

}  // namespace glm::tok::testing

#define GLM_LOAD_OR_SKIP(var, name, source)                                             \
  const ::glm::tok::testing::Loaded& var##_l = ::glm::tok::testing::load(name, source); \
  if (!var##_l.tok) GTEST_SKIP() << var##_l.error;                                      \
  [[maybe_unused]] const ::glm::tok::Tokenizer& var = *var##_l.tok

#define GLM_CASES_OR_SKIP(var)                              \
  const nlohmann::json* var = ::glm::tok::testing::cases(); \
  if (!var) GTEST_SKIP() << "../shared/data/tokenizers/cases.json is absent or unreadable"
