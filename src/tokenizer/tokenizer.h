// Tokenizers of the GLM family and LLaMA, built from a GGUF vocabulary:
// SentencePiece-style BPE with byte fallback ("llama": ChatGLM2/3, stories), SentencePiece
// unigram ("t5": ChatGLM-6B, whose pre "chatglm1" adds its <n> / <|tab|> / <|blank_N|> text
// rules, reversed on decode) and byte-level BPE ("gpt2": GLM-4). Immutable after
// construction: thread-safe for concurrent encode/decode.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "gguf/gguf.h"

namespace glm::tok {

struct VocabSpec;  // tokenizer/vocab_convert.h

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Reads tokenizer.ggml.* from the file; a clear error if absent or inconsistent.
  static StatusOr<std::unique_ptr<Tokenizer>> from_gguf(const gguf::File& file);
  // Same from a vocabulary in memory (e.g. read_tokenizer_model()). Cost: builds lookup tables
  // (~50 ms for GLM-4's 151k tokens and 318k merges). `label` names the source in errors.
  static StatusOr<std::unique_ptr<Tokenizer>> from_spec(const VocabSpec& spec,
                                                        const std::string& label = "vocab");

  // Plain text -> ids, no prefix tokens. With allow_special, the text of control tokens
  // ("<|user|>") becomes their id; otherwise it is tokenized as ordinary text.
  virtual std::vector<int32_t> encode(std::string_view text, bool allow_special = false) const = 0;
  // Ids -> text (control tokens render as their text when render_special, else nothing).
  virtual std::string decode(const std::vector<int32_t>& ids,
                             bool render_special = false) const = 0;
  // Raw bytes of one token as it contributes to the output stream (byte-fallback tokens give
  // one byte; the SentencePiece space marker becomes ' ').
  virtual std::string token_bytes(int32_t id) const = 0;
  // token_bytes() of a token that starts the output: SentencePiece drops the space of the
  // dummy prefix there ("▁Hello" -> "Hello"), as decode() does for the first text token.
  virtual std::string token_bytes_at_start(int32_t id) const { return token_bytes(id); }
  virtual int n_vocab() const = 0;
  // Id of a token by its exact text ("<|user|>"), or -1.
  virtual int32_t find(std::string_view piece) const = 0;
  virtual bool is_control(int32_t id) const = 0;
  virtual int32_t bos_id() const = 0;  // -1 if none
  virtual int32_t eos_id() const = 0;
  // "llama" (SentencePiece BPE), "t5" (SentencePiece unigram) or "gpt2" (byte-level BPE).
  virtual const char* kind() const { return ""; }
};

// True for the tags that answers are read by (reasoning: <think> </think>; GLM-4.5's tool calls:
// <tool_call> <arg_key> <arg_value> <tool_response> and their closing tags). A vocabulary's
// tokens with these texts are never control tokens: they decode as text (where the readers see
// them) and a grammar may spell them.
bool is_answer_tag(std::string_view text);

// Turns a stream of generated ids into text pieces that are whole UTF-8 characters, never to be
// taken back: concatenating every push() and the final flush() equals decode(all ids).
// One per generation; not thread-safe.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer);
  // Text ready to emit after this token (may be empty while a character is incomplete).
  std::string push(int32_t id);
  // Whatever remains at the end (incomplete bytes become U+FFFD).
  std::string flush();
  // The stream continues earlier text (a raw prompt): the first token keeps its leading space,
  // as if decode() had seen the prompt before it. Call before the first push().
  void set_continuation() { first_ = false; }
  // True until the first text token: the next one's bytes are token_bytes_at_start().
  bool at_start() const { return first_; }
  // Drops the whitespace before the first other character (ChatGLM3 / GLM-4 answers start with
  // "\n"; HF's process_response strips it; see ChatTemplate::strips_answer_whitespace()).
  // The pieces then concatenate to decode(all) without its leading whitespace.
  void set_strip_leading_whitespace(bool on) { strip_ws_ = on; }

 private:
  const Tokenizer& tok_;
  std::string pending_;    // bytes of an unfinished UTF-8 character
  bool first_ = true;      // no text token seen yet (the leading-space rule applies)
  bool strip_ws_ = false;  // still dropping leading whitespace

  std::string strip(std::string s);
};

}  // namespace glm::tok
