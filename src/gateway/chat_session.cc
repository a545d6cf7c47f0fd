#include "gateway/chat_session.h"

#include <algorithm>

#include "core/json.h"
#include "core/log.h"
#include "core/utf8.h"

namespace glm::gateway {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// The partial answer is written to the database when its first text arrives, then at most
// this often while streaming, so a gateway crash (kill -9) loses at most the text of this much
// time, never the start of an answer the page already shows. Not every token: each write
// rewrites the row's whole text (O(answer) per write).
constexpr double kFlushIntervalMs = 250;

// The message row's status for an outcome.
const char* answer_status(api::Outcome o) {
  switch (o) {
    case api::Outcome::kStop:
    case api::Outcome::kLength:
      return "complete";
    case api::Outcome::kCancelled:
    case api::Outcome::kDisconnected:
      return "stopped";
    case api::Outcome::kError:
      return "error";
  }
  return "error";
}

// The tool call an assistant message made (meta.tool_call), or null.
const json* stored_call(const json& meta) {
  auto it = meta.find("tool_call");
  if (it == meta.end() || !it->is_object() || !it->contains("name") || !(*it)["name"].is_string()) {
    return nullptr;
  }
  return &*it;
}

// A stored meta object ({} if the text is not one).
json parse_meta(const std::string& text) {
  auto j = parse_json(text, "stored meta");
  return j.ok() && j->is_object() ? *j : json::object();
}

}  // namespace

std::string title_from(const std::string& text) {
  std::string t = text.substr(0, text.find('\n'));
  // Markdown line marks (headings, quotes, list bullets) and emphasis are not part of a title.
  size_t b = t.find_first_not_of("#>*-+ \t`_");
  t = b == std::string::npos ? "" : t.substr(b);
  std::erase_if(t, [](char c) { return c == '*' || c == '`' || c == '_'; });
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t' || t.back() == '\r')) t.pop_back();
  if (t.size() > 40) {
    t = t.substr(0, utf8_complete_prefix(std::string_view(t).substr(0, 40))) + "…";
  }
  return t;
}

ChatSession::ChatSession(Store* store, Conversation conversation)
    : store_(store), conv_(std::move(conversation)) {}

