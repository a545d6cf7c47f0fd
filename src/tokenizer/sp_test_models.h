// Test helper (not part of the library): SentencePiece ModelProto files written by hand, so that
// tests hold vocabularies whose ids follow from the rules by hand: a minimal protobuf writer,
// unigram_proto(), and the pieces of ChatGLM-6B's ice_text.model layout (its specials, tab and
// blank tokens, bytes) after a few text pieces. Used by the tokenizer's and convert's tests.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab_convert.h"

namespace glm::tok::testing {

inline void put_varint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

inline void put_bytes(std::string* out, uint32_t field, std::string_view b) {
  put_varint(out, (field << 3) | 2);
  put_varint(out, b.size());
  out->append(b);
}

struct Piece {
  std::string text;
  float score;
  int type;  // TokenType values = sentencepiece's piece types
};

inline std::string piece_message(const Piece& p) {
  std::string m;
  put_bytes(&m, 1, p.text);
  put_varint(&m, (2 << 3) | 5);
  uint32_t bits;
  std::memcpy(&bits, &p.score, 4);
  for (int i = 0; i < 4; ++i) m.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  put_varint(&m, (3 << 3) | 0);
  put_varint(&m, static_cast<uint64_t>(p.type));
  return m;
}

// A unigram ModelProto: pieces, trainer_spec {model_type UNIGRAM, byte_fallback},
// normalizer_spec {name identity, add_dummy_prefix, remove_extra_whitespaces}.
inline std::string unigram_proto(const std::vector<Piece>& pieces) {
  std::string out;
  for (const Piece& p : pieces) put_bytes(&out, 1, piece_message(p));
  std::string trainer;
  put_varint(&trainer, (3 << 3) | 0);
  put_varint(&trainer, 1);  // UNIGRAM
  put_varint(&trainer, (35 << 3) | 0);
  put_varint(&trainer, 1);  // byte_fallback
  put_bytes(&out, 2, trainer);
  std::string norm;
  put_bytes(&norm, 1, "identity");
  put_varint(&norm, (3 << 3) | 0);
  put_varint(&norm, 1);
  put_varint(&norm, (4 << 3) | 0);
  put_varint(&norm, 1);
  put_bytes(&out, 3, norm);
  return out;
}

// ChatGLM-6B's pieces after the text pieces, in the real file's order: its 8 specials, the
// tab and blank tokens (USER_DEFINED), the 256 byte tokens.
inline void append_v1_pieces(std::vector<Piece>* p) {
  for (const char* s :
       {"[MASK]", "[gMASK]", "[sMASK]", "<unused_0>", "<sop>", "<eop>", "<ENC>", "<dBLOCK>"}) {
    p->push_back({s, 0.0f, kTokenControl});
  }
  p->push_back({"<|tab|>", 0.0f, kTokenUserDefined});
  for (int n = 2; n <= 80; ++n) {
    p->push_back({"<|blank_" + std::to_string(n) + "|>", 0.0f, kTokenUserDefined});
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    p->push_back({name, 0.0f, kTokenByte});
  }
}

// 0 <unk> 1 <s> 2 </s> 3 <pad> 4 <n> 5 ▁ 6 a 7 b 8 ab 9 ▁a 10 c, then the v1 pieces at 11...
inline std::vector<Piece> small_v1_pieces() {
  std::vector<Piece> p = {{"<unk>", 0, kTokenUnknown},
                          {"<s>", 0, kTokenControl},
                          {"</s>", 0, kTokenControl},
                          {"<pad>", 0, kTokenControl},
                          {"<n>", 0, kTokenUserDefined},
                          {"\xe2\x96\x81", -1.0f, kTokenNormal},
                          {"a", -2.0f, kTokenNormal},
                          {"b", -2.0f, kTokenNormal},
                          {"ab", -3.0f, kTokenNormal},
                          {"\xe2\x96\x81"
                           "a",
                           -2.5f, kTokenNormal},
                          {"c", -2.0f, kTokenNormal}};
  append_v1_pieces(&p);
  return p;
}

}  // namespace glm::tok::testing
