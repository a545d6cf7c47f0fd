// A made-up vocabulary for generated models when no real tokenizer is given: llama.cpp's "llama"
// (SentencePiece) type, so llama.cpp and glmserve both load it and any text tokenizes (byte
// fallback). Layout: 0 <unk>, 1 <bos> / <s>, 2 <eos> / </s>, 3..258 the byte tokens <0x00>..<0xFF>,
// then pieces (single characters, "▁x", letter pairs and triples, scores decreasing), then the
// family's special tokens (ChatGLM2/3: [MASK] [gMASK] [sMASK] sop eop <|system|> <|user|>
// <|assistant|> <|observation|>; GLM-4: its 14 specials; at the real ids 64789 / 151329 when the
// vocabulary has the real size), then [PADn] (UNUSED) up to n_vocab. The chat template of the
// family is included, so every chat-template token exists.
// ChatGLM-6B (chatglm1) is a unigram ("t5") vocabulary instead, in the id layout of its
// ice_text.model (synthetic_vocab.cc); its chat format needs no template text.
// Pure function; thread-safe.
#pragma once

#include <cstdint>

#include "convert/model_spec.h"
#include "core/status.h"
#include "tokenizer/vocab_convert.h"

namespace glm::convert {

// invalid_argument if n_vocab is too small to hold bytes, specials and a few pieces (< 300).
StatusOr<tok::VocabSpec> synthetic_vocab(Family arch, int64_t n_vocab);

}  // namespace glm::convert
