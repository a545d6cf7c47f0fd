// The page's routes: conversations in SQLite and the streaming chat that stores as it goes.
//
//   GET    /api/conversations                list (most recent first)
//   POST   /api/conversations                {title?, system_prompt?, params?, tools?}
//                                            -> conversation
//   GET    /api/conversations/:id            conversation + messages
//   PATCH  /api/conversations/:id            {title?, system_prompt?, params?, tools?}
//   DELETE /api/conversations/:id
//   POST   /api/conversations/:id/branch     {message_id}: show the branch through that version
//                                            -> conversation + messages
//   GET    /api/conversations/:id/export     JSON download (every branch)
//   POST   /api/conversations/:id/chat       {content, edit_message_id?, regenerate?,
//                                             continue?, tool_result?, params?, tools?}
//                                            -> SSE: start, queued, prefill, token...,
//                                               tool_call, tool_arguments..., notice,
//                                               done | error (docs/gateway.md), with event ids
//   GET    /api/conversations/:id/live       re-attach to the answer being generated: SSE from
//                                            Last-Event-ID + 1 (or ?from=N, default 0)
//   POST   /api/stop                         {request_id}: cancel a generation now
// The chat turn's logic is ChatSession (chat_session.h); its generation is a LiveAnswer
// (live_answer.h) that runs on whether or not a page follows it; these are the HTTP shells.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <nlohmann/json.hpp>
#include <vector>

#include "api/body.h"
#include "core/json.h"
#include "gateway/chat_session.h"
#include "gateway/gateway.h"
#include "gateway/live_answer.h"
#include "protocol/sampling_json.h"

namespace glm::gateway {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kMaxConversations = 500;
constexpr size_t kMaxTitleBytes = 200;

// A conversation with the messages of its branch in view (GET and branch answer it).
nlohmann::ordered_json conversation_with_messages(const Conversation& c,
                                                  const std::vector<StoredMessage>& msgs) {
  nlohmann::ordered_json j = conversation_json(c);
  j["messages"] = nlohmann::ordered_json::array();
  for (const StoredMessage& m : msgs)
    j["messages"].push_back(nlohmann::ordered_json(message_json(m)));
  return j;
}

// The conversation fields of a POST/PATCH body; absent = nullopt.
struct ConversationFields {
  std::optional<std::string> title, system_prompt, params_json, tools_json;
};

// The body's "tools" (OpenAI's tools array), as JSON text in the order the page sent it; nullopt
// when absent or null. `check`: checked as /v1/chat/completions checks it (a chat turn's tools
// are checked by ChatSession::begin instead, with the stored ones, before anything is stored).
StatusOr<std::optional<std::string>> read_tools_field(const api::BodyReader& b,
                                                      const std::string& body_text, bool check) {
  auto it = b.json().find("tools");
  if (it == b.json().end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_array()) return invalid_argument("tools must be an array of functions");
  auto ordered = parse_ordered_json(body_text, "the request body");
  if (!ordered.ok()) return ordered.status();
  if (check) {
    nlohmann::ordered_json functions;
    std::vector<std::string> names;
    GLM_RETURN_IF_ERROR(api::read_openai_tools((*ordered)["tools"], "tools", &functions, &names));
  }
  return std::optional<std::string>(dump_json((*ordered)["tools"]));
}

StatusOr<ConversationFields> read_conversation_fields(api::BodyReader& b,
                                                      const std::string& body_text) {
  ConversationFields f;
  f.title = b.string("title");
  f.system_prompt = b.string("system_prompt");
  if (const json* p = b.object("params")) f.params_json = dump_json(*p);
  if (!b.status().ok()) return b.status();
  auto tools = read_tools_field(b, body_text, /*check=*/true);
  if (!tools.ok()) return tools.status();
  f.tools_json = std::move(tools).value();
  if (f.title && f.title->size() > kMaxTitleBytes) {
    return invalid_argument("title is over " + std::to_string(kMaxTitleBytes) + " bytes");
  }
  return f;
}

// A chat turn from the page's body.
StatusOr<ChatTurn> read_chat_turn(api::BodyReader& b, const std::string& body_text) {
  ChatTurn t;
  t.tool_result = b.string("tool_result");
  t.regenerate = b.boolean("regenerate").value_or(false);
  t.continue_answer = b.boolean("continue").value_or(false);
  t.content = b.string("content").value_or("");
  t.edit_message_id = b.integer("edit_message_id");
  t.system_prompt = b.string("system_prompt");
  t.model = b.string("model").value_or("");
  if (const json* p = b.object("params")) {
    t.params_json = dump_json(*p);
    GLM_RETURN_IF_ERROR(protocol::read_sampling(*p, "params.", &t.params));
  }
  if (!b.status().ok()) return b.status();
  auto tools = read_tools_field(b, body_text, /*check=*/false);
  if (!tools.ok()) return tools.status();
  t.tools_json = std::move(tools).value();
  return t;
}

// Where a re-attaching client starts: after its Last-Event-ID, else at ?from=N, else at 0.
StatusOr<size_t> read_from(const http::Request& req, size_t published) {
  const std::string& last = req.header("Last-Event-ID");
  const std::string text = last.empty() ? req.param("from") : last;
  if (text.empty()) return size_t{0};
  const auto digit = [](unsigned char c) { return std::isdigit(c) != 0; };
  if (text.size() > 9 || !std::all_of(text.begin(), text.end(), digit)) {
    return invalid_argument(last.empty() ? "from must be an event id (a number)"
                                         : "Last-Event-ID must be an event id (a number)");
  }
  const size_t from = std::stoul(text) + (last.empty() ? 0 : 1);
  if (from > published) {
    return invalid_argument("event " + text + " was not sent yet (this answer has " +
                            std::to_string(published) + " events)");
  }
  return from;
}

}  // namespace

