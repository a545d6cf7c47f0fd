// Small synthetic vocabularies for the fuzz targets (no files needed): a SentencePiece one with
// all 256 byte pieces, a few merges and the ChatGLM specials, and a byte-level BPE one with
// merges and GLM-4 specials. GLM_FUZZ_VOCAB=path.gguf adds a real vocabulary.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_convert.h"

namespace glm::tok::fuzz {

inline VocabSpec spm_spec() {
  VocabSpec s;
  s.model = "llama";
  auto add = [&](const std::string& t, float score, int32_t type) {
    s.tokens.push_back(t);
    s.scores.push_back(score);
    s.types.push_back(type);
  };
  add("<unk>", 0, kTokenUnknown);
  add("<s>", 0, kTokenControl);
  add("</s>", 0, kTokenControl);
  const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b)
    add(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", 0, kTokenByte);
  const char* pieces[] = {"\xe2\x96\x81",
                          "a",
                          "b",
                          "s",
                          "o",
                          "p",
                          "ab",
                          "\u2581a",
                          "\xe2\x96\x81\xe2\x96\x81",
                          "\xe4\xbd\xa0",
                          "\xe5\xa5\xbd",
                          "\xe4\xbd\xa0\xe5\xa5\xbd",
                          "so",
                          "op"};
  float score = -1;
  for (const char* p : pieces) add(p, score -= 0.5f, kTokenNormal);
  for (const char* p : {"sop", "eop", "<|user|>"}) add(p, 0, kTokenControl);
  s.bos = 1;
  s.eos = 2;
  s.unk = 0;
  return s;
}

inline VocabSpec bpe_spec() {
  VocabSpec s;
  s.model = "gpt2";
  s.pre = "chatglm-bpe";
  for (int b = 0; b < 256; ++b) {
    s.tokens.push_back(byte_to_unicode(static_cast<uint8_t>(b)));
    s.types.push_back(kTokenNormal);
  }
  auto merge = [&](const std::string& l, const std::string& r) {
    s.merges.push_back(l + " " + r);
    s.tokens.push_back(l + r);
    s.types.push_back(kTokenNormal);
  };
  const std::string sp = byte_to_unicode(' ');
  merge(sp, "a");
  merge("a", "b");
  merge(sp + "a", "b");
  merge(byte_to_unicode(0xe4), byte_to_unicode(0xbd));
  merge(byte_to_unicode(0xe4) + byte_to_unicode(0xbd), byte_to_unicode(0xa0));
  merge(sp, sp);
  for (const char* p : {"<|endoftext|>", "<|user|>", "[gMASK]", "<sop>"}) {
    s.tokens.push_back(p);
    s.types.push_back(kTokenControl);
  }
  s.eos = 262;
  return s;
}

// Tokenizers to fuzz, built once.
inline const std::vector<std::unique_ptr<Tokenizer>>& tokenizers() {
  static std::vector<std::unique_ptr<Tokenizer>> all = [] {
    std::vector<std::unique_ptr<Tokenizer>> v;
    v.push_back(std::move(Tokenizer::from_spec(spm_spec()).value()));
    v.push_back(std::move(Tokenizer::from_spec(bpe_spec()).value()));
    if (const char* path = std::getenv("GLM_FUZZ_VOCAB")) {
      static auto file = gguf::File::open(path);
      if (file.ok()) {
        auto t = Tokenizer::from_gguf(**file);
        if (t.ok()) v.push_back(std::move(t.value()));
      }
    }
    return v;
  }();
  return all;
}

}  // namespace glm::tok::fuzz