StatusOr<protocol::Request> ChatSession::begin(const ChatTurn& turn,
                                               const std::string& request_id) {
  turn_ = turn;
  request_id_ = request_id;
  const bool tool_turn = turn.tool_result.has_value();
  if (turn.continue_answer &&
      (turn.regenerate || turn.edit_message_id || !turn.content.empty() || tool_turn)) {
    return invalid_argument(
        "continue goes on with the last answer: send it without content, "
        "edit_message_id, regenerate or tool_result");
  }
  if (tool_turn && (turn.regenerate || turn.edit_message_id || !turn.content.empty())) {
    return invalid_argument(
        "tool_result answers the last answer's tool call: send it without content, "
        "edit_message_id or regenerate");
  }
  if (tool_turn && (turn.tool_result->empty() || !utf8_valid(*turn.tool_result))) {
    return invalid_argument("tool_result must be a non-empty UTF-8 string");
  }
  if (!turn.regenerate && !turn.continue_answer && !tool_turn && turn.content.empty()) {
    return invalid_argument("content must be a non-empty string");
  }
  if (!utf8_valid(turn.content)) return invalid_argument("content is not UTF-8");
  system_ = turn.system_prompt.value_or(conv_.system_prompt);
  auto tools = parse_ordered_json(turn.tools_json.value_or(conv_.tools_json), "tools");
  if (!tools.ok()) return tools.status();
  nlohmann::ordered_json functions;
  GLM_RETURN_IF_ERROR(api::read_openai_tools(*tools, "tools", &functions, &tool_names_));

  auto msgs = store_->messages(conv_.id);
  if (!msgs.ok()) return msgs.status();
  std::vector<StoredMessage> history = std::move(msgs).value();
  if (turn.continue_answer) {
    if (history.empty() || history.back().role != "assistant") {
      return invalid_argument("nothing to continue: the last message is not an answer");
    }
    const StoredMessage& last = history.back();
    meta_ = parse_meta(last.meta_json);
    // A complete answer that stopped at max_tokens is cut off too: it goes on in its place.
    const bool cut_off = last.status == "complete" && meta_.value("finish_reason", "") == "length";
    if ((last.status == "complete" && !cut_off) || last.status == "streaming") {
      return invalid_argument(
          "the last answer is " + last.status +
          "; only an interrupted, stopped, failed or cut off (length) one can be continued");
    }
    answer_id_ = last.id;
    prefix_ = last.content;
    partial_ = prefix_;
    if (stored_call(meta_)) {
      return invalid_argument("the last answer calls a tool; regenerate it instead of continuing");
    }
    history.pop_back();
  } else if (turn.regenerate) {
    int64_t last_asked = 0;  // the last user message or tool result: what the answer answers
    for (const StoredMessage& m : history) {
      if (m.role == "user" || m.role == "tool") last_asked = m.id;
    }
    if (last_asked == 0) return invalid_argument("nothing to regenerate: no user message");
    // The new answer is a sibling of the old one (open_answer): the old one stays a version.
    while (history.back().id != last_asked) history.pop_back();
  } else if (tool_turn) {
    const json* call = nullptr;
    json last_meta;
    if (!history.empty() && history.back().role == "assistant") {
      last_meta = parse_meta(history.back().meta_json);
      call = stored_call(last_meta);
    }
    if (!call || history.back().status != "complete") {
      return invalid_argument(
          "nothing to answer with a tool result: the last answer is not a complete tool call");
    }
    auto tm = store_->add_message(conv_.id, "tool", *turn.tool_result, "complete",
                                  dump_json(json{{"name", (*call)["name"]}}));
    if (!tm.ok()) return tm.status();
    user_message_ = message_json(*tm);
    history.push_back(*tm);
  } else {
    if (turn.edit_message_id) {
      const int64_t edit_id = *turn.edit_message_id;
      auto at = std::find_if(history.begin(), history.end(),
                             [&](const StoredMessage& m) { return m.id == edit_id; });
      if (at == history.end() || at->role != "user") {
        return not_found("message " + std::to_string(edit_id) +
                         " is not a user message of this conversation's branch in view");
      }
      // The edited message gets a new version beside it; the old one and its answers stay.
      history.erase(at, history.end());
    }
    const int64_t parent = history.empty() ? 0 : history.back().id;
    auto um = store_->add_message(conv_.id, "user", turn.content, "complete", "{}", parent);
    if (!um.ok()) return um.status();
    user_message_ = message_json(*um);
    history.push_back(*um);
  }

  answer_parent_ = history.empty() ? 0 : history.back().id;
  if (!turn.answering_model.empty()) meta_["model"] = turn.answering_model;
  protocol::Request request;
  request.type = protocol::RequestType::kGenerate;
  request.id = request_id;
  request.conversation = conv_.id;
  request.params = turn.params;
  if (!system_.empty()) request.messages.push_back({"system", system_, ""});
  for (const StoredMessage& m : history) {
    // Most answers call no tool: their meta is parsed only when it names one.
    if (m.role == "assistant" && m.meta_json.find("\"tool_call\"") != std::string::npos) {
      const json meta = parse_meta(m.meta_json);
      if (const json* call = stored_call(meta)) {
        // Written back in the model's own call format by the chat template.
        if (!m.content.empty()) request.messages.push_back({"assistant", m.content, ""});
        protocol::Message c{"assistant", "", (*call)["name"].get<std::string>()};
        c.arguments = call->value("arguments", std::string("{}"));
        request.messages.push_back(std::move(c));
        continue;
      }
    }
    if (m.content.empty()) continue;  // an answer that failed before its first token
    request.messages.push_back({m.role == "tool" ? "observation" : m.role, m.content, ""});
  }
  if (!functions.empty()) {
    GLM_RETURN_IF_ERROR(api::set_tools(functions, "", &request, &tool_names_));
    // The page answers one call with one tool result: an answer's first call is its call.
    request.parallel_tool_calls = false;
    tool_reading_ = api::tool_reading(functions, /*several=*/false);
    with_tools_ = true;
  }
  return request;
}

