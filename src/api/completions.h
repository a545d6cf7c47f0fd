// OpenAI legacy completions (POST /v1/completions,
// https://platform.openai.com/docs/api-reference/completions): a prompt continued as plain
// text, without the chat template (the engine's raw requests). Parsing and the response and
// chunk shapes; JSON stays here, at the HTTP edge. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "protocol/protocol.h"

namespace glm::api {

struct CompletionRequest {
  protocol::Request request;  // kGenerate, raw, id assigned by the caller
  std::string model;
  bool stream = false;
  bool include_usage = false;
  bool echo = false;  // the answer's text starts with the prompt
};

// `prompt` (a string, or an array of one string), `max_tokens` (default 16, as OpenAI's),
// `temperature`, `top_p`, `stop`, `seed`, ... (the one sampling mapping), `stream`,
// `stream_options.include_usage`, `echo`, `logprobs` (0..5 alternatives). Refused with a 400
// naming the field: several prompts or token-id prompts, `suffix` (no fill-in-the-middle
// model), `best_of`, `echo` with `logprobs` (no prompt log-probabilities). `n` (1-128): that
// many completions of the prompt, prefilled once (docs/protocol.md#choices).
StatusOr<CompletionRequest> parse_completion_request(const std::string& body);

// One `text_completion` chunk (streaming) or the whole object; an empty `finish_reason` writes
// null. With `logprobs`, the choice carries them in the legacy shape, text offsets counted from
// `text_offset` (the bytes of the answer before this chunk).
std::string completion_chunk_text_json(
    const std::string& id, int64_t created, const std::string& model, const std::string& text,
    const std::string& finish_reason,
    const std::vector<generation::GeneratedLogprobs>* logprobs = nullptr, size_t text_offset = 0,
    int index = 0);
std::string text_completion_json(
    const std::string& id, int64_t created, const std::string& model, const std::string& text,
    const std::string& finish_reason, const protocol::Usage& usage,
    const std::vector<generation::GeneratedLogprobs>* logprobs = nullptr);
// Several choices (n > 1), `index` in order; usage covers them all.
struct TextChoiceOut {
  std::string text;
  std::string finish_reason;
  const std::vector<generation::GeneratedLogprobs>* logprobs = nullptr;
};
std::string text_completion_json(const std::string& id, int64_t created, const std::string& model,
                                 const std::vector<TextChoiceOut>& choices,
                                 const protocol::Usage& usage);

}  // namespace glm::api
