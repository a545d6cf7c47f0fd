// Internal: the parts both tokenizers share (vocabulary tables, special-token splitting, decode)
// and the two implementations. Users include tokenizer.h and call Tokenizer::from_gguf.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_convert.h"

namespace glm::tok {

// Transparent string hash so that maps keyed by std::string accept string_view lookups.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// Finds special-token texts in a string (longest match at the leftmost position).
class SpecialMatcher {
 public:
  void add(const std::string& text, int32_t id);
  // Calls on_text(string_view) for ordinary text between specials and on_special(id) for each
  // special found, in order.
  template <typename OnText, typename OnSpecial>
  void split(std::string_view text, OnText&& on_text, OnSpecial&& on_special) const {
    size_t start = 0;
    for (size_t i = 0; i < text.size();) {
      const uint8_t b = static_cast<uint8_t>(text[i]);
      const auto& cands = by_first_[b];
      bool hit = false;
      for (const auto& [s, id] : cands) {  // longest first
        if (text.compare(i, s.size(), s) == 0) {
          if (i > start) on_text(text.substr(start, i - start));
          on_special(id);
          i += s.size();
          start = i;
          hit = true;
          break;
        }
      }
      if (!hit) ++i;
    }
    if (start < text.size()) on_text(text.substr(start));
  }
  bool empty() const { return n_ == 0; }

 private:
  std::array<std::vector<std::pair<std::string, int32_t>>, 256> by_first_;
  int n_ = 0;
};

// SentencePiece vocabularies (the spm and ugm tokenizers): the word-boundary marker U+2581 "▁",
// the length of the UTF-8 character at s[i] (1 for an invalid or truncated sequence), and the
// byte of a "<0xNN>" piece (-1 if it is not one).
inline constexpr std::string_view kSpaceMarker = "\xe2\x96\x81";
size_t utf8_char_len(std::string_view s, size_t i);
int parse_byte_piece(std::string_view piece);

class VocabTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool allow_special) const override;
  std::string decode(const std::vector<int32_t>& ids, bool render_special) const override;
  int n_vocab() const override { return static_cast<int>(tokens_.size()); }
  int32_t find(std::string_view piece) const override;
  bool is_control(int32_t id) const override;
  int32_t bos_id() const override { return bos_; }
  int32_t eos_id() const override { return eos_; }

 protected:
  // Validates sizes and fills the shared tables; call from the subclass factory.
  Status init(const VocabSpec& spec, const std::string& label);
  // Tokenizes ordinary text (no specials). `after_special` is true at the start of the text and
  // right after a special token (SentencePiece adds its dummy prefix there).
  virtual void encode_text(std::string_view text, bool after_special,
                           std::vector<int32_t>* out) const = 0;
  bool valid(int32_t id) const { return id >= 0 && id < static_cast<int32_t>(tokens_.size()); }
  // True for the pieces that spell text (normal, user-defined, undefined), not bytes, control,
  // unused or unknown ones.
  bool is_text_piece(int32_t id) const;
  // A SentencePiece piece's surface: <0xNN> its byte, control and unused nothing, unknown
  // sentencepiece's " ⁇ ", a text piece with each "▁" a space.
  std::string sentencepiece_bytes(int32_t id) const;
  // The same at the start of a text: a text piece's leading "▁" is the dummy prefix's, which
  // decoding drops when the vocabulary adds one (`add_space_prefix`).
  std::string sentencepiece_bytes_at_start(int32_t id, bool add_space_prefix) const;

  std::vector<std::string> tokens_;  // as stored in the GGUF
  std::vector<int32_t> types_;
  StringMap index_;  // token text -> first id with that text
  SpecialMatcher specials_;
  int32_t bos_ = -1, eos_ = -1, unk_ = -1;
};

// SentencePiece BPE with byte fallback ("llama").
class SpmTokenizer final : public VocabTokenizer {
 public:
  static StatusOr<std::unique_ptr<Tokenizer>> create(const VocabSpec& spec,
                                                     const std::string& label);
  std::string token_bytes(int32_t id) const override;
  std::string token_bytes_at_start(int32_t id) const override;
  const char* kind() const override { return "llama"; }

