// Turning a model's tokenizer file into a GGUF vocabulary (the tokenizer.ggml.* keys), in the
// layout llama.cpp's converter writes, so that our files load in llama.cpp and theirs in ours.
// Used by `glmserve gen-model --vocab FILE` and `glmserve convert`.
//
// Formats, sniffed from the bytes:
//  - SentencePiece model protobuf (ChatGLM2/ChatGLM3 tokenizer.model, LLaMA): model "llama",
//    pre "chatglm-spm" when the 9 ChatGLM specials are added (the file has 64789 pieces), the
//    pieces with their scores and types, `<s>`/`</s>` renamed `<bos>`/`<eos>` as llama.cpp's
//    chatglm converter does, then [MASK] [gMASK] [sMASK] sop eop <|system|> <|user|>
//    <|assistant|> <|observation|> as CONTROL, then [PADn] UNUSED up to 65024.
//  - A SentencePiece *unigram* model (ChatGLM-6B's ice_text.model): model "t5" (llama.cpp's name
//    for the unigram type), the pieces as they are; when the pieces hold ChatGLM-6B's whitespace
//    tokens and specials (<n>, <|tab|>, <|blank_2..80|>, [gMASK], <sop>, <eop>), pre "chatglm1"
//    (its text rules, see tokenizer.h), eos <eop>, bos <sop>, and the real file's 130344 pieces
//    padded with [PADn] to 130528; its normalization charsmap (if any) is kept.
//  - tiktoken base64 ranks (GLM-4 tokenizer.model): model "gpt2", pre "chatglm-bpe", the ranks
//    as GPT-2 byte-to-unicode strings, the 14 GLM-4 specials (CONTROL), [PADn] up to 151552, and
//    the merges derived from the ranks (every split of a token into two vocabulary tokens,
//    ordered by the token's rank then by the ranks of the parts: transformers'
//    TikTokenConverter).
// Functions are pure (no global state); thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/gguf.h"

namespace glm::tok {

// The real vocabularies' sizes and the specials they add (CONTROL tokens, in id order): ChatGLM2/3
// after its kChatGlmPieces SentencePiece pieces, GLM-4 after its kGlm4Ranks tiktoken ranks. The
// synthetic vocabularies of `gen-model` (convert/synthetic_vocab.h) take the same.
inline constexpr int kChatGlmPieces = 64789;
inline constexpr int kChatGlmVocab = 65024;
inline constexpr const char* kChatGlmSpecials[] = {"[MASK]",   "[gMASK]",       "[sMASK]",
                                                   "sop",      "eop",           "<|system|>",
                                                   "<|user|>", "<|assistant|>", "<|observation|>"};
inline constexpr int kGlm4Ranks = 151329;
inline constexpr int kGlm4Vocab = 151552;
inline constexpr const char* kGlm4Specials[] = {"<|endoftext|>",
                                                "[MASK]",
                                                "[gMASK]",
                                                "[sMASK]",
                                                "<sop>",
                                                "<eop>",
                                                "<|system|>",
                                                "<|user|>",
                                                "<|assistant|>",
                                                "<|observation|>",
                                                "<|begin_of_image|>",
                                                "<|end_of_image|>",
                                                "<|begin_of_video|>",
                                                "<|end_of_video|>"};

// GGUF token types (llama.cpp's llama_token_type values).
enum TokenType : int32_t {
  kTokenUndefined = 0,
  kTokenNormal = 1,
  kTokenUnknown = 2,
  kTokenControl = 3,
  kTokenUserDefined = 4,
  kTokenUnused = 5,
  kTokenByte = 6,
};

// A vocabulary ready to be written as tokenizer.ggml.* metadata. Plain value type.
struct VocabSpec {
  std::string model;  // "llama" (SentencePiece BPE), "t5" (SentencePiece unigram), "gpt2"
  std::string pre;    // "chatglm-spm", "chatglm-bpe", "chatglm1", or empty (not written)
  std::vector<std::string> tokens;  // id -> piece text (gpt2: byte-to-unicode form)
  std::vector<float> scores;        // per token; empty = not written (gpt2)
  std::vector<int32_t> types;       // per token, TokenType
  std::vector<std::string> merges;  // gpt2 only: "left right", highest priority first
  int32_t bos = -1;                 // -1 = key not written
  int32_t eos = -1;
  int32_t pad = -1;
  int32_t unk = -1;
  int32_t eot = -1;
  std::string chat_template;     // tokenizer.chat_template (empty = not written)
  bool add_bos = false;          // tokenizer.ggml.add_bos_token
  bool write_add_bos = true;     // whether to write tokenizer.ggml.add_bos_token at all
  bool add_space_prefix = true;  // SentencePiece dummy prefix ("llama"); written only if false
  // "t5" (unigram): strip leading/trailing spaces and collapse runs of spaces before
  // tokenizing, as sentencepiece's normalizer does (written only if true).
  bool remove_extra_whitespaces = false;
  // "t5": sentencepiece's precompiled normalization charsmap (bytes; empty = identity), as
  // llama.cpp's tokenizer.ggml.precompiled_charsmap (a u8 array).
  std::string precompiled_charsmap;
};

// Reads a tokenizer file (SentencePiece protobuf or tiktoken base64; see above) into the layout
// llama.cpp's converter writes for ChatGLM2/3 and GLM-4. Cost: parses the file; for tiktoken,
// derives ~318k merges (about a second). bad_file with a hint on an unknown format.
StatusOr<VocabSpec> read_tokenizer_model(const std::string& path);
// Same from bytes in memory (`label` names the source in messages).
StatusOr<VocabSpec> parse_tokenizer_model(const std::string& bytes, const std::string& label);

// An HF tokenizer.json of byte-level BPE (GLM-4-0414 / GLM-Z1 ship only this file): tokens by
// id (gaps padded as unused), its merges in order, added tokens as control (special) or
// user-defined, pre "glm4", eos/pad/unk <|endoftext|>, eot <|user|> (llama.cpp's converter).
// Cost: parses the JSON (~7 MB for GLM-4). bad_file/unsupported naming what is wrong.
// (hf_tokenizer_json.cc)
StatusOr<VocabSpec> parse_hf_tokenizer_json(const std::string& text, const std::string& label);

// Turns the ChatGLM3 layout of read_tokenizer_model() into ChatGLM2's: the same pieces, but only
// the 5 specials [MASK] [gMASK] [sMASK] sop eop (HF's ChatGLM2 tokenizer), the rest padding, no
// chat template. The chat template is then chosen as "chatglm2" ([Round N] prompts).
// invalid_argument if `spec` is not the ChatGLM3 layout.
Status to_chatglm2_vocab(VocabSpec* spec);

// Writes the tokenizer.ggml.* keys (and tokenizer.chat_template) of `spec` into `writer`, in
// llama.cpp's order and with its value types. Does not write general.* or architecture keys.
void write_vocab(const VocabSpec& spec, gguf::Writer* writer);

// Reads a VocabSpec back from GGUF metadata (inverse of write_vocab). bad_file if the tokenizer
// keys are absent or inconsistent (array lengths differ, ids out of range).
StatusOr<VocabSpec> read_vocab(const gguf::File& file);

// GPT-2's reversible byte <-> printable-unicode mapping used for byte-level BPE tokens.
// byte_to_unicode(b) is the UTF-8 of the code point standing for byte b.
const std::string& byte_to_unicode(uint8_t b);
// Inverse: UTF-8 form of one mapped code point -> byte; -1 if not a mapped code point.
int unicode_to_byte(uint32_t code_point);

}  // namespace glm::tok
