// The engine's side of constrained decoding: the grammar vocabulary of a tokenizer, and the
// compilation of a generation::Constraint into a grammar and a started Matcher.
// Pure functions; thread-safe. Cost: build_token_vocab once per engine (~30-130 ms, see
// grammar/vocab.h); compile_constraint ~0.1-1 ms per request for typical schemas.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "generation/constraint.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/vocab.h"
#include "tokenizer/tokenizer.h"

namespace glm::engine {

// Every id below n_vocab (the model's, which may exceed the tokenizer's) with the raw bytes it
// adds to the output (Tokenizer::token_bytes: SentencePiece '▁' is a space, <0xNN> one byte,
// byte-level BPE decoded). Control tokens are never allowed, except `stop_ids` (the chat
// template's), which end the answer where the grammar is complete. Ids beyond the tokenizer
// are empty (never allowed). Null (logged) only if the vocabulary cannot be built.
std::shared_ptr<const grammar::TokenVocab> build_token_vocab(const tok::Tokenizer& tokenizer,
                                                             int n_vocab,
                                                             const std::vector<int32_t>& stop_ids);

// kInvalidArgument naming the part: "constraint: invalid GBNF grammar: line 1, column 9: ...",
// "constraint: JSON schema #/properties/tags: keyword 'uniqueItems' is not supported".
// `chat_template` (ChatTemplate::name()) decides the spelling of a tool call (kToolCall):
//   glm4:     NAME "\n" JSON-arguments
//   chatglm3: NAME "\n```python\ntool_call(" keyword-arguments ")\n```"
//   glm45:    "<tool_call>" NAME "\n" ("<arg_key>" K "</arg_key>\n<arg_value>" V
//             "</arg_value>\n")* "</tool_call>" (V: a string property's text, else JSON)
//   glm47:    as glm45 without its newlines (GLM-4.7's format)
// other templates have no tool format (kUnsupported).
StatusOr<grammar::Grammar> compile_constraint(const generation::Constraint& constraint,
                                              const std::string& chat_template);

// A Matcher at the start of `grammar`, refused (kInvalidArgument) when not even the first
// token can be spelled with this vocabulary (so such a request never runs). Computes the first
// mask, which the matcher caches for the first step.
StatusOr<std::unique_ptr<grammar::Matcher>> start_matcher(
    grammar::Grammar grammar, std::shared_ptr<const grammar::TokenVocab> vocab);

}  // namespace glm::engine
