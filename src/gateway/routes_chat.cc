// The page's routes: conversations in SQLite and the streaming chat that stores as it goes.
//
//   GET    /api/conversations                list (most recent first)
//   POST   /api/conversations                {title?, system_prompt?, params?} -> conversation
//   GET    /api/conversations/:id            conversation + messages
//   PATCH  /api/conversations/:id            {title?, system_prompt?, params?}
//   DELETE /api/conversations/:id
//   GET    /api/conversations/:id/export     JSON download
//   POST   /api/conversations/:id/chat       {content, edit_message_id?, regenerate?, params?}
//                                            -> SSE: start, queued, prefill, token..., notice,
//                                               done | error (docs/gateway.md)
//   POST   /api/stop                         {request_id}: cancel a generation now
#include <chrono>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/utf8.h"
#include "gateway/gateway.h"
#include "protocol/sampling_json.h"

namespace glm::gateway {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kMaxConversations = 500;
constexpr size_t kMaxTitleBytes = 200;
// The partial answer is written to the database at most this often while streaming, so a
// gateway crash loses at most this much of it.
constexpr double kFlushIntervalMs = 1000;

// A string field of a JSON object; `def` if absent, null or not a string.
std::string str_field(const json& j, const char* name, const std::string& def = "") {
  auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : def;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json parse_or_empty(const std::string& s) {
  json j = json::parse(s, nullptr, false);
  return j.is_discarded() ? json::object() : j;
}

json conversation_json(const Conversation& c) {
  return {{"id", c.id},
          {"title", c.title},
          {"system_prompt", c.system_prompt},
          {"params", parse_or_empty(c.params_json)},
          {"created_ms", c.created_ms},
          {"updated_ms", c.updated_ms},
          {"n_messages", c.n_messages}};
}

json message_json(const StoredMessage& m) {
  return {{"id", m.id},         {"role", m.role},     {"content", m.content},
          {"status", m.status}, {"error", m.error},   {"meta", parse_or_empty(m.meta_json)},
          {"created_ms", m.created_ms}};
}

// A title from the first user message: its first line, at most 40 bytes on a char boundary.
std::string title_from(const std::string& text) {
  std::string t = text.substr(0, text.find('\n'));
  if (t.size() > 40) {
    t = t.substr(0, utf8_complete_prefix(std::string_view(t).substr(0, 40))) + "…";
  }
  return t;
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

void Gateway::install_chat_routes() {
  auto send_json = [](httplib::Response& res, const json& j, int status = 200) {
    res.status = status;
    res.set_header("Cache-Control", "no-store");
    res.set_content(dump(j), "application/json");
  };
  auto body_json = [](const httplib::Request& req) {
    json j = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
    return j.is_object() ? j : json();  // null = not an object
  };

  server_.Get("/api/conversations", [this, send_json](const httplib::Request&,
                                                      httplib::Response& res) {
    auto list = store_->list_conversations(kMaxConversations);
    if (!list.ok()) return set_json_error(res, list.status());
    json arr = json::array();
    for (const Conversation& c : *list) arr.push_back(conversation_json(c));
    send_json(res, {{"conversations", arr}});
  });

  server_.Post("/api/conversations", [this, send_json, body_json](const httplib::Request& req,
                                                                  httplib::Response& res) {
    json b = body_json(req);
    if (b.is_null()) return set_json_error(res, invalid_argument("body must be a JSON object"));
    const std::string title = str_field(b, "title");
    const std::string system = str_field(b, "system_prompt");
    const std::string params =
        b.contains("params") && b["params"].is_object() ? dump(b["params"]) : "{}";
    if (title.size() > kMaxTitleBytes) {
      return set_json_error(res, invalid_argument("title is over 200 bytes"));
    }
    auto c = store_->create_conversation(title, system, params);
    if (!c.ok()) return set_json_error(res, c.status());
    send_json(res, conversation_json(*c), 201);
  });

  server_.Get(R"(/api/conversations/([A-Za-z0-9_-]+))",
              [this, send_json](const httplib::Request& req, httplib::Response& res) {
                auto c = store_->get_conversation(req.matches[1]);
                if (!c.ok()) return set_json_error(res, c.status());
                auto msgs = store_->messages(c->id);
                if (!msgs.ok()) return set_json_error(res, msgs.status());
                json j = conversation_json(*c);
                j["messages"] = json::array();
                for (const StoredMessage& m : *msgs) j["messages"].push_back(message_json(m));
                send_json(res, j);
              });

  server_.Patch(R"(/api/conversations/([A-Za-z0-9_-]+))",
                [this, send_json, body_json](const httplib::Request& req, httplib::Response& res) {
                  json b = body_json(req);
                  if (b.is_null()) {
                    return set_json_error(res, invalid_argument("body must be a JSON object"));
                  }
                  std::optional<std::string> title, system, params;
                  if (b.contains("title") && b["title"].is_string()) title = b["title"];
                  if (b.contains("system_prompt") && b["system_prompt"].is_string()) {
                    system = b["system_prompt"];
                  }
                  if (b.contains("params") && b["params"].is_object()) params = dump(b["params"]);
                  if (title && title->size() > kMaxTitleBytes) {
                    return set_json_error(res, invalid_argument("title is over 200 bytes"));
                  }
                  Status st = store_->update_conversation(req.matches[1], title ? &*title : nullptr,
                                                          system ? &*system : nullptr,
                                                          params ? &*params : nullptr);
                  if (!st.ok()) return set_json_error(res, st);
                  auto c = store_->get_conversation(req.matches[1]);
                  if (!c.ok()) return set_json_error(res, c.status());
                  send_json(res, conversation_json(*c));
                });

  server_.Delete(R"(/api/conversations/([A-Za-z0-9_-]+))",
                 [this, send_json](const httplib::Request& req, httplib::Response& res) {
                   Status st = store_->delete_conversation(req.matches[1]);
                   if (!st.ok()) return set_json_error(res, st);
                   send_json(res, {{"deleted", std::string(req.matches[1])}});
                 });

  server_.Get(R"(/api/conversations/([A-Za-z0-9_-]+)/export)",
              [this](const httplib::Request& req, httplib::Response& res) {
                auto doc = store_->export_json(req.matches[1]);
                if (!doc.ok()) return set_json_error(res, doc.status());
                res.set_header("Content-Disposition", "attachment; filename=\"conversation-" +
                                                          std::string(req.matches[1]) + ".json\"");
                res.set_content(*doc, "application/json");
              });

  server_.Post("/api/stop", [this, send_json, body_json](const httplib::Request& req,
                                                         httplib::Response& res) {
    json b = body_json(req);
    const std::string id = b.is_object() ? str_field(b, "request_id") : "";
    auto stream = find_inflight(id);
    if (!stream) {
      return set_json_error(res, not_found("no generation '" + id + "' in progress"));
    }
    stream->cancel();
    send_json(res, {{"stopped", id}});
  });

  server_.Post(R"(/api/conversations/([A-Za-z0-9_-]+)/chat)", [this, body_json](
                                                                  const httplib::Request& req,
                                                                  httplib::Response& res) {
    const auto t0 = Clock::now();
    const std::string conv_id = req.matches[1];
    json b = body_json(req);
    if (b.is_null()) return set_json_error(res, invalid_argument("body must be a JSON object"));
    auto conv = store_->get_conversation(conv_id);
    if (!conv.ok()) return set_json_error(res, conv.status());
    const bool regenerate = b.contains("regenerate") && b["regenerate"].is_boolean() &&
                            b["regenerate"].get<bool>();
    const std::string content = b.contains("content") && b["content"].is_string()
                                    ? b["content"].get<std::string>()
                                    : std::string();
    if (!regenerate && content.empty()) {
      return set_json_error(res, invalid_argument("content must be a non-empty string"));
    }
    if (!utf8_valid(content)) return set_json_error(res, invalid_argument("content is not UTF-8"));
    protocol::Request request;
    request.type = protocol::RequestType::kGenerate;
    request.id = "chat-" + protocol::make_request_id();
    request.conversation = conv_id;
    Status pst = protocol::read_sampling(b.contains("params") ? b["params"] : json(), "params.",
                                         &request.params);
    if (!pst.ok()) return set_json_error(res, pst);
    std::string system = conv->system_prompt;
    const bool new_system = b.contains("system_prompt") && b["system_prompt"].is_string() &&
                            b["system_prompt"].get<std::string>() != system;
    if (new_system) system = b["system_prompt"];

    // Edit: drop the edited message and everything after it; regenerate: drop what follows the
    // last user message. Then the user's message is stored before generation starts.
    auto msgs = store_->messages(conv_id);
    if (!msgs.ok()) return set_json_error(res, msgs.status());
    std::vector<StoredMessage> history = std::move(msgs).value();
    json user_msg_json;
    if (regenerate) {
      int64_t last_user = 0;
      for (const StoredMessage& m : history) {
        if (m.role == "user") last_user = m.id;
      }
      if (last_user == 0) {
        return set_json_error(res, invalid_argument("nothing to regenerate: no user message"));
      }
      store_->truncate_from(conv_id, last_user + 1);
      std::erase_if(history, [&](const StoredMessage& m) { return m.id > last_user; });
    } else {
      if (b.contains("edit_message_id") && b["edit_message_id"].is_number_integer()) {
        const int64_t edit_id = b["edit_message_id"];
        auto m = store_->get_message(edit_id);
        if (!m.ok() || m->conversation_id != conv_id || m->role != "user") {
          return set_json_error(
              res, not_found("message " + std::to_string(edit_id) +
                             " is not a user message of this conversation"));
        }
        store_->truncate_from(conv_id, edit_id);
        std::erase_if(history, [&](const StoredMessage& m) { return m.id >= edit_id; });
      }
      auto um = store_->add_message(conv_id, "user", content, "complete");
      if (!um.ok()) return set_json_error(res, um.status());
      user_msg_json = message_json(*um);
      history.push_back(*um);
    }
    if (!system.empty()) request.messages.push_back({"system", system, ""});
    for (const StoredMessage& m : history) {
      if (m.content.empty()) continue;  // an answer that failed before its first token
      request.messages.push_back({m.role, m.content, ""});
    }

    // The engine starts on the request now; the remaining bookkeeping overlaps its prefill.
    auto sent = send_generation(request);
    if (b.contains("params") && b["params"].is_object()) {
      const std::string params = dump(b["params"]);
      if (params != conv->params_json) store_->update_conversation(conv_id, nullptr, nullptr, &params);
    }
    if (new_system) store_->update_conversation(conv_id, nullptr, &system, nullptr);
    if (conv->title.empty() && !regenerate) {
      const std::string t = title_from(content);
      store_->update_conversation(conv_id, &t, nullptr, nullptr);
    }
    auto am = store_->add_message(conv_id, "assistant", "", "streaming");
    if (!am.ok()) return set_json_error(res, am.status());
    const int64_t answer_id = am->id;

    // From here on the page always gets a stream: refusals arrive as its error event, and the
    // answer row records them.
    auto started = sent.ok() ? await_started(std::move(sent).value()) : StatusOr<Started>(sent.status());
    auto state = std::make_shared<std::optional<Started>>();
    Status start_error;
    if (started.ok()) {
      *state = std::move(started).value();
    } else {
      start_error = started.status();
      store_->update_message(answer_id, "", "error", start_error.message(), "{}");
      metrics_.record_error(error_code_name(start_error.code()));
    }
    res.set_header("Cache-Control", "no-store");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider("text/event-stream", [this, state, start_error, request,
                                                           user_msg_json, answer_id, conv_id,
                                                           t0](size_t, httplib::DataSink& sink) {
      bool ok = sse_write(sink, dump({{"type", "start"},
                                      {"request_id", request.id},
                                      {"conversation_id", conv_id},
                                      {"user_message", user_msg_json},
                                      {"assistant_message_id", answer_id}}));
      json meta = json::object();
      if (!state->has_value()) {
        sse_write(sink, dump({{"type", "error"},
                              {"code", error_code_name(start_error.code())},
                              {"message", start_error.message()}}));
        sink.done();
        return true;
      }
      Started& st = **state;
      std::string partial;
      auto last_flush = Clock::now();
      bool wrote = false;  // an event went out since the last heartbeat
      auto emit = [&](const protocol::Event& e) {
        if (!ok) return false;
        json j;
        switch (e.type) {
          case protocol::EventType::kToken:
            partial += e.text;
            j = {{"type", "token"}, {"text", e.text}};
            break;
          case protocol::EventType::kQueued:
            j = {{"type", "queued"}, {"position", e.position}};
            break;
          case protocol::EventType::kStart:
            j = {{"type", "prefill"},
                 {"prompt_tokens", e.usage.prompt_tokens},
                 {"cached_tokens", e.usage.cached_tokens}};
            break;
          case protocol::EventType::kNotice:
            meta["notice"] = e.message;
            meta["dropped_messages"] = e.dropped_messages;
            j = {{"type", "notice"},
                 {"message", e.message},
                 {"dropped_messages", e.dropped_messages}};
            break;
          default:
            return ok;
        }
        ok = sse_write(sink, dump(j));
        wrote = true;
        if (e.type == protocol::EventType::kToken && ms_since(last_flush) > kFlushIntervalMs) {
          store_->update_message(answer_id, partial, "streaming", "", dump(meta));
          last_flush = Clock::now();
        }
        return ok;
      };
      auto heartbeat = [&] {
        if (ok && !wrote) ok = sink.write(": keep-alive\n\n", 14);
        wrote = false;
        return ok;
      };
      RelayResult r;
      if (st.first && !emit(*st.first)) st.stream->cancel();
      r = relay_generation(*st.stream, emit, heartbeat, options_.relay);
      // Store first, then tell the page: a reload right after the done event finds it saved.
      std::string status = "complete";
      if (r.outcome == Outcome::kCancelled || r.outcome == Outcome::kDisconnected) {
        status = "stopped";
      }
      if (r.outcome == Outcome::kError) status = "error";
      meta["finish_reason"] = outcome_name(r.outcome);
      meta["prompt_tokens"] = r.usage.prompt_tokens;
      meta["cached_tokens"] = r.usage.cached_tokens;
      meta["completion_tokens"] = r.usage.completion_tokens;
      if (r.outcome != Outcome::kError && r.outcome != Outcome::kDisconnected) {
        meta["ttft_ms"] = r.timings.ttft_ms;
        meta["tpot_ms"] = r.timings.tpot_ms;
        meta["queue_ms"] = r.timings.queue_ms;
        meta["prefill_ms"] = r.timings.prefill_ms;
        if (r.timings.tpot_ms > 0) meta["tokens_per_s"] = 1000.0 / r.timings.tpot_ms;
      }
      store_->update_message(answer_id, r.text, status, r.error.message(), dump(meta));
      record_generation("chat", r, t0);
      if (r.outcome == Outcome::kDisconnected) return false;
      if (r.outcome == Outcome::kError) {
        sse_write(sink, dump({{"type", "error"},
                              {"code", error_code_name(r.error.code())},
                              {"message", r.error.message()},
                              {"content", r.text}}));
      } else {
        sse_write(sink, dump({{"type", "done"},
                              {"finish_reason", outcome_name(r.outcome)},
                              {"status", status},
                              {"meta", meta}}));
      }
      sink.done();
      return true;
    });
  });
}

}  // namespace glm::gateway