void Gateway::follow_live(LiveAnswer& live, size_t from, http::StreamSink& sink) {
  ++followers_;  // drain() waits for the end to be written, not only generated
  live.attach();
  SseWriter out(sink);
  size_t next = from;
  while (true) {
    LiveAnswer::Read r = live.read_from(next, options_.relay.heartbeat_ms);
    next = r.next;
    if (!(r.frames.empty() ? out.heartbeat() : out.frame(r.frames))) break;  // the client left
    if (r.ended) {
      sink.done();
      break;
    }
  }
  live.detach();
  --followers_;
}

void Gateway::generate_live(LiveAnswer& live, ChatSession& session, Started& started,
                            std::chrono::steady_clock::time_point t0) {
  auto emit = [&](const protocol::Event& e) {
    for (const json& payload : session.on_event(e)) live.publish(payload);
    return true;  // nobody following is no reason to stop
  };
  // ... but an answer nobody has followed for this long is: no page is coming back for it.
  auto heartbeat = [&] { return live.detached_ms() < options_.detached_answer_ms; };
  if (started.first) emit(*started.first);
  const EngineClient engine(started.stream->socket_path());  // a resume goes where it went
  RelayResult r = relay_generation(*started.stream, emit, heartbeat, options_.relay, &engine);
  started.ticket.reset();  // no longer in flight before a follower hears of the end
  live.end(session.finish(r, live.shutdown()));
  record_generation("chat", r, t0);
}

StatusOr<protocol::Request> Gateway::continue_request(protocol::Request request,
                                                      const std::string& prefix,
                                                      const std::string& model) {
  if (prefix.empty()) return request;
  protocol::Request q;
  q.type = protocol::RequestType::kTokenize;
  q.id = protocol::make_request_id();
  q.text = prefix;
  auto ev = query_tokens(q, model);
  if (!ev.ok()) return ev.status();
  request.resume = ev->tokens;
  // The continuation gets max_tokens of its own beyond what the answer already has.
  request.params.max_tokens = static_cast<int>(std::min<size_t>(
      generation::kMaxTokensLimit, request.resume.size() + request.params.max_tokens));
  return request;
}

