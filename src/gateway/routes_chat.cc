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
// The chat turn's logic is ChatSession (chat_session.h); these are the HTTP shells.
#include <chrono>
#include <nlohmann/json.hpp>
#include <vector>

#include "api/body.h"
#include "core/json.h"
#include "gateway/chat_session.h"
#include "gateway/gateway.h"
#include "protocol/sampling_json.h"

namespace glm::gateway {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kMaxConversations = 500;
constexpr size_t kMaxTitleBytes = 200;

// The conversation fields of a POST/PATCH body; absent = nullopt.
struct ConversationFields {
  std::optional<std::string> title, system_prompt, params_json;
};

StatusOr<ConversationFields> read_conversation_fields(api::BodyReader& b) {
  ConversationFields f;
  f.title = b.string("title");
  f.system_prompt = b.string("system_prompt");
  if (const json* p = b.object("params")) f.params_json = dump_json(*p);
  if (!b.status().ok()) return b.status();
  if (f.title && f.title->size() > kMaxTitleBytes) {
    return invalid_argument("title is over " + std::to_string(kMaxTitleBytes) + " bytes");
  }
  return f;
}

// A chat turn from the page's body.
StatusOr<ChatTurn> read_chat_turn(api::BodyReader& b) {
  ChatTurn t;
  t.regenerate = b.boolean("regenerate").value_or(false);
  t.content = b.string("content").value_or("");
  t.edit_message_id = b.integer("edit_message_id");
  t.system_prompt = b.string("system_prompt");
  if (const json* p = b.object("params")) {
    t.params_json = dump_json(*p);
    GLM_RETURN_IF_ERROR(protocol::read_sampling(*p, "params.", &t.params));
  }
  if (!b.status().ok()) return b.status();
  return t;
}

}  // namespace

