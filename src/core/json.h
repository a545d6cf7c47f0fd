// The one door for JSON that comes from outside: HTTP bodies, engine socket lines, config and
// tokenizer files, safetensors headers. Limits are applied before a single node is built: the
// text's size, and its nesting depth (a linear scan outside strings; nlohmann's parser and
// destructor recurse per level, so 100,000 nested brackets would overflow the stack).
// Pure; thread-safe. Cost: one pass over the text plus the parse.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/status.h"

namespace glm {

struct JsonLimits {
  size_t max_bytes = 64u << 20;
  int max_depth = 64;  // nesting of objects and arrays
};

// Maximum nesting depth of `text`'s brackets outside strings; stops scanning past `limit`.
int json_nesting_depth(std::string_view text, int limit);

// kInvalidArgument for text over the limits ("JSON nested deeper than 64 levels") or not JSON
// ("<what> is not valid JSON"); `what` names the input in messages ("the request body").
StatusOr<nlohmann::json> parse_json(std::string_view text, const char* what,
                                    const JsonLimits& limits = {});
// The same, keeping the keys in the order they came (tool schemas, chat templates).
StatusOr<nlohmann::ordered_json> parse_ordered_json(std::string_view text, const char* what,
                                                    const JsonLimits& limits = {});

// How many texts this thread has parsed with the two functions above: tests count them to show
// that a request is parsed once on its way through the layers.
int64_t json_parses();

// `j` as text; invalid UTF-8 in strings becomes U+FFFD instead of throwing (model output and
// client text can hold any bytes). indent -1 = one line.
template <class Json>
std::string dump_json(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

// `bytes` as a JSON array of numbers 0-255: a token's bytes may end inside a UTF-8 character,
// which a JSON string cannot hold (the protocol's and OpenAI's logprob `bytes`).
nlohmann::json json_byte_array(std::string_view bytes);

}  // namespace glm