Status ChatSession::open_answer() {
  if (turn_.tools_json && *turn_.tools_json != conv_.tools_json) {
    GLM_RETURN_IF_ERROR(store_->set_conversation_tools(conv_.id, *turn_.tools_json));
  }
  if (turn_.params_json && *turn_.params_json != conv_.params_json) {
    GLM_RETURN_IF_ERROR(
        store_->update_conversation(conv_.id, nullptr, nullptr, &*turn_.params_json));
  }
  if (system_ != conv_.system_prompt) {
    GLM_RETURN_IF_ERROR(store_->update_conversation(conv_.id, nullptr, &system_, nullptr));
  }
  if (conv_.title.empty() && !turn_.regenerate && !turn_.continue_answer && !turn_.tool_result) {
    const std::string t = title_from(turn_.content);
    GLM_RETURN_IF_ERROR(store_->update_conversation(conv_.id, &t, nullptr, nullptr));
  }
  if (turn_.continue_answer) {
    return store_->update_message(answer_id_, prefix_, "streaming", "", dump_json(meta_));
  }
  auto am = store_->add_message(conv_.id, "assistant", "", "streaming", "{}", answer_parent_);
  if (!am.ok()) return am.status();
  answer_id_ = am->id;
  return Status::Ok();
}

void ChatSession::fail_to_start(const Status& status) {
  if (answer_id_ == 0) return;
  if (Status st =
          store_->update_message(answer_id_, prefix_, "error", status.message(), dump_json(meta_));
      !st.ok()) {
    GLM_LOG_WARN("chat %s: could not record the refusal: %s", conv_.id.c_str(),
                 st.to_string().c_str());
  }
}

json ChatSession::start_payload() const {
  json j = {{"type", "start"},
            {"request_id", request_id_},
            {"conversation_id", conv_.id},
            {"user_message", user_message_},
            {"assistant_message_id", answer_id_}};
  if (turn_.continue_answer) j["prefix"] = prefix_;
  return j;
}

json ChatSession::error_payload(const Status& status) const {
  return {
      {"type", "error"}, {"code", error_code_name(status.code())}, {"message", status.message()}};
}

std::vector<json> ChatSession::on_event(const protocol::Event& e) {
  switch (e.type) {
    case protocol::EventType::kToken: {
      std::vector<json> out;
      // A reasoning model's thinking: its own payloads (the page shows it collapsed above the
      // answer), kept whole in the message's meta.
      if (!e.reasoning.empty()) {
        json& thinking = meta_["reasoning"];  // appended in place, not copied per event
        if (!thinking.is_string()) thinking = "";
        thinking.get_ref<std::string&>() += e.reasoning;
        out.push_back({{"type", "reasoning"}, {"text", e.reasoning}});
      }
      if (e.text.empty()) return out;
      if (!with_tools_) {
        partial_ += e.text;
        out.push_back({{"type", "token"}, {"text", e.text}});
      } else {
        std::string text;  // plain text of this event, sent as one token payload
        auto flush_text = [&] {
          if (text.empty()) return;
          partial_ += text;
          out.push_back({{"type", "token"}, {"text", std::move(text)}});
          text.clear();
        };
        for (const api::ToolDelta& d : e.tool) {  // the engine's reading of the answer
          switch (d.kind) {
            case api::ToolDelta::Kind::kContent:
            case api::ToolDelta::Kind::kCutCall:  // only at the end, with the done event
              text += d.text;
              break;
            case api::ToolDelta::Kind::kCallStart:
              flush_text();
              meta_["tool_call"] = {{"name", d.text}, {"arguments", ""}};
              out.push_back({{"type", "tool_call"}, {"name", d.text}});
              break;
            case api::ToolDelta::Kind::kArguments:
              flush_text();
              meta_["tool_call"]["arguments"] =
                  meta_["tool_call"]["arguments"].get<std::string>() + d.text;
              out.push_back({{"type", "tool_arguments"}, {"text", d.text}});
              break;
          }
        }
        flush_text();
      }
      const bool first_text = !flushed_any_ && (!partial_.empty() || meta_.contains("tool_call"));
      if (first_text ||
          std::chrono::duration<double, std::milli>(Clock::now() - last_flush_).count() >
              kFlushIntervalMs) {
        flushed_any_ = flushed_any_ || first_text;
        if (Status st =
                store_->update_message(answer_id_, partial_, "streaming", "", dump_json(meta_));
            !st.ok()) {
          GLM_LOG_WARN("chat %s: partial answer not saved: %s", conv_.id.c_str(),
                       st.to_string().c_str());
        }
        last_flush_ = Clock::now();
      }
      return out;
    }
    case protocol::EventType::kQueued:
      return {json{{"type", "queued"}, {"position", e.position}}};
    case protocol::EventType::kStart:
      return {json{{"type", "prefill"},
                   {"prompt_tokens", e.usage.prompt_tokens},
                   {"cached_tokens", e.usage.cached_tokens}}};
    case protocol::EventType::kProgress:
      return {json{{"type", "progress"}, {"prefilled", e.prefilled}, {"total", e.to_prefill}}};
    case protocol::EventType::kNotice:
      meta_["notice"] = e.message;
      meta_["dropped_messages"] = e.dropped_messages;
      return {json{
          {"type", "notice"}, {"message", e.message}, {"dropped_messages", e.dropped_messages}}};
    default:
      return {};
  }
}

