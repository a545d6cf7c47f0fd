#include "api/openai.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "api/logprobs.h"
#include "core/json.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "protocol/sampling_json.h"

namespace glm::api {
namespace {

using json = nlohmann::json;
// Request bodies are parsed once, keeping the client's key order (schemas and tools are written
// into grammars and prompts in that order).
using ojson = nlohmann::ordered_json;

Status bad(const std::string& message) { return invalid_argument(message); }

// A chat.completion.chunk around one choice.
std::string chunk_json(const std::string& id, int64_t created, const std::string& model,
                       const json& choice) {
  json j = {
      {"id", id},       {"object", "chat.completion.chunk"}, {"created", created},
      {"model", model}, {"system_fingerprint", nullptr},     {"choices", json::array({choice})}};
  return dump_json(j);
}

// OpenAI content is a string or an array of parts; only text parts are supported.
StatusOr<std::string> read_content(const ojson& content, size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "].content";
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return bad(where + " must be a string or an array of text parts");
  std::string text;
  for (const ojson& part : content) {
    if (!part.is_object() || part.find("type") == part.end() || part["type"] != "text" ||
        !part.contains("text") || !part["text"].is_string()) {
      return bad(where + ": only {\"type\":\"text\",\"text\":...} parts are supported");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

// response_format {"type":"text"|"json_object"|"json_schema"} and the `grammar` extension (GBNF
// text, as llama-server takes it) -> a Constraint, compiled here once so that a bad schema or
// grammar is a 400 naming its part before anything reaches the engine (which compiles it
// again for itself: another process). The schema keeps the client's key order: its properties
// come out in that order.
Status read_constraint(const ojson& body, generation::Constraint* out) {
  using Kind = generation::Constraint::Kind;
  auto grammar_it = body.find("grammar");
  const bool has_grammar = grammar_it != body.end() && !grammar_it->is_null();
  auto rf = body.find("response_format");
  if (rf != body.end() && !rf->is_null()) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string()) {
      return bad("response_format must be {\"type\":\"text\"|\"json_object\"|\"json_schema\"}");
    }
    const std::string type = (*rf)["type"].get<std::string>();
    if (type == "json_object") {
      out->kind = Kind::kJsonObject;
    } else if (type == "json_schema") {
      auto js = rf->find("json_schema");
      if (js == rf->end() || !js->is_object()) {
        return bad(
            "response_format.json_schema must be an object {\"name\",\"schema\",\"strict\"}");
      }
      if (auto name = js->find("name"); name != js->end() && !name->is_string()) {
        return bad("response_format.json_schema.name must be a string");
      }
      if (auto strict = js->find("strict");
          strict != js->end() && !strict->is_null() && !strict->is_boolean()) {
        return bad("response_format.json_schema.strict must be true or false");
      }
      auto schema = js->find("schema");
      if (schema == js->end() || !(schema->is_object() || schema->is_boolean())) {
        return bad("response_format.json_schema.schema must be a JSON Schema object");
      }
      const ojson& s = *schema;
      StatusOr<grammar::Grammar> g = grammar::json_schema_to_grammar(s);
      if (!g.ok()) return bad("response_format.json_schema.schema " + g.status().message());
      out->kind = Kind::kJsonSchema;
      out->text = s.dump();
    } else if (type != "text") {
      return bad("response_format.type must be text, json_object or json_schema, got '" + type +
                 "'");
    }
  }
  if (has_grammar) {
    if (out->active()) return bad("give either grammar or a JSON response_format, not both");
    if (!grammar_it->is_string() || grammar_it->get_ref<const std::string&>().empty()) {
      return bad("grammar must be a non-empty string of GBNF rules with a rule named root");
    }
    StatusOr<grammar::Grammar> g = grammar::parse_gbnf(grammar_it->get<std::string>());
    if (!g.ok()) return bad("grammar: " + g.status().message());
    out->kind = Kind::kGbnf;
    out->text = grammar_it->get<std::string>();
  }
  return Status::Ok();
}

// An assistant message's tool_calls: one protocol message per call (metadata = the function,
// arguments = its JSON object text).
Status read_tool_calls(const ojson& calls, const std::string& where,
                       std::vector<protocol::Message>* out) {
  if (!calls.is_array()) return bad(where + " must be an array of tool calls");
  for (size_t k = 0; k < calls.size(); ++k) {
    const std::string at = where + "[" + std::to_string(k) + "]";
    const ojson& c = calls[k];
    if (!c.is_object()) return bad(at + " must be an object {\"id\",\"type\",\"function\"}");
    if (auto t = c.find("type"); t != c.end() && *t != "function") {
      return bad(at + ".type must be \"function\"");
    }
    auto f = c.find("function");
    if (f == c.end() || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string()) {
      return bad(at + ".function must be {\"name\",\"arguments\"}");
    }
    std::string arguments = "{}";
    if (auto a = f->find("arguments"); a != f->end() && !a->is_null()) {
      if (!a->is_string()) return bad(at + ".function.arguments must be a string of JSON");
      arguments = a->get<std::string>();
      auto parsed = parse_json(arguments, "tool call arguments");
      if (!parsed.ok() || !parsed->is_object()) {
        return bad(at + ".function.arguments must be a JSON object as text, e.g. \"{}\"");
      }
    }
    protocol::Message m{"assistant", "", (*f)["name"].get<std::string>()};
    m.arguments = std::move(arguments);
    out->push_back(std::move(m));
  }
  return Status::Ok();
}

// chat_template_kwargs (vLLM's and llama-server's extension): the template options the chat
// templates read (tok::TemplateOptions): enable_thinking. Other keys are the template's own
// business; ours read none, so they are accepted and ignored, as a template that does not use a
// variable ignores it.
Status read_template_kwargs(const ojson& body, protocol::Request* request) {
  auto it = body.find("chat_template_kwargs");
  if (it == body.end() || it->is_null()) return Status::Ok();
  if (!it->is_object()) return bad("chat_template_kwargs must be an object");
  if (auto t = it->find("enable_thinking"); t != it->end() && !t->is_null()) {
    if (!t->is_boolean()) return bad("chat_template_kwargs.enable_thinking must be true or false");
    request->enable_thinking = t->get<bool>();
  }
  return Status::Ok();
}

// tools / tool_choice / parallel_tool_calls -> request.tools, the names to read calls for, and
// for a forced choice a tool_call constraint. The tools keep the client's key order: the prompt
// writes them as the client sent them.
Status read_tools(const ojson& body, ChatCompletionRequest* out) {
  if (auto p = body.find("parallel_tool_calls"); p != body.end() && !p->is_null()) {
    if (!p->is_boolean()) return bad("parallel_tool_calls must be true or false");
    out->request.parallel_tool_calls = p->get<bool>();
  }
  auto tools_it = body.find("tools");
  const bool has_tools = tools_it != body.end() && !tools_it->is_null();
  auto choice_it = body.find("tool_choice");
  const bool has_choice = choice_it != body.end() && !choice_it->is_null();
  if (has_tools && !tools_it->is_array()) return bad("tools must be an array of functions");
  if (!has_tools || tools_it->empty()) {
    if (has_choice && *choice_it != "none" && *choice_it != "auto") {
      return bad("tool_choice needs tools: give the functions in tools");
    }
    return Status::Ok();
  }
  nlohmann::ordered_json functions;
  std::vector<std::string> names;
  GLM_RETURN_IF_ERROR(read_openai_tools(*tools_it, "tools", &functions, &names));
  // tool_choice: "auto" (default), "none", "required", or one function by name.
  std::string forced;  // "" = not forced, "*" = any function, else that one
  if (has_choice) {
    const ojson& c = *choice_it;
    if (c == "none") return Status::Ok();  // the tools stay out of the prompt
    if (c == "required") {
      forced = "*";
    } else if (c.is_object()) {
      auto f = c.find("function");
      if (c.value("type", "") != "function" || f == c.end() || !f->is_object() ||
          !f->contains("name") || !(*f)["name"].is_string()) {
        return bad(
            "tool_choice must be \"none\", \"auto\", \"required\" or "
            "{\"type\":\"function\",\"function\":{\"name\":...}}");
      }
      forced = (*f)["name"].get<std::string>();
      if (std::find(names.begin(), names.end(), forced) == names.end()) {
        return bad("tool_choice.function.name '" + forced + "' is not one of the tools");
      }
    } else if (c != "auto") {
      return bad(
          "tool_choice must be \"none\", \"auto\", \"required\" or "
          "{\"type\":\"function\",\"function\":{\"name\":...}}");
    }
  }
  return set_tools(functions, forced, &out->request, &out->tool_names);
}

}  // namespace

StatusOr<ChatCompletionRequest> parse_chat_completion(const std::string& body_text) {
  auto parsed = parse_ordered_json(body_text, "the request body");
  if (!parsed.ok()) return parsed.status();
  const ojson& body = *parsed;
  if (!body.is_object()) {
    return bad("the request body must be a JSON object (see the OpenAI chat completions API)");
  }
  ChatCompletionRequest out;
  out.request.type = protocol::RequestType::kGenerate;
  if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return bad("model must be a string");
    out.model = it->get<std::string>();
  }
  auto msgs = body.find("messages");
  if (msgs == body.end() || !msgs->is_array() || msgs->empty()) {
    return bad("messages must be a non-empty array of {\"role\",\"content\"} objects");
  }
  for (size_t i = 0; i < msgs->size(); ++i) {
    const ojson& m = (*msgs)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return bad(where + " must be an object");
    if (!m.contains("role") || !m["role"].is_string()) return bad(where + ".role must be a string");
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";
    if (role == "tool") role = "observation";
    if (role != "system" && role != "user" && role != "assistant" && role != "observation") {
      return bad(where + ".role must be system, user, assistant or tool, got '" + role + "'");
    }
    auto content = read_content(m.contains("content") ? m["content"] : ojson(), i);
    if (!content.ok()) return content.status();
    auto calls = m.find("tool_calls");
    if (role == "assistant" && calls != m.end() && !calls->is_null()) {
      if (!content->empty()) out.request.messages.push_back({role, std::move(content).value(), ""});
      GLM_RETURN_IF_ERROR(read_tool_calls(*calls, where + ".tool_calls", &out.request.messages));
      continue;
    }
    out.request.messages.push_back({role, std::move(content).value(), ""});
  }
  if (auto it = body.find("stream"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad("stream must be true or false");
    out.stream = it->get<bool>();
  }
  if (auto it = body.find("stream_options"); it != body.end() && it->is_object()) {
    auto usage = it->find("include_usage");
    if (usage != it->end() && !usage->is_null()) {
      if (!usage->is_boolean()) return bad("stream_options.include_usage must be true or false");
      out.include_usage = usage->get<bool>();
    }
  }
  GLM_RETURN_IF_ERROR(read_choices(body, "answers", &out.request.n));
  // Sampling fields (temperature, top_p, max_tokens / max_completion_tokens, seed, stop,
  // presence / frequency penalties, logit_bias, top_logprobs, and the extensions top_k, min_p,
  // repetition_penalty): the one mapping the engine socket uses too.
  GLM_RETURN_IF_ERROR(protocol::read_sampling(body, "", &out.request.params));
  // logprobs: true turns log-probabilities on (top_logprobs alternatives, default 0).
  bool logprobs = false;
  if (auto it = body.find("logprobs"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad("logprobs must be true or false");
    logprobs = it->get<bool>();
  }
  int& top = out.request.params.top_logprobs;
  if (!logprobs && top >= 0) return bad("top_logprobs needs logprobs: true");
  top = logprobs ? std::max(top, 0) : -1;
  // glmserve extension: KV reuse across the turns of one conversation.
  if (auto it = body.find("conversation"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return bad("conversation must be a string");
    out.request.conversation = it->get<std::string>();
  }
  GLM_RETURN_IF_ERROR(read_constraint(body, &out.request.constraint));
  GLM_RETURN_IF_ERROR(read_template_kwargs(body, &out.request));
  GLM_RETURN_IF_ERROR(read_tools(body, &out));
  if (out.request.n > 1 && !out.tool_names.empty()) {
    return bad("n > 1 is not supported with tools: ask for one answer per request");
  }
  return out;
}

const char* openai_error_type(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kContextOverflow:
    case ErrorCode::kNotFound:
    case ErrorCode::kUnsupported:
      return "invalid_request_error";
    case ErrorCode::kUnauthorized:
      return "authentication_error";
    case ErrorCode::kQueueFull:
      return "rate_limit_error";
    case ErrorCode::kUnavailable:
    case ErrorCode::kOutOfMemory:
      return "service_unavailable";
    default:
      return "server_error";
  }
}

std::string openai_error_json(const Status& status) {
  json j = {{"error",
             {{"message", status.message()},
              {"type", openai_error_type(status.code())},
              {"param", nullptr},
              {"code", error_code_name(status.code())}}}};
  return dump_json(j);
}

std::string tool_call_id(const std::string& request_id, int call_index) {
  const size_t dash = request_id.find("req-");
  std::string id = "call_" + (dash == std::string::npos ? request_id : request_id.substr(dash + 4));
  if (call_index > 0) id += "_" + std::to_string(call_index);
  return id;
}

std::vector<ToolCallOut> tool_calls_out(const std::string& request_id, const ToolAnswer& answer) {
  std::vector<ToolCallOut> out;
  for (size_t i = 0; i < answer.calls.size(); ++i) {
    out.push_back({tool_call_id(request_id, static_cast<int>(i)), answer.calls[i].name,
                   answer.calls[i].arguments});
  }
  return out;
}

std::string tool_call_chunk_json(const std::string& id, int64_t created, const std::string& model,
                                 const std::string& call_id, const std::string& name,
                                 const std::string& arguments, int call_index) {
  json call = {{"index", call_index}};
  if (!call_id.empty()) {
    call["id"] = call_id;
    call["type"] = "function";
    call["function"] = {{"name", name}, {"arguments", ""}};
  } else {
    call["function"] = {{"arguments", arguments}};
  }
  json choice = {{"index", 0},
                 {"delta", {{"tool_calls", json::array({call})}}},
                 {"logprobs", nullptr},
                 {"finish_reason", nullptr}};
  return chunk_json(id, created, model, choice);
}

std::string tool_delta_chunk_json(const std::string& id, int64_t created, const std::string& model,
                                  const ToolDelta& d, int call_index) {
  switch (d.kind) {
    case ToolDelta::Kind::kContent:
    case ToolDelta::Kind::kCutCall:  // text (ToolAnswerStream sends one only as text)
      return completion_chunk_json(id, created, model, &d.text, false, "");
    case ToolDelta::Kind::kCallStart:
      return tool_call_chunk_json(id, created, model, tool_call_id(id, call_index), d.text, "",
                                  call_index);
    case ToolDelta::Kind::kArguments:
      break;
  }
  return tool_call_chunk_json(id, created, model, "", "", d.text, call_index);
}

template <class Json>
Status read_choices_of(const Json& body, const char* noun, int* n) {
  auto it = body.find("n");
  if (it == body.end() || it->is_null()) return Status::Ok();
  if (!it->is_number_integer() || it->template get<int64_t>() < 1 ||
      it->template get<int64_t>() > protocol::kMaxChoices) {
    return invalid_argument("n must be an integer from 1 to " +
                            std::to_string(protocol::kMaxChoices) + " (the number of " + noun +
                            ")");
  }
  *n = it->template get<int>();
  return Status::Ok();
}

Status read_choices(const nlohmann::json& body, const char* noun, int* n) {
  return read_choices_of(body, noun, n);
}
Status read_choices(const nlohmann::ordered_json& body, const char* noun, int* n) {
  return read_choices_of(body, noun, n);
}

json openai_usage_json(const protocol::Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
}

std::string openai_finish_reason(Outcome outcome) {
  return outcome == Outcome::kLength ? "length" : "stop";
}

std::string completion_chunk_json(const std::string& id, int64_t created, const std::string& model,
                                  const std::string* content, bool role,
                                  const std::string& finish_reason,
                                  const std::vector<generation::GeneratedLogprobs>* logprobs,
                                  int index) {
  json delta = json::object();
  if (role) delta["role"] = "assistant";
  if (content) delta["content"] = *content;
  json choice = {{"index", index},
                 {"delta", delta},
                 {"logprobs", logprobs != nullptr ? chat_logprobs_json(*logprobs) : json()}};
  choice["finish_reason"] = finish_reason.empty() ? json() : json(finish_reason);
  return chunk_json(id, created, model, choice);
}

std::string reasoning_chunk_json(const std::string& id, int64_t created, const std::string& model,
                                 const std::string& reasoning, int index) {
  json choice = {{"index", index},
                 {"delta", {{"reasoning_content", reasoning}}},
                 {"logprobs", nullptr},
                 {"finish_reason", nullptr}};
  return chunk_json(id, created, model, choice);
}

std::string usage_chunk_json(const std::string& id, int64_t created, const std::string& model,
                             const protocol::Usage& usage) {
  json j = {
      {"id", id},       {"object", "chat.completion.chunk"}, {"created", created},
      {"model", model}, {"choices", json::array()},          {"usage", openai_usage_json(usage)}};
  return dump_json(j);
}

std::string completion_json(const std::string& id, int64_t created, const std::string& model,
                            const std::string& content, const std::string& finish_reason,
                            const protocol::Usage& usage, const std::vector<ToolCallOut>* calls,
                            const std::vector<generation::GeneratedLogprobs>* logprobs,
                            const std::string& reasoning) {
  return completion_json(id, created, model,
                         {ChatChoiceOut{content, finish_reason, calls, logprobs, reasoning}},
                         usage);
}

std::string completion_json(const std::string& id, int64_t created, const std::string& model,
                            const std::vector<ChatChoiceOut>& choices,
                            const protocol::Usage& usage) {
  json out = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChatChoiceOut& c = choices[i];
    json message = {{"role", "assistant"}, {"content", c.content}};
    if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
    if (c.calls != nullptr && !c.calls->empty()) {
      if (c.content.empty()) message["content"] = nullptr;
      json calls = json::array();
      for (const ToolCallOut& call : *c.calls) {
        calls.push_back({{"id", call.id},
                         {"type", "function"},
                         {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
      }
      message["tool_calls"] = std::move(calls);
    }
    out.push_back({{"index", i},
                   {"message", std::move(message)},
                   {"logprobs", c.logprobs != nullptr ? chat_logprobs_json(*c.logprobs) : json()},
                   {"finish_reason", c.finish_reason}});
  }
  json j = {{"id", id},
            {"object", "chat.completion"},
            {"created", created},
            {"model", model},
            {"system_fingerprint", nullptr},
            {"choices", std::move(out)},
            {"usage", openai_usage_json(usage)}};
  return dump_json(j);
}

}  // namespace glm::api
