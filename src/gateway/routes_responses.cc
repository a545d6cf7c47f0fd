// OpenAI's Responses API: POST /v1/responses (streamed or not), GET and DELETE
// /v1/responses/{id}. A stored response keeps its whole conversation; a follow-up with
// previous_response_id continues it under the chain's engine conversation key, so the engine
// prefills only the new input (usage.input_tokens_details.cached_tokens says how much it reused).
#include <ctime>
#include <random>

#include "api/openai.h"
#include "api/responses.h"
#include "core/json.h"
#include "core/log.h"
#include "gateway/gateway.h"

namespace glm::gateway {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

// "resp_" / "msg_" + 24 hex digits: unguessable enough that one client cannot name another's.
std::string random_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char kHex[] = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += kHex[rng() & 15];
  return id;
}

// The state one POST needs from start to end.
struct ResponseCall {
  api::ResponsesRequest req;
  api::ResponseInfo info;
  std::vector<protocol::Message> conversation;  // history + the new input (no instructions)
  std::string kv_key;
};

}  // namespace

void Gateway::install_responses_routes() {
  routes_->post(
      "/v1/responses", [this](const http::Request& http_req, http::Response& res) -> RouteStatus {
        const auto t0 = Clock::now();
        auto parsed = api::parse_responses_request(http_req.body);
        if (!parsed.ok()) return parsed.status();
        auto call = std::make_shared<ResponseCall>();
        call->req = std::move(parsed).value();
        api::ResponsesRequest& r = call->req;
        call->info.id = random_id("resp_");
        call->info.message_id = random_id("msg_");
        call->info.created_at = static_cast<int64_t>(std::time(nullptr));
        call->info.model = r.model.empty() ? model_name() : r.model;
        call->info.instructions = r.instructions;
        call->info.previous_response_id = r.previous_response_id;
        call->info.store = r.store;
        call->info.params = &r.request.params;
        call->kv_key = r.store ? call->info.id : "";
        if (!r.previous_response_id.empty()) {
          auto prev = store_->get_response(r.previous_response_id);
          if (!prev.ok()) return prev.status();
          auto history = api::messages_from_json(prev->messages_json);
          if (!history.ok()) return history.status();
          call->conversation = std::move(history).value();
          call->kv_key = prev->kv_key;
        }
        for (protocol::Message& m : r.request.messages) call->conversation.push_back(std::move(m));
        // The engine gets the instructions (this response's only) and the whole conversation.
        r.request.messages.clear();
        if (!r.instructions.empty()) r.request.messages.push_back({"system", r.instructions, ""});
        r.request.messages.insert(r.request.messages.end(), call->conversation.begin(),
                                  call->conversation.end());
        r.request.conversation = call->kv_key;
        r.request.id = "resp-" + protocol::make_request_id();
        auto started = start_generation(r.request, call->info.model);
        if (!started.ok()) return started.status();
        auto state = std::make_shared<Started>(std::move(started).value());

        // Stores a complete answer with its conversation (store: true) and returns the object.
        auto finish = [this, call](const RelayResult& result) {
          json object = api::response_json(call->info, result.text, &result.outcome, result.usage,
                                           result.reasoning);
          if (call->req.store) {
            std::vector<protocol::Message> all = call->conversation;
            all.push_back({"assistant", result.text, ""});
            StoredResponse stored{call->info.id, call->kv_key, api::messages_to_json(all),
                                  dump_json(object), now_unix_ms()};
            const Status st = store_->put_response(stored);
            if (!st.ok()) {
              GLM_LOG_WARN("responses: could not store %s: %s", call->info.id.c_str(),
                           st.to_string().c_str());
            }
          }
          return object;
        };

        if (r.stream) {
          res.set_header("Cache-Control", "no-store");
          res.set_header("X-Accel-Buffering", "no");
          res.set_stream("text/event-stream", [this, call, state, t0,
                                               finish](http::StreamSink& sink) {
            SseWriter out(sink);
            int seq = 0;
            const api::ResponseInfo& info = call->info;
            const json pending = api::response_json(info, "", nullptr, {});
            const json empty_part = {
                {"type", "output_text"}, {"text", ""}, {"annotations", json::array()}};
            out.frame(api::response_event("response.created", {{"response", pending}}, &seq));
            out.frame(api::response_event("response.in_progress", {{"response", pending}}, &seq));
            // Output items open as their text arrives: a reasoning model's thinking first (a
            // reasoning item), then the message; `where` is the message's place once it is open.
            int n_items = 0;
            json where;            // the message's item_id, output_index, content_index
            json reasoning_where;  // the reasoning item's, while it is open
            std::string reasoning;
            auto open_message = [&] {
              if (!where.is_null()) return;
              where = {
                  {"item_id", info.message_id}, {"output_index", n_items++}, {"content_index", 0}};
              out.frame(api::response_event("response.output_item.added",
                                            {{"output_index", where["output_index"]},
                                             {"item",
                                              {{"type", "message"},
                                               {"id", info.message_id},
                                               {"status", "in_progress"},
                                               {"role", "assistant"},
                                               {"content", json::array()}}}},
                                            &seq));
              json added = where;
              added["part"] = empty_part;
              out.frame(api::response_event("response.content_part.added", added, &seq));
            };
            auto close_reasoning = [&] {
              if (reasoning_where.is_null()) return;
              json done = reasoning_where;
              done["text"] = reasoning;
              out.frame(api::response_event("response.reasoning_text.done", done, &seq));
              out.frame(
                  api::response_event("response.output_item.done",
                                      {{"output_index", reasoning_where["output_index"]},
                                       {"item", api::reasoning_item_json(info, reasoning, true)}},
                                      &seq));
              reasoning_where = json();
            };
            auto emit = [&](const protocol::Event& e) {
              if (e.type != protocol::EventType::kToken) return out.ok();
              if (!e.reasoning.empty() && where.is_null()) {
                if (reasoning_where.is_null()) {
                  const json item = api::reasoning_item_json(info, "", false);
                  reasoning_where = {
                      {"item_id", item["id"]}, {"output_index", n_items++}, {"content_index", 0}};
                  out.frame(api::response_event(
                      "response.output_item.added",
                      {{"output_index", reasoning_where["output_index"]}, {"item", item}}, &seq));
                }
                reasoning += e.reasoning;
                json delta = reasoning_where;
                delta["delta"] = e.reasoning;
                out.frame(api::response_event("response.reasoning_text.delta", delta, &seq));
              }
              if (e.text.empty()) return out.ok();
              close_reasoning();
              open_message();
              json delta = where;
              delta["delta"] = e.text;
              return out.frame(api::response_event("response.output_text.delta", delta, &seq));
            };
            RelayResult result = relay_started(
                *state, emit, [&] { return out.heartbeat(); }, "responses", t0);
            if (result.outcome == api::Outcome::kDisconnected) return;
            if (!api::is_complete(result.outcome)) {
              const Status st = cut_or_error(result);
              out.frame(api::response_event("error",
                                            {{"code", error_code_name(st.code())},
                                             {"message", st.message()},
                                             {"param", nullptr}},
                                            &seq));
            } else {
              close_reasoning();
              open_message();  // an empty answer still has its message
              const json object = finish(result);
              const json& message = object["output"].back();
              json text_done = where;
              text_done["text"] = result.text;
              out.frame(api::response_event("response.output_text.done", text_done, &seq));
              json part_done = where;
              part_done["part"] = message["content"][0];
              out.frame(api::response_event("response.content_part.done", part_done, &seq));
              out.frame(api::response_event(
                  "response.output_item.done",
                  {{"output_index", where["output_index"]}, {"item", message}}, &seq));
              out.frame(api::response_event(
                  object["status"] == "completed" ? "response.completed" : "response.incomplete",
                  {{"response", object}}, &seq));
            }
            sink.done();
          });
          return {};
        }
        RelayResult result = relay_unstreamed(*state, http_req, "responses", t0);
        res.set_header("Cache-Control", "no-store");
        if (RouteStatus st = unfinished(result); !st.ok()) return st;
        res.set_content(dump_json(finish(result)), "application/json");
        return {};
      });

  routes_->get(R"(/v1/responses/([A-Za-z0-9_]+))",
               [this](const http::Request& req, http::Response& res) -> RouteStatus {
                 auto stored = store_->get_response(req.matches[1]);
                 if (!stored.ok()) return stored.status();
                 res.set_content(stored->response_json, "application/json");
                 return {};
               });

  routes_->del(R"(/v1/responses/([A-Za-z0-9_]+))",
               [this](const http::Request& req, http::Response& res) -> RouteStatus {
                 const std::string id = req.matches[1];
                 const Status st = store_->delete_response(id);
                 if (!st.ok()) return st;
                 res.set_content(
                     dump_json(json{{"id", id}, {"object", "response"}, {"deleted", true}}),
                     "application/json");
                 return {};
               });
}

}  // namespace glm::gateway
