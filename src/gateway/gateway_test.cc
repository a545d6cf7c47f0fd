// The gateway over HTTP against the scripted FakeEngine: OpenAI shapes (streaming and not),
// errors, auth, limits, CORS, security headers, health, metrics, and disconnect -> cancel.
// The page's conversation API is in chat_api_test.cc.
#include "gateway/gateway.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "gateway/fake_engine.h"
#include "gateway/http_test_util.h"

namespace glm::gateway::testing {
namespace {

using json = nlohmann::json;

const std::string kChat = "/v1/chat/completions";

std::string chat_body(const std::string& content, bool stream, const std::string& extra = "") {
  json j = {{"model", "whatever"},
            {"messages", json::array({{{"role", "user"}, {"content", content}}})},
            {"stream", stream}};
  std::string s = j.dump();
  if (!extra.empty()) s = s.substr(0, s.size() - 1) + "," + extra + "}";
  return s;
}

TEST(GatewayOpenAI, NonStreamingShape) {
  TestGateway t("ns");
  auto r = t.post(kChat, chat_body("hi", false));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["model"], "whatever");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Echo: hi");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"]["completion_tokens"], 2);  // "Echo", ": hi"
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["prompt_tokens"].get<int>() + 2);
}

TEST(GatewayOpenAI, StreamingShape) {
  TestGateway t("st");
  auto r = t.post(kChat, chat_body("[zh]", true, R"("stream_options":{"include_usage":true})"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("Content-Type"), "text/event-stream");
  auto events = sse_data(r.body);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.back(), "[DONE]");
  json first = json::parse(events[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  std::string finish;
  bool usage_seen = false;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    json c = json::parse(events[i]);
    EXPECT_EQ(c["id"], first["id"]);
    if (c.contains("usage")) {
      usage_seen = true;
      EXPECT_EQ(c["usage"]["completion_tokens"], 4);
      EXPECT_TRUE(c["choices"].empty());
      continue;
    }
    const json& ch = c["choices"][0];
    if (ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
  }
  EXPECT_EQ(text, "你好，世界！");
  EXPECT_EQ(finish, "stop");
  EXPECT_TRUE(usage_seen);
}

TEST(GatewayOpenAI, ErrorsInOpenAIShapeWithHttpStatus) {
  TestGateway t("err");
  struct Case {
    std::string body;
    int status;
    const char* type;
  };
  const Case cases[] = {
      {"not json", 400, "invalid_request_error"},
      {R"({"messages":[]})", 400, "invalid_request_error"},
      {R"({"messages":[{"role":"wizard","content":"x"}]})", 400, "invalid_request_error"},
      {R"({"messages":[{"role":"user","content":"x"}],"temperature":7})", 400,
       "invalid_request_error"},
      {chat_body("[busy]", true), 429, "rate_limit_error"},
      {chat_body("[busy]", false), 429, "rate_limit_error"},
  };
  for (const Case& c : cases) {
    auto r = t.post(kChat, c.body);
    EXPECT_EQ(r.status, c.status) << c.body << " -> " << r.body;
    json j = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.body;
    EXPECT_EQ(j["error"]["type"], c.type) << r.body;
    EXPECT_FALSE(j["error"]["message"].get<std::string>().empty());
    EXPECT_TRUE(j["error"].contains("code"));
  }
  auto nf = t.get("/v1/nothing");
  EXPECT_EQ(nf.status, 404);
  EXPECT_TRUE(json::parse(nf.body)["error"].is_object());
}

TEST(GatewayOpenAI, EngineDownIs503) {
  TestGateway t("down");
  t.fake().stop();
  auto r = t.post(kChat, chat_body("hi", true));
  EXPECT_EQ(r.status, 503);
  json j = json::parse(r.body);
  EXPECT_NE(j["error"]["message"].get<std::string>().find("glmserve engine"), std::string::npos);
  auto h = t.get("/health");
  EXPECT_EQ(h.status, 503);
  EXPECT_EQ(json::parse(h.body)["status"], "down");
  // The engine comes back: the next request works with no gateway restart.
  t.fake().start();
  EXPECT_EQ(t.post(kChat, chat_body("hi", false)).status, 200);
  EXPECT_EQ(t.get("/health").status, 200);
}

TEST(GatewayOpenAI, EngineCrashMidStreamEndsWithErrorEvent) {
  TestGateway t("crash");
  auto r = t.post(kChat, chat_body("[crash] go", true));
  ASSERT_EQ(r.status, 200);
  auto events = sse_data(r.body);
  ASSERT_FALSE(events.empty());
  json last = json::parse(events.back());
  ASSERT_TRUE(last.contains("error")) << events.back();
  EXPECT_NE(last["error"]["message"].get<std::string>().find("crashed or restarted"),
            std::string::npos);
}

TEST(GatewayOpenAI, NonStreamedAnswerThatFailsGetsAnErrorStatus) {
  // The engine dies after three tokens: the client gets 503 and an OpenAI error object, which
  // the SDKs raise, not 200 with an error body.
  TestGateway t("crashns");
  auto r = t.post(kChat, chat_body("[crash] go", false));
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_FALSE(r.header("Retry-After").empty());
  json j = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.body;
  EXPECT_EQ(j["error"]["type"], "service_unavailable") << r.body;
  EXPECT_NE(j["error"]["message"].get<std::string>().find("crashed or restarted"),
            std::string::npos);
}

// The text of an OpenAI stream's content deltas, and whether it ended with [DONE].
std::string streamed_text(const std::vector<std::string>& events, int* n_chunks = nullptr) {
  std::string text;
  for (const std::string& e : events) {
    if (e == "[DONE]") continue;
    json c = json::parse(e);
    if (c.contains("choices") && !c["choices"].empty() &&
        c["choices"][0]["delta"].contains("content")) {
      text += c["choices"][0]["delta"]["content"].get<std::string>();
      if (n_chunks) ++*n_chunks;
    }
  }
  return text;
}

TEST(GatewayResume, EngineCrashMidStreamIsResumedAfterItsTokens) {
  TestGateway t("resume");
  const std::string msg = "[crash-once][resume] tell me more";
  auto r = t.post(kChat, chat_body(msg, true, R"("stream_options":{"include_usage":true})"));
  ASSERT_EQ(r.status, 200);
  auto events = sse_data(r.body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]") << r.body;
  int chunks = 0;
  // Every piece once, in order: nothing repeated, nothing lost.
  EXPECT_EQ(streamed_text(events, &chunks), "Echo: " + msg);
  EXPECT_EQ(chunks, static_cast<int>(("Echo: " + msg).size() + 3) / 4);
  json usage = json::parse(events[events.size() - 2])["usage"];
  EXPECT_EQ(usage["completion_tokens"], chunks);
  auto reqs = t.fake().requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_TRUE(reqs[0].resume.empty());
  EXPECT_EQ(reqs[1].resume, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(reqs[1].id, reqs[0].id);
  // The gateway chose a seed, and the resume carries the same one.
  EXPECT_NE(reqs[0].params.seed, 0u);
  EXPECT_EQ(reqs[1].params.seed, reqs[0].params.seed);

  // Not streamed: one complete answer, status 200.
  auto ns = t.post(kChat, chat_body(msg, false));
  ASSERT_EQ(ns.status, 200) << ns.body;
  EXPECT_EQ(json::parse(ns.body)["choices"][0]["message"]["content"], "Echo: " + msg);
}

// Streams `msg`, which the fake engine cuts after three tokens once: the client gets the whole
// answer, and the engine a second request resumed after those three.
void expect_whole_after_one_resume(TestGateway& t, const std::string& msg) {
  const size_t before = t.fake().requests().size();
  auto r = t.post(kChat, chat_body(msg, true));
  ASSERT_EQ(r.status, 200);
  auto events = sse_data(r.body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]") << r.body;
  EXPECT_EQ(streamed_text(events), "Echo: " + msg);
  ASSERT_EQ(t.fake().requests().size(), before + 2);
  EXPECT_EQ(t.fake().requests()[before + 1].resume, (std::vector<int32_t>{0, 1, 2}));
}

TEST(GatewayResume, AnAnswerCutByTheEnginesDrainGoesOnAfterTheRestart) {
  TestGateway t("resumedrain");
  expect_whole_after_one_resume(t, "[drained-once][resume] a restart");
}

// An engine whose GPU was lost fails its answers with "restart" and exits to be restarted: the
// answer goes on after its tokens, as after a crash. The same error without "restart" (a
// request's own failure) ends the answer; a loss every time ends it after three resumes,
// naming the loss.
TEST(GatewayResume, AnAnswerWhoseEngineLostItsGpuGoesOnAfterTheRestart) {
  TestGateway t("resumelost");
  const std::string msg = "[lost-once][resume] a lost device";
  expect_whole_after_one_resume(t, msg);
  auto ns = t.post(kChat, chat_body(msg, false));
  ASSERT_EQ(ns.status, 200) << ns.body;
  EXPECT_EQ(json::parse(ns.body)["choices"][0]["message"]["content"], "Echo: " + msg);

  auto failed = t.post(kChat, chat_body("[failed-once][resume] no restart", true));
  ASSERT_EQ(failed.status, 200);
  auto tail = sse_data(failed.body);
  ASSERT_FALSE(tail.empty());
  EXPECT_NE(tail.back().find("VK_ERROR_DEVICE_LOST"), std::string::npos) << failed.body;
  EXPECT_EQ(failed.body.find("[DONE]"), std::string::npos);
  EXPECT_EQ(t.fake().requests().size(), 5u);  // 2 + 2 above, and this one not resumed

  auto every = t.post(kChat, chat_body("[lost][resume] every time", false));
  EXPECT_EQ(every.status, 503) << every.body;
  const std::string message = json::parse(every.body)["error"]["message"];
  EXPECT_NE(message.find("4 times (the last: "), std::string::npos) << message;
  EXPECT_NE(message.find("VK_ERROR_DEVICE_LOST"), std::string::npos) << message;
  EXPECT_EQ(t.fake().requests().size(), 9u);
}

TEST(GatewayResume, AnEngineThatIsDownForAWhileIsWaitedFor) {
  TestGateway t("resumedown");
  RawHttp raw(t.port());
  raw.send_request("POST", kChat, chat_body("[slow][resume]", true));
  ASSERT_TRUE(raw.read_until("w5 ", 10000)) << raw.received();
  t.fake().stop();  // the engine dies: its socket and every connection close
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  t.fake().start();
  ASSERT_TRUE(raw.read_until("[DONE]", 20000)) << raw.received();
  std::string expected;
  for (int i = 0; i < 200; ++i) expected += "w" + std::to_string(i) + " ";
  EXPECT_EQ(streamed_text(sse_data(raw.result().body)), expected);
}

TEST(GatewayResume, BoundedInAttemptsAndTime) {
  TestGateway t("resumebound");
  // An engine that dies every time at the same place: three resumes, then an error.
  auto r = t.post(kChat, chat_body("[crash][resume] go", true));
  ASSERT_EQ(r.status, 200);
  auto events = sse_data(r.body);
  ASSERT_FALSE(events.empty());
  json last = json::parse(events.back());
  ASSERT_TRUE(last.contains("error")) << r.body;
  EXPECT_NE(last["error"]["message"].get<std::string>().find("4 times"), std::string::npos)
      << r.body;
  EXPECT_EQ(t.fake().requests().size(), 4u);
  EXPECT_EQ(t.post(kChat, chat_body("[crash][resume] go", false)).status, 503);

  // An engine that does not come back within the window.
  GatewayOptions o;
  o.relay.resume.window_ms = 300;
  TestGateway w("resumewin", o);
  RawHttp raw(w.port());
  raw.send_request("POST", kChat, chat_body("[slow][resume]", true));
  ASSERT_TRUE(raw.read_until("w2 ", 10000)) << raw.received();
  const auto t0 = std::chrono::steady_clock::now();
  w.fake().stop();
  ASSERT_TRUE(raw.read_until("", 10000));
  const double waited_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(waited_s, 3.0);
  auto tail = sse_data(raw.result().body);
  ASSERT_FALSE(tail.empty());
  EXPECT_NE(tail.back().find("did not take it back within 0.3 s"), std::string::npos)
      << raw.received();
  EXPECT_EQ(raw.received().find("[DONE]"), std::string::npos);
}

TEST(GatewayOpenAI, ApiKeyRequiredWhenConfigured) {
  GatewayOptions o;
  o.api_key = "s3cret";
  TestGateway t("auth", o);
  auto no = t.post(kChat, chat_body("hi", false));
  EXPECT_EQ(no.status, 401);
  EXPECT_EQ(json::parse(no.body)["error"]["type"], "authentication_error");
  auto wrong = t.post(kChat, chat_body("hi", false), {{"Authorization", "Bearer s3cre"}});
  EXPECT_EQ(wrong.status, 401);
  auto ok = t.post(kChat, chat_body("hi", false), {{"Authorization", "Bearer s3cret"}});
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(t.get("/api/conversations").status, 401);
  EXPECT_EQ(t.get("/v1/models").status, 401);
  // The page and the health check stay public.
  EXPECT_EQ(t.get("/").status, 200);
  EXPECT_EQ(t.get("/health").status, 200);
}

TEST(GatewayOpenAI, BodyLimit) {
  GatewayOptions o;
  o.max_body_bytes = 4096;
  TestGateway t("limit", o);
  auto r = t.post(kChat, chat_body(std::string(8000, 'a'), false));
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(t.post(kChat, chat_body("small", false)).status, 200);
}

TEST(GatewayOpenAI, ClientDisconnectCancelsTheEngineRequest) {
  TestGateway t("disc");
  for (bool stream : {true, false}) {
    const size_t before = t.fake().requests().size();
    RawHttp raw(t.port());
    raw.send_request("POST", kChat, chat_body("[slow]", stream));
    if (stream) {
      ASSERT_TRUE(raw.read_until("w0", 5000)) << raw.received();  // the first token
    } else {
      // Nothing is written before the answer is known (its status is the outcome's): wait
      // until the engine has the request, then leave.
      for (int i = 0; i < 500 && t.fake().requests().size() == before; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      EXPECT_FALSE(raw.read_until("HTTP/1.1", 300)) << raw.received();
    }
    raw.close();
    auto reqs = t.fake().requests();
    ASSERT_FALSE(reqs.empty());
    EXPECT_TRUE(t.fake().wait_cancelled(reqs.back().id, 5000))
        << "the engine never saw a cancel for " << reqs.back().id << " stream=" << stream;
  }
  // Both show up as disconnected generations.
  for (int i = 0; i < 500 && t.gateway().metrics().generations() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(t.get("/metrics").body.find("outcome=\"disconnected\"} 2"), std::string::npos);
}

TEST(GatewayHttp, SecurityHeaders) {
  TestGateway t("sec");
  for (const char* path : {"/", "/health", "/v1/models"}) {
    auto r = t.get(path);
    EXPECT_NE(r.header("Content-Security-Policy").find("frame-ancestors 'none'"), std::string::npos)
        << path;
    EXPECT_NE(r.header("Content-Security-Policy").find("script-src 'self'"), std::string::npos);
    EXPECT_EQ(r.header("Content-Security-Policy").find("unsafe-inline"), std::string::npos);
    EXPECT_EQ(r.header("X-Content-Type-Options"), "nosniff") << path;
  }
  // A page on another host name (DNS rebinding) is refused.
  auto evil = t.get("/api/conversations", {{"Host", "evil.example:80"}});
  EXPECT_EQ(evil.status, 421);
  // The page's API takes no cross-site form posts (a browser's carry an Origin).
  auto form = t.post("/api/conversations", "title=x", {{"Origin", "http://evil.example"}},
                     "application/x-www-form-urlencoded");
  EXPECT_EQ(form.status, 415);
}

TEST(GatewayHttp, CorsOffUnlessConfigured) {
  {
    TestGateway t("cors0");
    auto r = t.get("/v1/models", {{"Origin", "http://example.com"}});
    EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "");
  }
  GatewayOptions o;
  o.cors_origin = "http://app.example";
  TestGateway t("cors1", o);
  auto pre =
      t.request("OPTIONS", kChat, "",
                {{"Origin", "http://app.example"}, {"Access-Control-Request-Method", "POST"}});
  EXPECT_EQ(pre.status, 204);
  EXPECT_EQ(pre.header("Access-Control-Allow-Origin"), "http://app.example");
  auto other = t.get("/v1/models", {{"Origin", "http://other.example"}});
  EXPECT_EQ(other.header("Access-Control-Allow-Origin"), "");
  auto same = t.get("/v1/models", {{"Origin", "http://app.example"}});
  EXPECT_EQ(same.header("Access-Control-Allow-Origin"), "http://app.example");
}

TEST(GatewayHttp, HealthFollowsTheEngine) {
  TestGateway t("health");
  auto r = t.get("/health");
  EXPECT_EQ(r.status, 200);
  json j = json::parse(r.body);
  EXPECT_EQ(j["status"], "ready");
  EXPECT_EQ(j["model"], "fake-glm");
  EXPECT_FALSE(j.contains("load"));
  t.fake().set_health(generation::Health::kLoading, 3 << 20, 4 << 20);
  r = t.get("/health");
  EXPECT_EQ(r.status, 503);
  j = json::parse(r.body);
  EXPECT_EQ(j["status"], "loading");
  // The engine's load progress, passed on.
  EXPECT_EQ(j["load"]["done_bytes"], 3 << 20);
  EXPECT_EQ(j["load"]["total_bytes"], 4 << 20);
  EXPECT_EQ(j["load"]["percent"], 75);
  auto models = t.get("/v1/models");
  EXPECT_EQ(json::parse(models.body)["data"][0]["id"], "fake-glm");
}

TEST(GatewayHttp, MetricsCountGenerationsAndErrors) {
  TestGateway t("metrics");
  ASSERT_EQ(t.post(kChat, chat_body("hi", false)).status, 200);
  ASSERT_EQ(t.post(kChat, chat_body("[busy]", false)).status, 429);
  auto m = t.get("/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.header("Content-Type").find("text/plain; version=0.0.4"), std::string::npos);
  const std::string& b = m.body;
  EXPECT_NE(b.find("# TYPE glmserve_ttft_seconds histogram"), std::string::npos);
  EXPECT_NE(b.find("glmserve_ttft_seconds_count 1"), std::string::npos);
  EXPECT_NE(b.find("glmserve_e2e_seconds_count 1"), std::string::npos);
  EXPECT_NE(b.find("glmserve_queue_seconds_bucket{le=\"+Inf\"} 1"), std::string::npos);
  EXPECT_NE(b.find("glmserve_tpot_seconds_count 1"), std::string::npos);
  EXPECT_NE(b.find("glmserve_generations_total{route=\"openai\",outcome=\"stop\"} 1"),
            std::string::npos);
  EXPECT_NE(b.find("glmserve_errors_total{code=\"busy\"} 1"), std::string::npos);
  EXPECT_NE(b.find("glmserve_completion_tokens_total 2"), std::string::npos);
}

TEST(GatewayHttp, PageIsServedCompressedWithCaching) {
  TestGateway t("page");
  auto plain = t.get("/");
  ASSERT_EQ(plain.status, 200);
  EXPECT_NE(plain.header("Content-Type").find("text/html"), std::string::npos);
  EXPECT_NE(plain.body.find("<html"), std::string::npos);
  const std::string etag = plain.header("ETag");
  ASSERT_FALSE(etag.empty());
  EXPECT_EQ(t.get("/", {{"If-None-Match", etag}}).status, 304);
  auto gz = t.get("/", {{"Accept-Encoding", "gzip, br"}});
  if (!gz.header("Content-Encoding").empty()) {
    EXPECT_EQ(gz.header("Content-Encoding"), "gzip");
    EXPECT_LT(gz.body.size(), plain.body.size());
  }
}

TEST(GatewayOpenAIRoutes, ModelByIdAndEmbeddingsAnswerInOpenAiShape) {
  TestGateway t("models");
  auto one = t.get("/v1/models/fake-glm");
  EXPECT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(nlohmann::json::parse(one.body)["id"], "fake-glm");
  auto other = t.get("/v1/models/gpt-4");
  EXPECT_EQ(other.status, 404);
  EXPECT_NE(other.body.find("serves 'fake-glm'"), std::string::npos) << other.body;
  auto emb = t.post("/v1/embeddings", R"({"model":"x","input":"hi"})");
  EXPECT_EQ(emb.status, 422) << emb.body;  // unsupported
  EXPECT_NE(emb.body.find("no embeddings"), std::string::npos) << emb.body;
  EXPECT_NE(emb.body.find("invalid_request_error"), std::string::npos) << emb.body;
}

}  // namespace
}  // namespace glm::gateway::testing
