#include "api/completions.h"

#include <nlohmann/json.hpp>

#include "api/logprobs.h"
#include "api/openai.h"
#include "core/json.h"
#include "protocol/sampling_json.h"

namespace glm::api {
namespace {

using json = nlohmann::json;

Status bad(const std::string& message) { return invalid_argument(message); }

json choice_json(const std::string& text, const std::string& finish_reason,
                 const std::vector<generation::GeneratedLogprobs>* logprobs, size_t text_offset,
                 int index) {
  return {
      {"text", text},
      {"index", index},
      {"logprobs", logprobs != nullptr ? completion_logprobs_json(*logprobs, text_offset) : json()},
      {"finish_reason", finish_reason.empty() ? json() : json(finish_reason)}};
}

}  // namespace

StatusOr<CompletionRequest> parse_completion_request(const std::string& body_text) {
  auto parsed = parse_json(body_text, "the request body");
  if (!parsed.ok()) return parsed.status();
  const json& body = *parsed;
  if (!body.is_object()) return bad("the request body must be a JSON object (the completions API)");
  CompletionRequest out;
  out.request.type = protocol::RequestType::kGenerate;
  out.request.raw = true;
  if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return bad("model must be a string");
    out.model = it->get<std::string>();
  }
  auto prompt = body.find("prompt");
  if (prompt == body.end() || prompt->is_null()) return bad("prompt is required (a string)");
  if (prompt->is_array()) {
    if (prompt->size() != 1 || !(*prompt)[0].is_string()) {
      return bad(
          "prompt: one string per request (arrays of several prompts or of token ids "
          "are not supported)");
    }
    out.request.prompt = (*prompt)[0].get<std::string>();
  } else if (prompt->is_string()) {
    out.request.prompt = prompt->get<std::string>();
  } else {
    return bad("prompt must be a string");
  }
  if (out.request.prompt.empty()) return bad("prompt must not be empty");
  if (auto it = body.find("suffix"); it != body.end() && !it->is_null()) {
    return bad("suffix is not supported: the served model does no fill-in-the-middle");
  }
  if (auto it = body.find("best_of"); it != body.end() && !it->is_null() && *it != 1) {
    return bad("best_of is not supported (ask for n completions and choose among them)");
  }
  GLM_RETURN_IF_ERROR(read_choices(body, "completions", &out.request.n));
  if (auto it = body.find("echo"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad("echo must be true or false");
    out.echo = it->get<bool>();
  }
  if (auto it = body.find("stream"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad("stream must be true or false");
    out.stream = it->get<bool>();
  }
  if (auto it = body.find("stream_options"); it != body.end() && it->is_object()) {
    if (auto u = it->find("include_usage"); u != it->end() && !u->is_null()) {
      if (!u->is_boolean()) return bad("stream_options.include_usage must be true or false");
      out.include_usage = u->get<bool>();
    }
  }
  out.request.params.max_tokens = 16;  // OpenAI's default for completions
  GLM_RETURN_IF_ERROR(protocol::read_sampling(body, "", &out.request.params));
  // logprobs: N (0..5) = each token's log-probability and its N best alternatives.
  if (auto it = body.find("logprobs"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 5) {
      return bad("logprobs must be an integer in [0, 5] (the alternatives per token)");
    }
    if (out.echo) {
      return bad(
          "echo with logprobs is not supported: this server reports the log-probabilities of "
          "generated tokens, not of the prompt's");
    }
    out.request.params.top_logprobs = it->get<int>();
  }
  return out;
}

std::string completion_chunk_text_json(const std::string& id, int64_t created,
                                       const std::string& model, const std::string& text,
                                       const std::string& finish_reason,
                                       const std::vector<generation::GeneratedLogprobs>* logprobs,
                                       size_t text_offset, int index) {
  return dump_json(json{
      {"id", id},
      {"object", "text_completion"},
      {"created", created},
      {"model", model},
      {"choices", json::array({choice_json(text, finish_reason, logprobs, text_offset, index)})}});
}

std::string text_completion_json(const std::string& id, int64_t created, const std::string& model,
                                 const std::string& text, const std::string& finish_reason,
                                 const protocol::Usage& usage,
                                 const std::vector<generation::GeneratedLogprobs>* logprobs) {
  return text_completion_json(id, created, model, {TextChoiceOut{text, finish_reason, logprobs}},
                              usage);
}

std::string text_completion_json(const std::string& id, int64_t created, const std::string& model,
                                 const std::vector<TextChoiceOut>& choices,
                                 const protocol::Usage& usage) {
  json out = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const TextChoiceOut& c = choices[i];
    out.push_back(choice_json(c.text, c.finish_reason, c.logprobs, 0, static_cast<int>(i)));
  }
  return dump_json(json{{"id", id},
                        {"object", "text_completion"},
                        {"created", created},
                        {"model", model},
                        {"choices", std::move(out)},
                        {"usage", openai_usage_json(usage)}});
}

}  // namespace glm::api
