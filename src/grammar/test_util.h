// Test and benchmark helpers: byte-level acceptance checks and the real vocabularies read from
// ../shared/data/vocab (GGUF tokenizer.ggml.tokens converted to raw bytes).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/vocab.h"

namespace glm::grammar::testing {

// Whole text accepted and complete, fed in one call.
inline bool accepts(const Grammar& g, std::string_view text) {
  Matcher m(g, nullptr);
  return m.accept_bytes(text).ok() && m.is_complete();
}

// Fed one byte at a time: the length of the longest accepted prefix (text.size() if all).
inline size_t accepted_prefix(const Grammar& g, std::string_view text) {
  Matcher m(g, nullptr);
  for (size_t i = 0; i < text.size(); ++i) {
    if (!m.accept_bytes(text.substr(i, 1)).ok()) return i;
  }
  return text.size();
}

// Accepted byte by byte and complete at the end.
inline bool accepts_bytewise(const Grammar& g, std::string_view text) {
  Matcher m(g, nullptr);
  for (size_t i = 0; i < text.size(); ++i) {
    if (!m.accept_bytes(text.substr(i, 1)).ok()) return false;
  }
  return m.is_complete();
}

inline std::string shared_data(const char* rel) {
#ifdef GLM_SHARED_DATA
  return std::string(GLM_SHARED_DATA) + "/" + rel;
#else
  return rel;
#endif
}

// GPT-2 byte-level BPE: the printable stand-in code point of each byte, inverted.
inline std::vector<int> gpt2_unicode_to_byte() {
  std::vector<int> inv(512, -1);
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    int cp = printable ? b : 256 + n++;
    inv[static_cast<size_t>(cp)] = b;
  }
  return inv;
}

struct LoadedVocab {
  std::shared_ptr<const TokenVocab> vocab;
  std::vector<int32_t> stop_ids;
};

// kind "chatglm3" (SentencePiece) or "glm4" (byte-level BPE). Null vocab if the file is absent.
inline StatusOr<LoadedVocab> load_vocab(const std::string& path, const std::string& kind) {
  auto f = gguf::File::open(path);
  if (!f.ok()) return f.status();
  const gguf::Value* toks = (*f)->find("tokenizer.ggml.tokens");
  if (!toks) return not_found(path + ": no tokenizer.ggml.tokens");
  const std::vector<std::string>& pieces = toks->strings();
  std::vector<int64_t> types;
  if (const gguf::Value* t = (*f)->find("tokenizer.ggml.token_type")) types = t->ints();
  std::vector<std::string> bytes(pieces.size());
  std::vector<int32_t> special, stop;
  const std::vector<int> inv = gpt2_unicode_to_byte();
  for (size_t i = 0; i < pieces.size(); ++i) {
    const std::string& p = pieces[i];
    const int64_t type = i < types.size() ? types[i] : 1;
    const auto id = static_cast<int32_t>(i);
    bool control = type == 2 || type == 3 || type == 5;
    if (p == "</s>" || p == "<|endoftext|>" || p == "<|user|>" || p == "<|observation|>") {
      stop.push_back(id);
      continue;
    }
    if (control ||
        (p.size() > 2 && p.front() == '<' && p.back() == '>' && p.find('|') != std::string::npos)) {
      special.push_back(id);
      continue;
    }
    std::string out;
    if (kind == "chatglm3") {
      if (type == 6 && p.size() == 6 && p.rfind("<0x", 0) == 0) {
        out.push_back(static_cast<char>(std::stoi(p.substr(3, 2), nullptr, 16)));
      } else {
        for (size_t k = 0; k < p.size();) {
          if (p.compare(k, 3, "\xE2\x96\x81") == 0) {
            out += ' ';
            k += 3;
          } else {
            out += p[k++];
          }
        }
      }
    } else {
      // Decode the UTF-8 of the piece; each code point stands for one byte.
      for (size_t k = 0; k < p.size();) {
        auto c = static_cast<unsigned char>(p[k]);
        uint32_t cp;
        int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
        for (int j = 1; j < n && k + static_cast<size_t>(j) < p.size(); ++j) {
          cp = (cp << 6) | (static_cast<unsigned char>(p[k + static_cast<size_t>(j)]) & 0x3F);
        }
        k += static_cast<size_t>(n);
        if (cp < inv.size() && inv[cp] >= 0) {
          out.push_back(static_cast<char>(inv[cp]));
        } else {
          out.clear();  // not a byte-level piece (added token): keep it out of text
          special.push_back(id);
          break;
        }
      }
    }
    bytes[i] = std::move(out);
  }
  auto v = TokenVocab::create(std::move(bytes), stop, special);
  if (!v.ok()) return v.status();
  return LoadedVocab{*v, stop};
}

}  // namespace glm::grammar::testing