void Gateway::install_chat_routes() {
  auto send_json = [](http::Response& res, const json& j, int status = 200) {
    res.status = status;
    res.set_header("Cache-Control", "no-store");
    res.set_content(dump_json(j), "application/json");
  };

  server_->get("/api/conversations", [this, send_json](const http::Request&, http::Response& res) {
    auto list = store_->list_conversations(kMaxConversations);
    if (!list.ok()) return set_json_error(res, list.status());
    json arr = json::array();
    for (const Conversation& c : *list) arr.push_back(conversation_json(c));
    send_json(res, {{"conversations", arr}});
  });

  server_->post(
      "/api/conversations", [this, send_json](const http::Request& req, http::Response& res) {
        api::BodyReader b(req.body);
        auto f = read_conversation_fields(b);
        if (!f.ok()) return set_json_error(res, f.status());
        auto c = store_->create_conversation(f->title.value_or(""), f->system_prompt.value_or(""),
                                             f->params_json.value_or("{}"));
        if (!c.ok()) return set_json_error(res, c.status());
        send_json(res, conversation_json(*c), 201);
      });

  server_->get(R"(/api/conversations/([A-Za-z0-9_-]+))",
               [this, send_json](const http::Request& req, http::Response& res) {
                 auto c = store_->get_conversation(req.matches[1]);
                 if (!c.ok()) return set_json_error(res, c.status());
                 auto msgs = store_->messages(c->id);
                 if (!msgs.ok()) return set_json_error(res, msgs.status());
                 json j = conversation_json(*c);
                 j["messages"] = json::array();
                 for (const StoredMessage& m : *msgs) j["messages"].push_back(message_json(m));
                 send_json(res, j);
               });

  server_->patch(R"(/api/conversations/([A-Za-z0-9_-]+))",
                 [this, send_json](const http::Request& req, http::Response& res) {
                   api::BodyReader b(req.body);
                   auto f = read_conversation_fields(b);
                   if (!f.ok()) return set_json_error(res, f.status());
                   auto opt = [](const std::optional<std::string>& v) { return v ? &*v : nullptr; };
                   Status st = store_->update_conversation(
                       req.matches[1], opt(f->title), opt(f->system_prompt), opt(f->params_json));
                   if (!st.ok()) return set_json_error(res, st);
                   auto c = store_->get_conversation(req.matches[1]);
                   if (!c.ok()) return set_json_error(res, c.status());
                   send_json(res, conversation_json(*c));
                 });

  server_->del(R"(/api/conversations/([A-Za-z0-9_-]+))",
               [this, send_json](const http::Request& req, http::Response& res) {
                 // Its generation, if one runs, stops now: nothing is left to store it in.
                 cancel_conversation(req.matches[1]);
                 Status st = store_->delete_conversation(req.matches[1]);
                 if (!st.ok()) return set_json_error(res, st);
                 send_json(res, {{"deleted", std::string(req.matches[1])}});
               });

  server_->get(R"(/api/conversations/([A-Za-z0-9_-]+)/export)",
               [this](const http::Request& req, http::Response& res) {
                 auto doc = store_->export_json(req.matches[1]);
                 if (!doc.ok()) return set_json_error(res, doc.status());
                 res.set_header("Content-Disposition", "attachment; filename=\"conversation-" +
                                                           std::string(req.matches[1]) + ".json\"");
                 res.set_content(*doc, "application/json");
               });

  server_->post("/api/stop", [this, send_json](const http::Request& req, http::Response& res) {
    api::BodyReader b(req.body);
    const std::string id = b.string("request_id").value_or("");
    if (!b.status().ok()) return set_json_error(res, b.status());
    auto stream = find_inflight(id);
    if (!stream) {
      return set_json_error(res, not_found("no generation '" + id + "' in progress"));
    }
    stream->cancel();
    send_json(res, {{"stopped", id}});
  });

  server_->post(R"(/api/conversations/([A-Za-z0-9_-]+)/chat)", [this](const http::Request& req,
                                                                      http::Response& res) {
    const auto t0 = Clock::now();
    api::BodyReader b(req.body);
    auto turn = read_chat_turn(b);
    if (!turn.ok()) return set_json_error(res, turn.status());
    auto conv = store_->get_conversation(req.matches[1]);
    if (!conv.ok()) return set_json_error(res, conv.status());
    auto session = std::make_shared<ChatSession>(store_.get(), std::move(conv).value());
    auto request = session->begin(*turn, "chat-" + protocol::make_request_id());
    if (!request.ok()) return set_json_error(res, request.status());

    // The engine starts on the request now; the remaining bookkeeping overlaps its prefill.
    auto sent = send_generation(*request);
    if (Status st = session->open_answer(); !st.ok()) {
      if (sent.ok()) (*sent)->cancel();
      return set_json_error(res, st);
    }
    // From here on the page always gets a stream: refusals arrive as its error event, and the
    // answer row records them.
    auto started = sent.ok() ? await_started(std::move(sent).value(), request->conversation)
                             : StatusOr<Started>(sent.status());
    auto state = std::make_shared<std::optional<Started>>();
    Status start_error;
    if (started.ok()) {
      *state = std::move(started).value();
    } else {
      start_error = started.status();
      session->fail_to_start(start_error);
      metrics_.record_error(error_code_name(start_error.code()));
    }
    res.set_header("Cache-Control", "no-store");
    res.set_header("X-Accel-Buffering", "no");
    res.set_stream(
        "text/event-stream", [this, state, start_error, session, t0](http::StreamSink& sink) {
          SseWriter out(sink);
          out.event(dump_json(session->start_payload()));
          if (!state->has_value()) {
            sse_write(sink, dump_json(session->error_payload(start_error)));
            sink.done();
            return;
          }
          Started& st = **state;
          auto emit = [&](const protocol::Event& e) {
            if (!out.ok()) return false;
            auto payload = session->on_event(e);
            return payload ? out.event(dump_json(*payload)) : true;
          };
          auto heartbeat = [&] { return out.heartbeat(); };
          if (st.first && !emit(*st.first)) st.stream->cancel();
          RelayResult r = relay_generation(*st.stream, emit, heartbeat, options_.relay, &engine_);
          std::optional<json> last = session->finish(r);
          record_generation("chat", r, t0);
          if (!last) return;  // the client left
          sse_write(sink, dump_json(*last));
          sink.done();
        });
  });
}

}  // namespace glm::gateway
