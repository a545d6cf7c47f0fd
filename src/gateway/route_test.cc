// The route wrapper (route.h): a handler's error becomes the HTTP status of the error-code
// table, Retry-After for the temporary ones and its family's body, counted in /metrics; an OK
// handler's response goes out as it wrote it.
#include "gateway/route.h"

#include <gtest/gtest.h>

#include <string>

namespace glm::gateway {
namespace {

// The wire values each code must give, written out here (not read from the tables under test).
struct Expected {
  ErrorCode code;
  const char* name;
  int http_status;
  const char* openai_type;
  const char* anthropic_type;
};

constexpr Expected kExpected[] = {
    {ErrorCode::kInvalidArgument, "invalid_argument", 400, "invalid_request_error",
     "invalid_request_error"},
    {ErrorCode::kNotFound, "not_found", 404, "invalid_request_error", "not_found_error"},
    {ErrorCode::kBadFile, "bad_file", 422, "server_error", "api_error"},
    {ErrorCode::kUnsupported, "unsupported", 422, "invalid_request_error", "invalid_request_error"},
    {ErrorCode::kContextOverflow, "context_overflow", 413, "invalid_request_error",
     "invalid_request_error"},
    {ErrorCode::kQueueFull, "busy", 429, "rate_limit_error", "rate_limit_error"},
    {ErrorCode::kCancelled, "cancelled", 499, "server_error", "api_error"},
    {ErrorCode::kPeerGone, "peer_gone", 499, "server_error", "api_error"},
    {ErrorCode::kUnavailable, "unavailable", 503, "service_unavailable", "overloaded_error"},
    {ErrorCode::kOutOfMemory, "out_of_memory", 503, "service_unavailable", "overloaded_error"},
    {ErrorCode::kUnauthorized, "unauthorized", 401, "authentication_error", "authentication_error"},
    {ErrorCode::kInternal, "internal", 500, "server_error", "api_error"},
};

class RouteTest : public ::testing::Test {
 protected:
  // Runs `h` wrapped for `f` on an empty request.
  http::Response call(RouteHandler h, ErrorFormat f) {
    http::Response res;
    routes_.wrap(std::move(h), f)(http::Request{}, res);
    return res;
  }
  static RouteHandler failing(ErrorCode code) {
    return [code](const http::Request&, http::Response&) -> RouteStatus {
      return Status(code, "say \"what\" to do");
    };
  }
  int errors_counted(const std::string& name) {
    const std::string text = metrics_.render();
    const std::string key = "glmserve_errors_total{code=\"" + name + "\"} ";
    const size_t at = text.find(key);
    return at == std::string::npos ? 0 : std::stoi(text.substr(at + key.size()));
  }

  Metrics metrics_;
  std::atomic<int> busy_retry_ms_{1500};
  Routes routes_{nullptr, &metrics_, &busy_retry_ms_};  // wrap() only: no server needed
};

TEST_F(RouteTest, EachErrorCodeGivesTheTablesStatusAndTheOpenAIBody) {
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.name);
    const http::Response res = call(failing(e.code), ErrorFormat::kOpenAI);
    EXPECT_EQ(res.status, e.http_status);
    EXPECT_EQ(res.body, std::string(R"({"error":{"code":")") + e.name +
                            R"(","message":"say \"what\" to do","param":null,"type":")" +
                            e.openai_type + R"("}})");
    EXPECT_EQ(res.headers.get("Content-Type"), "application/json");
    EXPECT_EQ(errors_counted(e.name), 1);
  }
}

TEST_F(RouteTest, EachErrorCodeGivesTheTablesStatusAndTheAnthropicBody) {
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.name);
    const http::Response res = call(failing(e.code), ErrorFormat::kAnthropic);
    EXPECT_EQ(res.status, e.http_status);
    EXPECT_EQ(res.body, std::string(R"({"error":{"message":"say \"what\" to do","type":")") +
                            e.anthropic_type + R"("},"type":"error"})");
    EXPECT_EQ(errors_counted(e.name), 1);
  }
}

TEST_F(RouteTest, BusyAndUnavailableSayWhenToComeBack) {
  for (const ErrorFormat f : {ErrorFormat::kOpenAI, ErrorFormat::kAnthropic}) {
    // Busy: the engine's last hint, rounded up to whole seconds.
    http::Response busy = call(failing(ErrorCode::kQueueFull), f);
    EXPECT_EQ(busy.headers.get("Retry-After"), "2");
    EXPECT_EQ(busy.headers.get("retry-after-ms"), "1500");
    // Unavailable (engine down or loading, gateway draining): 2 s.
    http::Response down = call(failing(ErrorCode::kUnavailable), f);
    EXPECT_EQ(down.headers.get("Retry-After"), "2");
    EXPECT_EQ(down.headers.get("retry-after-ms"), "2000");
  }
  busy_retry_ms_ = 1000;
  EXPECT_EQ(call(failing(ErrorCode::kQueueFull), ErrorFormat::kOpenAI).headers.get("Retry-After"),
            "1");
  // No other error is temporary.
  for (const Expected& e : kExpected) {
    if (e.code == ErrorCode::kQueueFull || e.code == ErrorCode::kUnavailable) continue;
    const http::Response res = call(failing(e.code), ErrorFormat::kOpenAI);
    EXPECT_FALSE(res.headers.has("Retry-After")) << e.name;
    EXPECT_FALSE(res.headers.has("retry-after-ms")) << e.name;
  }
}

TEST_F(RouteTest, AnOkHandlersResponseIsUntouched) {
  const http::Response res = call(
      [](const http::Request&, http::Response& r) -> RouteStatus {
        r.status = 201;
        r.set_header("Cache-Control", "no-store");
        r.set_content(R"({"id":"c1"})", "application/json");
        return {};
      },
      ErrorFormat::kAnthropic);
  EXPECT_EQ(res.status, 201);
  EXPECT_EQ(res.body, R"({"id":"c1"})");
  EXPECT_EQ(res.headers.get("Cache-Control"), "no-store");
  EXPECT_FALSE(res.headers.has("Retry-After"));
  EXPECT_EQ(metrics_.render().find("glmserve_errors_total{"), std::string::npos);
}

TEST_F(RouteTest, HeadersSetBeforeTheErrorStay) {
  const http::Response res = call(
      [](const http::Request&, http::Response& r) -> RouteStatus {
        r.set_header("WWW-Authenticate", "Bearer");
        return Status(ErrorCode::kUnauthorized, "send the key");
      },
      ErrorFormat::kOpenAI);
  EXPECT_EQ(res.status, 401);
  EXPECT_EQ(res.headers.get("WWW-Authenticate"), "Bearer");
}

TEST_F(RouteTest, AnUncountedErrorIsWrittenButNotCounted) {
  const http::Response res = call(
      [](const http::Request&, http::Response&) {
        return RouteStatus::uncounted(not_found("no answer is being generated"));
      },
      ErrorFormat::kOpenAI);
  EXPECT_EQ(res.status, 404);
  EXPECT_NE(res.body.find("no answer is being generated"), std::string::npos);
  EXPECT_EQ(errors_counted("not_found"), 0);
}

}  // namespace
}  // namespace glm::gateway