json ChatSession::finish(const RelayResult& r, bool interrupted) {
  // Store first, then tell the page: a reload right after the done event finds it saved.
  const char* status =
      interrupted && r.outcome != api::Outcome::kStop && r.outcome != api::Outcome::kLength
          ? "interrupted"
          : answer_status(r.outcome);
  std::string text = prefix_ + r.text;
  std::string finish_reason = api::outcome_name(r.outcome);
  if (with_tools_) {
    // The engine's reading of the answer: plain text and the call, if any. A continued answer
    // (prefix_) is read whole here: the reading of its first part went out with the first
    // answer, and the engine's reader only continued it.
    std::vector<api::ToolDelta> all = r.tool;
    all.insert(all.end(), r.tool_end.begin(), r.tool_end.end());
    api::ToolAnswer a = prefix_.empty() ? api::join_tool_deltas(all)
                                        : api::read_tool_answer(tool_names_, text, tool_reading_);
    text = std::move(a.content);
    if (a.calls.empty()) {
      meta_.erase("tool_call");
    } else {
      meta_["tool_call"] = {{"name", a.calls[0].name}, {"arguments", a.calls[0].arguments}};
      if (r.outcome == api::Outcome::kStop) finish_reason = "tool_calls";
    }
  }
  meta_["finish_reason"] = finish_reason;
  meta_["prompt_tokens"] = r.usage.prompt_tokens;
  meta_["cached_tokens"] = r.usage.cached_tokens;
  meta_["completion_tokens"] = r.usage.completion_tokens;
  if (r.outcome != api::Outcome::kError && r.outcome != api::Outcome::kDisconnected) {
    meta_["ttft_ms"] = r.timings.ttft_ms;
    meta_["tpot_ms"] = r.timings.tpot_ms;
    meta_["queue_ms"] = r.timings.queue_ms;
    meta_["prefill_ms"] = r.timings.prefill_ms;
    if (r.timings.tpot_ms > 0) meta_["tokens_per_s"] = 1000.0 / r.timings.tpot_ms;
  }
  if (Status st =
          store_->update_message(answer_id_, text, status, r.error.message(), dump_json(meta_));
      st.code() == ErrorCode::kNotFound) {
    GLM_LOG_INFO("chat %s: deleted while answering; the answer is dropped", conv_.id.c_str());
  } else if (!st.ok()) {
    GLM_LOG_ERROR("chat %s: the answer (%zu bytes) was not saved: %s", conv_.id.c_str(),
                  text.size(), st.to_string().c_str());
  }
  if (r.outcome == api::Outcome::kError) {
    json j = error_payload(r.error);
    j["content"] = text;  // the partial answer, kept on the page
    return j;
  }
  return json{
      {"type", "done"}, {"finish_reason", finish_reason}, {"status", status}, {"meta", meta_}};
}

}  // namespace glm::gateway