 private:
  void encode_text(std::string_view text, bool after_special,
                   std::vector<int32_t>* out) const override;
  void encode_word(std::string_view word, std::vector<int32_t>* out) const;

  StringMap mergeable_;  // NORMAL / USER_DEFINED pieces -> id
  std::vector<float> scores_;
  std::array<int32_t, 256> byte_ids_{};  // <0xNN> -> id, -1 if absent
  bool add_space_prefix_ = true;
  bool split_words_ = true;  // no mergeable piece has "x▁" inside: words are independent
};

// SentencePiece unigram ("t5"), with ChatGLM-6B's text rules when pre is "chatglm1"
// (ugm_tokenizer.cc describes the algorithm).
class UgmTokenizer final : public VocabTokenizer {
 public:
  static StatusOr<std::unique_ptr<Tokenizer>> create(const VocabSpec& spec,
                                                     const std::string& label);
  std::string token_bytes(int32_t id) const override;
  std::string token_bytes_at_start(int32_t id) const override;
  const char* kind() const override { return "t5"; }

 private:
  void encode_text(std::string_view text, bool after_special,
                   std::vector<int32_t>* out) const override;
  // sentencepiece's normalizer: charsmap, whitespace rules, "▁", the dummy prefix.
  std::string normalize(std::string_view text, bool dummy_prefix) const;
  // Longest charsmap entry at s[i]: its length in bytes (0 if none), its replacement in *out.
  size_t charsmap_match(std::string_view s, size_t i, std::string_view* out) const;
  // pre "chatglm1": the text of <n>, <|tab|>, <|blank_N|>; nullopt for other tokens.
  std::optional<std::string> chatglm1_whitespace(int32_t id) const;

  StringMap pieces_;  // NORMAL / USER_DEFINED pieces -> id (the Viterbi candidates)
  std::array<std::vector<std::string>, 256> user_defined_;  // by first byte, longest first
  std::vector<float> scores_;
  std::array<int32_t, 256> byte_ids_{};  // <0xNN> -> id, -1 if absent
  size_t max_piece_bytes_ = 1;
  float min_score_ = 0, max_score_ = 0;  // over NORMAL pieces
  bool add_space_prefix_ = true;
  bool remove_extra_ws_ = false;
  bool chatglm1_ = false;       // pre "chatglm1": <n>, <|tab|>, <|blank_N|>
  std::vector<uint32_t> trie_;  // precompiled charsmap: darts-clone units
  std::string normalized_;      // its replacement strings, NUL-terminated
};

// ChatGLM-6B's text rules before SentencePiece (HF SPTokenizer._preprocess): "\n" -> "<n>",
// "\t" -> "<|tab|>", a run of 2..80 spaces -> "<|blank_N|>" (longer runs: 80 at a time from the
// left, a single space left over stays a space).
std::string chatglm1_preprocess(std::string_view text);

// Byte-level BPE with GLM-4's pre-tokenizer ("gpt2").
class BpeTokenizer final : public VocabTokenizer {
 public:
  static StatusOr<std::unique_ptr<Tokenizer>> create(const VocabSpec& spec,
                                                     const std::string& label);
  std::string token_bytes(int32_t id) const override;
  const char* kind() const override { return "gpt2"; }

 private:
  void encode_text(std::string_view text, bool after_special,
                   std::vector<int32_t>* out) const override;
  void encode_piece(std::string_view piece, std::vector<int32_t>* out) const;

  struct MergeInfo {
    int32_t rank;
    int32_t id;
  };
  std::vector<std::string> bytes_;                  // id -> raw bytes (NORMAL tokens)
  StringMap raw_index_;                             // raw bytes -> id (NORMAL tokens)
  std::unordered_map<uint64_t, MergeInfo> merges_;  // (left id << 32 | right id) -> result
  std::array<int32_t, 256> byte_ids_{};

  // Per-piece cache of results (bounded; cleared when full). Guarded by cache_mu_.
  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace glm::tok