void Gateway::install_chat_routes() {
  auto send_json = [](http::Response& res, const nlohmann::ordered_json& j, int status = 200) {
    res.status = status;
    res.set_header("Cache-Control", "no-store");
    res.set_content(dump_json(j), "application/json");
  };

  routes_->get("/api/conversations",
               [this, send_json](const http::Request&, http::Response& res) -> RouteStatus {
                 auto list = store_->list_conversations(kMaxConversations);
                 if (!list.ok()) return list.status();
                 nlohmann::ordered_json arr = nlohmann::ordered_json::array();
                 for (const Conversation& c : *list) arr.push_back(conversation_json(c));
                 send_json(res, {{"conversations", arr}});
                 return {};
               });

  routes_->post("/api/conversations",
                [this, send_json](const http::Request& req, http::Response& res) -> RouteStatus {
                  api::BodyReader b(req.body);
                  auto f = read_conversation_fields(b, req.body);
                  if (!f.ok()) return f.status();
                  auto c = store_->create_conversation(f->title.value_or(""),
                                                       f->system_prompt.value_or(""),
                                                       f->params_json.value_or("{}"));
                  if (!c.ok()) return c.status();
                  if (f->tools_json) {
                    GLM_RETURN_IF_ERROR(store_->set_conversation_tools(c->id, *f->tools_json));
                    c->tools_json = *f->tools_json;
                  }
                  send_json(res, conversation_json(*c), 201);
                  return {};
                });

  routes_->get(R"(/api/conversations/([A-Za-z0-9_-]+))",
               [this, send_json](const http::Request& req, http::Response& res) -> RouteStatus {
                 auto c = store_->get_conversation(req.matches[1]);
                 if (!c.ok()) return c.status();
                 auto msgs = store_->messages(c->id);
                 if (!msgs.ok()) return msgs.status();
                 nlohmann::ordered_json j = conversation_with_messages(*c, *msgs);
                 // An answer being generated now: the page re-attaches to it (GET .../live).
                 // Not once its row holds the outcome (the row is stored just before the live
                 // answer ends): the page then shows the stored answer.
                 auto still_streaming = [&](int64_t answer_id) {
                   for (const StoredMessage& m : *msgs) {
                     if (m.id == answer_id) return m.status == "streaming";
                   }
                   return false;
                 };
                 if (auto live = live_answers_.find(c->id);
                     live && !live->ended() && still_streaming(live->answer_id())) {
                   j["live"] = {{"request_id", live->request_id()},
                                {"assistant_message_id", live->answer_id()},
                                {"events", live->published()},
                                {"followers", live->followers()}};
                 }
                 send_json(res, j);
                 return {};
               });

  routes_->patch(R"(/api/conversations/([A-Za-z0-9_-]+))",
                 [this, send_json](const http::Request& req, http::Response& res) -> RouteStatus {
                   api::BodyReader b(req.body);
                   auto f = read_conversation_fields(b, req.body);
                   if (!f.ok()) return f.status();
                   auto opt = [](const std::optional<std::string>& v) { return v ? &*v : nullptr; };
                   Status st = store_->update_conversation(
                       req.matches[1], opt(f->title), opt(f->system_prompt), opt(f->params_json));
                   if (st.ok() && f->tools_json) {
                     st = store_->set_conversation_tools(req.matches[1], *f->tools_json);
                   }
                   if (!st.ok()) return st;
                   auto c = store_->get_conversation(req.matches[1]);
                   if (!c.ok()) return c.status();
                   send_json(res, conversation_json(*c));
                   return {};
                 });

  routes_->del(R"(/api/conversations/([A-Za-z0-9_-]+))",
               [this, send_json](const http::Request& req, http::Response& res) -> RouteStatus {
                 // Its generation, if one runs, stops now: nothing is left to store it in.
                 cancel_conversation(req.matches[1]);
                 Status st = store_->delete_conversation(req.matches[1]);
                 if (!st.ok()) return st;
                 send_json(res, {{"deleted", std::string(req.matches[1])}});
                 return {};
               });

  routes_->post(R"(/api/conversations/([A-Za-z0-9_-]+)/branch)",
                [this, send_json](const http::Request& req, http::Response& res) -> RouteStatus {
                  api::BodyReader b(req.body);
                  const auto message_id = b.integer("message_id");
                  if (!b.status().ok()) return b.status();
                  if (!message_id) {
                    return invalid_argument("message_id is required");
                  }
                  if (auto live = live_answers_.find(req.matches[1]); live && !live->ended()) {
                    return invalid_argument("conversation " + std::string(req.matches[1]) +
                                            " is being answered: stop it before switching "
                                            "versions");
                  }
                  Status st = store_->select_branch(req.matches[1], *message_id);
                  if (!st.ok()) return st;
                  auto c = store_->get_conversation(req.matches[1]);
                  if (!c.ok()) return c.status();
                  auto msgs = store_->messages(c->id);
                  if (!msgs.ok()) return msgs.status();
                  send_json(res, conversation_with_messages(*c, *msgs));
                  return {};
                });

  routes_->get(R"(/api/conversations/([A-Za-z0-9_-]+)/export)",
               [this](const http::Request& req, http::Response& res) -> RouteStatus {
                 auto doc = store_->export_json(req.matches[1]);
                 if (!doc.ok()) return doc.status();
                 res.set_header("Content-Disposition", "attachment; filename=\"conversation-" +
                                                           std::string(req.matches[1]) + ".json\"");
                 res.set_content(*doc, "application/json");
                 return {};
               });

  routes_->post("/api/stop",
                [this, send_json](const http::Request& req, http::Response& res) -> RouteStatus {
                  api::BodyReader b(req.body);
                  const std::string id = b.string("request_id").value_or("");
                  if (!b.status().ok()) return b.status();
                  auto stream = find_inflight(id);
                  if (!stream) {
                    return not_found("no generation '" + id + "' in progress");
                  }
                  stream->cancel();
                  send_json(res, {{"stopped", id}});
                  return {};
                });

  routes_->get(
      R"(/api/conversations/([A-Za-z0-9_-]+)/live)",
      [this](const http::Request& req, http::Response& res) -> RouteStatus {
        auto live = live_answers_.find(req.matches[1]);
        if (!live || live->ended()) {
          // Not counted as an error: a page re-attaching just after the end asks.
          return RouteStatus::uncounted(not_found("no answer is being generated in conversation " +
                                                  std::string(req.matches[1]) +
                                                  "; its stored messages have the last one"));
        }
        auto from = read_from(req, live->published());
        if (!from.ok()) return from.status();
        res.set_header("Cache-Control", "no-store");
        res.set_header("X-Accel-Buffering", "no");
        res.set_stream("text/event-stream", [this, live, at = *from](http::StreamSink& sink) {
          follow_live(*live, at, sink);
        });
        return {};
      });

  routes_->post(
      R"(/api/conversations/([A-Za-z0-9_-]+)/chat)",
      [this](const http::Request& req, http::Response& res) -> RouteStatus {
        const auto t0 = Clock::now();
        api::BodyReader b(req.body);
        auto turn = read_chat_turn(b, req.body);
        if (!turn.ok()) return turn.status();
        auto conv = store_->get_conversation(req.matches[1]);
        if (!conv.ok()) return conv.status();
        // Nothing is stored for a turn that cannot start.
        if (draining_) return draining_status();
        if (auto live = live_answers_.find(conv->id); live && !live->ended()) {
          return invalid_argument("conversation " + conv->id + " is being answered (request " +
                                  live->request_id() +
                                  "): stop it first (POST /api/stop) or follow it (GET "
                                  "/api/conversations/" +
                                  conv->id + "/live)");
        }
        // Every answer is labelled with the model that writes it: one database serves every model
        // and instance of a user (docs/gateway.md, "Which model answered").
        turn->answering_model = turn->model.empty() ? model_name() : turn->model;
        auto session = std::make_shared<ChatSession>(store_.get(), std::move(conv).value());
        auto request = session->begin(*turn, "chat-" + protocol::make_request_id());
        if (!request.ok()) return request.status();
        if (turn->continue_answer) {
          request = continue_request(std::move(request).value(), session->prefix(), turn->model);
          if (!request.ok()) return request.status();
        }

        // The engine starts on the request now; the remaining bookkeeping overlaps its prefill.
        auto sent = send_generation(*request, turn->model);
        if (Status st = session->open_answer(); !st.ok()) {
          if (sent.ok()) (*sent)->cancel();
          return st;
        }
        // From here on the page always gets a stream: refusals arrive as its error event, and the
        // answer row records them.
        auto started = sent.ok() ? await_started(std::move(sent).value(), request->conversation)
                                 : StatusOr<Started>(sent.status());
        res.set_header("Cache-Control", "no-store");
        res.set_header("X-Accel-Buffering", "no");
        Status start_error = started.status();
        std::shared_ptr<LiveAnswer> live;
        if (started.ok()) {
          // The generation belongs to the gateway from here: this request is only its first
          // follower (docs/gateway.md, "Live answers").
          live = std::make_shared<LiveAnswer>(session->conversation_id(), request->id,
                                              session->answer_id());
          live->publish(session->start_payload());
          auto state = std::make_shared<Started>(std::move(started).value());
          start_error = live_answers_.start(live, [this, live, session, state, t0] {
            generate_live(*live, *session, *state, t0);
          });
          if (!start_error.ok()) state->stream->cancel();  // another turn of it started meanwhile
        }
        if (!start_error.ok()) {
          session->fail_to_start(start_error);
          metrics_.record_error(error_code_name(start_error.code()));
          res.set_stream("text/event-stream", [session, start_error](http::StreamSink& sink) {
            sse_write(sink, dump_json(session->start_payload()));
            sse_write(sink, dump_json(session->error_payload(start_error)));
            sink.done();
          });
          return {};
        }
        res.set_stream("text/event-stream",
                       [this, live](http::StreamSink& sink) { follow_live(*live, 0, sink); });
        return {};
      });
}

}  // namespace glm::gateway
