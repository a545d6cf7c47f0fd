// The one generation request and its message: defined once here, carried unchanged from the API
// routes through the socket protocol (protocol::Request embeds it, adding the request's id and
// type) to the engine (engine::Request embeds it, adding the engine's id). Adding a field means
// this definition, its wire form (protocol/request.cc) and its uses; no layer copies it field by
// field. Thread-compatible value types.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "generation/constraint.h"
#include "generation/sampling.h"

namespace glm::generation {

// A parsed JSON value, immutable and shared by the copies of what holds it (a request's tools:
// parsed once, then carried and copied for the cost of a pointer). Empty = none (null, [] or {}).
// Thread-safe to read from any thread.
class SharedJson {
 public:
  SharedJson() = default;
  SharedJson(nlohmann::ordered_json value)  // NOLINT(google-explicit-constructor): a JSON value
      : value_(std::make_shared<const nlohmann::ordered_json>(std::move(value))) {}
  bool empty() const { return value_ == nullptr || value_->empty(); }
  // The value (JSON null when none was set).
  const nlohmann::ordered_json& operator*() const;
  const nlohmann::ordered_json* operator->() const { return &**this; }

 private:
  std::shared_ptr<const nlohmann::ordered_json> value_;
};

// One chat message, as the chat templates render it.
struct Message {
  std::string role;  // system, user, assistant, observation
  std::string content;
  std::string metadata;  // ChatGLM3 / GLM-4 metadata line: the tool an assistant message calls
  // system only: the tool definitions, an array of function objects ({"name", "description",
  // "parameters"}) in the client's key order, parsed (null = none). ChatGLM3 appends them to the
  // system content pretty-printed with 4 spaces (HF build_chat_input), after its standard tool
  // sentence when the content is empty; GLM-4 writes its tool system prompt (glm4_tools_prompt).
  // Requests carry their tools in GenerateRequest::tools; the engine puts them here.
  SharedJson tools;
  // assistant only: a tool call's arguments as JSON object text, `metadata` naming the function.
  // Written as the model writes calls: ChatGLM3 a "```python\ntool_call(k=v)\n```" block,
  // GLM-4 the JSON text itself.
  std::string arguments;
};

struct GenerateRequest {
  std::string conversation;  // optional: KV reuse across the turns of one conversation
  // The adapter to run with (docs/adapters.md): a name the engine serves (serve --adapter
  // NAME=PATH), or "BASE:NAME" with the engine's model name as BASE; empty = the bare model.
  // An unknown name is not_found naming the served ones.
  std::string adapter;
  // The name the client gave the model (OpenAI's `model`), where `adapter` is empty: an adapter
  // the engine serves under exactly this name runs the request; any other name, the bare model
  // (clients name whatever model they like). The engine answers this itself: the gateway asks
  // nothing before a request (docs/adapters.md).
  std::string model;
  std::vector<Message> messages;  // rendered with the model's chat template
  // The template's enable_thinking (chat_template_kwargs; tok::TemplateOptions): false makes a
  // hybrid reasoning model (GLM-4.5) answer without thinking. Templates without it ignore it.
  bool enable_thinking = true;
  bool raw = false;       // true: `prompt` is plain text, no template
  std::string prompt;     // only with raw
  SamplingParams params;  // absent fields on the wire: SamplingParams' defaults
  // Grammar-constrained output (docs/grammar.md): compiled at submit; the answer's text is then
  // a sentence of the grammar (or its prefix, when max_tokens cuts it: finish_reason length).
  Constraint constraint;
  // The functions the model may call: a JSON array of function objects
  // ({"name","description","parameters"}) in the client's key order, as parsed once from the
  // client's body or the request line and carried parsed from there (null or [] = none). The
  // engine writes them into the prompt in its chat template's tool format (a system message of
  // its own, first).
  SharedJson tools;
  // With tools: every call of an answer that makes several (GLM-4.5 writes them one after
  // another), or only its first (false: OpenAI's parallel_tool_calls false, Anthropic's
  // disable_parallel_tool_use). ChatGLM3 and GLM-4 make one call a turn either way.
  bool parallel_tool_calls = true;
  // Resume (docs/protocol.md#resume): the token ids an earlier run of this same request
  // generated (the token events' `tokens`, in order), when the engine died mid-answer. They
  // are prefilled after the prompt and not sent again; the answer goes on as the
  // uninterrupted run would have (same text at temperature 0, and with a fixed seed: the
  // sampler's RNG skips their draws). Empty = a fresh run.
  std::vector<int32_t> resume;
  // Choices (docs/engine.md#choices): n > 1 answers to the same prompt, prefilled once and
  // decoded together. Choice i samples with params.seed + i (when a seed is set), so it equals
  // the answer of a single request with that seed. 1 to protocol::kMaxChoices on the wire; at
  // most the engine's batch; not with `resume`; no conversation is saved for such a request.
  int n = 1;
};

// The names of `functions` (a JSON array of function objects), in order; entries without a
// string name are skipped (requests are validated before). What an answer is read for calls with.
std::vector<std::string> tool_names(const nlohmann::ordered_json& functions);

}  // namespace glm::generation
