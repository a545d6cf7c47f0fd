// OpenAI's shapes of token log-probabilities, from the engine's entries (generation/logprobs.h):
// chat completions' `choices[].logprobs` ({"content":[{token, logprob, bytes, top_logprobs}],
// "refusal":null}) and legacy completions' (`tokens`, `token_logprobs`, `top_logprobs` as
// token -> logprob maps, `text_offset`). A token that ends inside a UTF-8 character shows
// U+FFFD in `token`; `bytes` has its exact bytes. Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "generation/logprobs.h"

namespace glm::api {

// {"content":[...],"refusal":null}; `entries` may be empty (a chunk without tokens).
nlohmann::json chat_logprobs_json(const std::vector<generation::GeneratedLogprobs>& entries);

// The legacy shape; text offsets count bytes of the answer's text from `text_offset` (the
// length of an echoed prompt, or 0).
nlohmann::json completion_logprobs_json(const std::vector<generation::GeneratedLogprobs>& entries,
                                        size_t text_offset);

}  // namespace glm::api
