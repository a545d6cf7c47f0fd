#include "protocol/protocol.h"

#include <gtest/gtest.h>

#include <string>

#include "core/json.h"
#include "protocol/line_buffer.h"

namespace glm::protocol {
namespace {

Request parse_ok(const std::string& line) {
  auto r = parse_request(line);
  EXPECT_TRUE(r.ok()) << line << " -> " << r.status().to_string();
  return r.ok() ? *r : Request{};
}

// Expects parse_request to fail with `code` and a message containing `needle`.
void expect_error(const std::string& line, const std::string& needle,
                  ErrorCode code = ErrorCode::kInvalidArgument, const Limits& limits = {}) {
  auto r = parse_request(line, limits);
  ASSERT_FALSE(r.ok()) << "accepted: " << line;
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_NE(r.status().message().find(needle), std::string::npos)
      << "message '" << r.status().message() << "' lacks '" << needle << "'";
}

TEST(ParseRequest, FullGenerateRequest) {
  Request r = parse_ok(
      R"({"id":"r1","conversation":"c7","messages":[{"role":"system","content":"be brief"},)"
      R"({"role":"user","content":"你好"}],"params":{"temperature":0.7,"top_p":0.9,"top_k":40,)"
      R"("repetition_penalty":1.1,"seed":42,"max_tokens":512,"stop":["\n\n","END"]}})");
  EXPECT_EQ(r.type, RequestType::kGenerate);
  EXPECT_EQ(r.id, "r1");
  EXPECT_FALSE(r.id_assigned);
  EXPECT_EQ(r.conversation, "c7");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "你好");
  EXPECT_FLOAT_EQ(r.params.temperature, 0.7);
  EXPECT_FLOAT_EQ(r.params.top_p, 0.9);
  EXPECT_EQ(r.params.top_k, 40);
  EXPECT_FLOAT_EQ(r.params.repetition_penalty, 1.1);
  EXPECT_EQ(r.params.seed, 42u);
  EXPECT_EQ(r.params.max_tokens, 512);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"\n\n", "END"}));
}

TEST(ParseRequest, MinimalRequestGetsAnIdAndDefaults) {
  Request a = parse_ok(R"({"messages":[{"role":"user","content":"hi"}]})");
  Request b = parse_ok(R"({"messages":[{"role":"user","content":"hi"}]})");
  EXPECT_TRUE(a.id_assigned);
  EXPECT_FALSE(a.id.empty());
  EXPECT_NE(a.id, b.id);
  EXPECT_EQ(a.params, SamplingParams{});
}

TEST(ParseRequest, LegacyChatGlmShape) {
  Request r =
      parse_ok(R"({"prompt":"and now?","history":[["q1","a1"],["q2","a2"]],"max_length":64,)"
               R"("top_p":0.5,"temperature":0.2})");
  ASSERT_EQ(r.messages.size(), 5u);
  EXPECT_EQ(r.messages[0].role, "user");
  EXPECT_EQ(r.messages[0].content, "q1");
  EXPECT_EQ(r.messages[1].role, "assistant");
  EXPECT_EQ(r.messages[3].content, "a2");
  EXPECT_EQ(r.messages[4].role, "user");
  EXPECT_EQ(r.messages[4].content, "and now?");
  EXPECT_EQ(r.params.max_tokens, 64);
  EXPECT_FLOAT_EQ(r.params.top_p, 0.5);
  EXPECT_FLOAT_EQ(r.params.temperature, 0.2);
  Request bare = parse_ok(R"({"prompt":"hi"})");
  ASSERT_EQ(bare.messages.size(), 1u);
  EXPECT_FALSE(bare.raw);
}

TEST(ParseRequest, RawPrompt) {
  Request r = parse_ok(R"({"raw":true,"prompt":"Once upon a time"})");
  EXPECT_TRUE(r.raw);
  EXPECT_EQ(r.prompt, "Once upon a time");
  EXPECT_TRUE(r.messages.empty());
}

TEST(ParseRequest, OtherRequestTypes) {
  Request h = parse_ok(R"({"type":"health"})");
  EXPECT_EQ(h.type, RequestType::kHealth);
  EXPECT_TRUE(h.id_assigned);
  EXPECT_EQ(parse_ok(R"({"type":"stats","id":"s"})").type, RequestType::kStats);
  Request c = parse_ok(R"({"type":"cancel","id":"r1"})");
  EXPECT_EQ(c.type, RequestType::kCancel);
  EXPECT_EQ(c.id, "r1");
  Request t = parse_ok(R"({"type":"tokenize","text":"hello"})");
  EXPECT_EQ(t.type, RequestType::kTokenize);
  EXPECT_EQ(t.text, "hello");
}

// Adapters (docs/adapters.md): a generate request's `adapter`, and the load / unload requests,
// each read back from its own serialization.
TEST(ParseRequest, AdapterFieldAndAdapterRequests) {
  Request g = parse_ok(R"({"id":"g","adapter":"chatglm3-6b:ad","prompt":"x","raw":true})");
  EXPECT_EQ(g.adapter, "chatglm3-6b:ad");
  EXPECT_EQ(parse_ok(serialize_request(g)).adapter, "chatglm3-6b:ad");
  Request l = parse_ok(R"({"type":"load_adapter","adapter":"ad","path":"/m/a.gguf","scale":0.5})");
  EXPECT_EQ(l.type, RequestType::kLoadAdapter);
  EXPECT_EQ(l.adapter, "ad");
  EXPECT_EQ(l.path, "/m/a.gguf");
  EXPECT_EQ(l.scale, 0.5f);
  Request back = parse_ok(serialize_request(l));
  EXPECT_EQ(back.type, RequestType::kLoadAdapter);
  EXPECT_EQ(back.path, "/m/a.gguf");
  EXPECT_EQ(back.scale, 0.5f);
  Request u = parse_ok(R"({"type":"unload_adapter","adapter":"ad"})");
  EXPECT_EQ(u.type, RequestType::kUnloadAdapter);
  EXPECT_EQ(parse_ok(serialize_request(u)).adapter, "ad");
  expect_error(R"({"type":"load_adapter","adapter":"ad"})", "path");
  expect_error(R"({"type":"unload_adapter"})", "adapter");
  expect_error(R"({"type":"load_adapter","adapter":"ad","path":"p","scale":"x"})", "scale");
  expect_error(R"({"adapter":7,"prompt":"x","raw":true})", "adapter");
  // The client's model name, which the engine resolves (an adapter served under it, or none).
  Request m = parse_ok(R"({"id":"m","model":"gpt-4o","prompt":"x","raw":true})");
  EXPECT_EQ(m.model, "gpt-4o");
  EXPECT_EQ(parse_ok(serialize_request(m)).model, "gpt-4o");
  EXPECT_TRUE(parse_ok(R"({"id":"n","prompt":"x","raw":true})").model.empty());
  expect_error(R"({"model":"","prompt":"x","raw":true})", "model");
}

TEST(ParseRequest, CarriageReturnIsTolerated) {
  EXPECT_EQ(parse_ok("{\"type\":\"health\"}\r").type, RequestType::kHealth);
}

TEST(ParseRequest, RejectsMalformedLines) {
  expect_error("", "not valid JSON");
  expect_error("{\"messages\":", "not valid JSON");
  expect_error("[1,2]", "must be a JSON object");
  expect_error("\"hi\"", "must be a JSON object");
  expect_error(std::string("{\"prompt\":\"\xff\xfe\"}"), "not valid UTF-8");
  expect_error(std::string("{\"prompt\":\"\xc0\xaf\"}"), "not valid UTF-8");  // overlong
  expect_error(R"({"prompt":"\ud800"})", "not valid JSON");                   // lone surrogate
  expect_error(std::string(40, '[') + std::string(40, ']'), "nested deeper");
}

TEST(ParseRequest, LineLengthLimit) {
  Limits limits;
  limits.max_line_bytes = 64;
  const std::string line =
      R"({"messages":[{"role":"user","content":")" + std::string(100, 'x') + "\"}]}";
  expect_error(line, "the limit is 64", ErrorCode::kInvalidArgument, limits);
}

TEST(ParseRequest, RejectsBadTopLevelFields) {
  expect_error(R"({"id":5,"prompt":"x"})", "'id': expected a string");
  expect_error(R"({"id":"","prompt":"x"})", "'id': must not be empty");
  expect_error(R"({"id":"a\u0001b","prompt":"x"})", "control characters");
  expect_error("{\"id\":\"" + std::string(200, 'a') + "\",\"prompt\":\"x\"}", "limit is 128");
  expect_error(R"({"conversation":7,"prompt":"x"})", "'conversation': expected a string");
  expect_error(R"({"type":"dance"})", "'type': 'dance' is not one of");
  expect_error(R"({"type":3})", "'type': expected a string");
  expect_error(R"({"prompt":"x","temprature":1})", "'temprature': unknown key");
  expect_error(R"({"v":2,"prompt":"x"})", "newer than this engine", ErrorCode::kUnsupported);
  expect_error(R"({"v":"1","prompt":"x"})", "'v': expected an integer");
  expect_error(R"({"raw":"yes","prompt":"x"})", "'raw': expected true or false");
  expect_error(R"({"type":"cancel"})", "cancel needs the id");
  expect_error(R"({"type":"tokenize"})", "tokenize needs the text");
  expect_error(R"({"type":"tokenize","text":5})", "'text': expected a string");
}

TEST(ParseRequest, RejectsBadMessages) {
  expect_error(R"({})", "'messages': is required");
  expect_error(R"({"messages":"hi"})", "'messages': expected an array");
  expect_error(R"({"messages":[]})", "'messages': must not be empty");
  expect_error(R"({"messages":["hi"]})", "'messages[0]': expected an object");
  expect_error(R"({"messages":[{"content":"hi"}]})", "'messages[0].role': is required");
  expect_error(R"({"messages":[{"role":"user"}]})", "'messages[0].content': is required");
  expect_error(R"({"messages":[{"role":"bot","content":"hi"}]})", "'bot' is not one of");
  expect_error(R"({"messages":[{"role":1,"content":"hi"}]})", "role': expected a string");
  expect_error(R"({"messages":[{"role":"user","content":1}]})", "content': expected a string");
  expect_error(R"({"messages":[{"role":"user","content":"a","metadata":1}]})",
               "metadata': expected a string");
  expect_error(R"({"messages":[{"role":"user","content":"a","name":"x"}]})",
               "'messages[0].name': unknown key");
  expect_error(R"({"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]})",
               "last message must have role user");
  expect_error(R"({"messages":[{"role":"user","content":"a"}],"prompt":"x"})", "not both");
  expect_error(R"({"raw":true,"messages":[{"role":"user","content":"a"}]})", "raw needs a prompt");
  expect_error(R"({"raw":true,"prompt":"a","history":[]})", "raw prompts take no history");
  expect_error(R"({"prompt":1})", "'prompt': expected a string");
  Limits limits;
  limits.max_messages = 2;
  expect_error(R"({"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},)"
               R"({"role":"user","content":"c"}]})",
               "the limit is 2", ErrorCode::kInvalidArgument, limits);
}

TEST(ParseRequest, RejectsBadHistory) {
  expect_error(R"({"prompt":"x","history":"no"})", "'history': expected an array");
  expect_error(R"({"prompt":"x","history":[["q"]]})", "'history[0]': expected [question, answer]");
  expect_error(R"({"prompt":"x","history":[["q",1]]})", "'history[0]'");
  expect_error(R"({"prompt":"x","history":["qa"]})", "'history[0]'");
}

TEST(ParseRequest, RejectsBadParams) {
  const std::string pre = R"({"messages":[{"role":"user","content":"a"}],"params":)";
  expect_error(pre + "5}", "'params': expected an object");
  expect_error(pre + R"({"temperature":"hot"}})", "'params.temperature': expected a number");
  expect_error(pre + R"({"temperature":-0.1}})", "must be in [0, 2]");
  expect_error(pre + R"({"temperature":2.5}})", "must be in [0, 2]");
  expect_error(pre + R"({"top_p":0}})", "'params.top_p': must be in (0, 1]");
  expect_error(pre + R"({"top_p":1.01}})", "'params.top_p'");
  expect_error(pre + R"({"top_k":1.5}})", "'params.top_k': expected an integer");
  expect_error(pre + R"({"top_k":-1}})", "'params.top_k': must be in [0, 1000]");
  expect_error(pre + R"({"repetition_penalty":0}})", "'params.repetition_penalty'");
  expect_error(pre + R"({"seed":-3}})", "'params.seed': expected a non-negative integer");
  expect_error(pre + R"({"seed":"x"}})", "'params.seed'");
  expect_error(pre + R"({"max_tokens":0}})", "'params.max_tokens': must be in [1, 1048576]");
  expect_error(pre + R"({"max_tokens":99999999999}})", "'params.max_tokens'");
  expect_error(pre + R"({"max_tokens":"9"}})", "'params.max_tokens': expected an integer");
  expect_error(pre + R"({"stop":5}})", "'params.stop': expected a string or an array");
  expect_error(pre + R"({"stop":[""]}})", "must not be empty");
  expect_error(pre + R"({"stop":[1]}})", "'params.stop': expected a string");
  expect_error(pre + R"({"stop":["a","b","c","d","e","f","g","h","i"]}})", "at most 8");
  expect_error(pre + R"({"stop":[")" + std::string(65, 's') + "\"]}}", "limit is 64");
  expect_error(pre + R"({"mirostat":1}})", "'params.mirostat': unknown parameter");
  expect_error(R"({"prompt":"x","temperature":9})", "'temperature': must be in [0, 2]");
}

// Every field of generation::SamplingParams is on the wire without code here: the mapping is
// generated from for_each_field (min_p was added that way).
TEST(ParseRequest, EverySamplingFieldRoundTrips) {
  Request r = parse_ok(R"({"messages":[{"role":"user","content":"a"}],"params":{"min_p":0.05}})");
  EXPECT_FLOAT_EQ(r.params.min_p, 0.05f);
  expect_error(R"({"messages":[{"role":"user","content":"a"}],"params":{"min_p":1.5}})",
               "'params.min_p': must be in [0, 1] (0 = off), got 1.5");
  r.params.temperature = 0.7f;
  r.params.top_k = 5;
  r.params.repetition_penalty = 1.3f;
  r.params.seed = 99;
  r.params.max_tokens = 33;
  r.params.presence_penalty = 0.5f;
  r.params.frequency_penalty = -0.25f;
  r.params.top_logprobs = 3;
  r.params.logit_bias = {{17, -100.0f}, {4, 2.5f}};
  const std::string line = serialize_request(r);
  EXPECT_NE(line.find(R"("logit_bias":{"17":-100.0,"4":2.5})"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("temperature":0.7,)"), std::string::npos) << line;
  EXPECT_EQ(parse_ok(line).params, r.params);
  // Defaults are not written.
  Request d = parse_ok(R"({"messages":[{"role":"user","content":"a"}]})");
  EXPECT_EQ(serialize_request(d).find("params"), std::string::npos);
}

TEST(ParseRequest, IdIsReportedEvenWhenTheRequestIsInvalid) {
  std::string id;
  auto r = parse_request(R"({"id":"bad1","messages":[]})", {}, &id);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(id, "bad1");
  r = parse_request("not json", {}, &id);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(id, "");
}

TEST(SerializeRequest, RoundTrips) {
  Request r;
  r.id = "x9";
  r.conversation = "conv";
  r.messages = {{"system", "sys", ""}, {"user", "q \"quoted\"\n", "meta"}};
  r.params.temperature = 0.5;
  r.params.top_k = 3;
  r.params.seed = 123456789012345ull;
  r.params.max_tokens = 7;
  r.params.stop = {"###"};
  Request back = parse_ok(serialize_request(r));
  EXPECT_EQ(back.id, r.id);
  EXPECT_EQ(back.conversation, r.conversation);
  ASSERT_EQ(back.messages.size(), 2u);
  EXPECT_EQ(back.messages[1].content, r.messages[1].content);
  EXPECT_EQ(back.messages[1].metadata, "meta");
  EXPECT_EQ(back.params.temperature, 0.5);
  EXPECT_EQ(back.params.top_k, 3);
  EXPECT_EQ(back.params.seed, 123456789012345ull);
  EXPECT_EQ(back.params.max_tokens, 7);
  EXPECT_EQ(back.params.top_p, SamplingParams{}.top_p);
  EXPECT_EQ(back.params.stop, r.params.stop);

  Request raw;
  raw.raw = true;
  raw.prompt = "abc";
  Request raw_back = parse_ok(serialize_request(raw));
  EXPECT_TRUE(raw_back.raw);
  EXPECT_EQ(raw_back.prompt, "abc");

  Request tok;
  tok.type = RequestType::kTokenize;
  tok.id = "t";
  tok.text = "héllo";
  Request tok_back = parse_ok(serialize_request(tok));
  EXPECT_EQ(tok_back.type, RequestType::kTokenize);
  EXPECT_EQ(tok_back.text, "héllo");
  for (RequestType t : {RequestType::kHealth, RequestType::kStats, RequestType::kCancel}) {
    Request q;
    q.type = t;
    q.id = "q";
    EXPECT_EQ(parse_ok(serialize_request(q)).type, t);
  }
}

Event round_trip(const Event& e) {
  const std::string line = serialize_event(e);
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  auto back = parse_event(line);
  EXPECT_TRUE(back.ok()) << line;
  EXPECT_EQ(back->type, e.type);
  EXPECT_EQ(back->id, e.id);
  return *back;
}

TEST(ParseRequest, ResumeTokens) {
  Request r = parse_ok(R"({"messages":[{"role":"user","content":"hi"}],"resume":[5,0,64789]})");
  EXPECT_EQ(r.resume, (std::vector<int32_t>{5, 0, 64789}));
  EXPECT_EQ(parse_ok(serialize_request(r)).resume, r.resume);
  EXPECT_TRUE(parse_ok(R"({"messages":[{"role":"user","content":"hi"}]})").resume.empty());
  EXPECT_EQ(serialize_request(Request{}).find("resume"), std::string::npos);
  for (const char* bad : {R"("resume":5)", R"("resume":[-1])", R"("resume":["a"])",
                          R"("resume":[1.5])", R"("resume":[4294967296])"}) {
    auto st =
        parse_request(std::string(R"({"messages":[{"role":"user","content":"hi"}],)") + bad + "}");
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.status().message().find("resume"), std::string::npos) << bad;
  }
}

// A request line is parsed once, as ordered JSON: its tools, schema and constraint tools come
// out of that one parse in the client's key order (not re-read from the line), and writing the
// request again embeds the parsed tools without parsing them.
TEST(ParseRequest, ALineIsParsedOnce) {
  const std::string line =
      R"({"messages":[{"role":"user","content":"a"}],"tools":[{"parameters":{"z":1,"a":2},)"
      R"("name":"f"}],"constraint":{"type":"json_schema","schema":{"properties":{"zeta":{},)"
      R"("alpha":{}}}}})";
  const int64_t before = json_parses();
  Request r = parse_ok(line);
  EXPECT_EQ(json_parses() - before, 1);
  EXPECT_EQ(r.tools->dump(), R"([{"parameters":{"z":1,"a":2},"name":"f"}])");
  EXPECT_EQ(r.constraint.text, R"({"properties":{"zeta":{},"alpha":{}}})");
  r.constraint = {};
  const int64_t before_write = json_parses();
  const std::string written = serialize_request(r);
  EXPECT_EQ(json_parses() - before_write, 0);
  EXPECT_EQ(*parse_ok(written).tools, *r.tools);
}

TEST(ParseRequest, Constraints) {
  const std::string head = R"({"messages":[{"role":"user","content":"a"}],)";
  Request g =
      parse_ok(head + R"("constraint":{"type":"gbnf","grammar":"root ::= \"yes\" | \"no\""}})");
  EXPECT_EQ(g.constraint.kind, Constraint::Kind::kGbnf);
  EXPECT_EQ(g.constraint.text, R"(root ::= "yes" | "no")");
  // The schema keeps the client's key order (zeta before alpha), also through serialize.
  Request s = parse_ok(
      head + R"("constraint":{"type":"json_schema","schema":{"type":"object","properties":)" +
      R"({"zeta":{"type":"string"},"alpha":{"type":"integer"}}}}})");
  EXPECT_EQ(s.constraint.kind, Constraint::Kind::kJsonSchema);
  EXPECT_EQ(
      s.constraint.text,
      R"({"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}}})");
  Request o = parse_ok(head + R"("constraint":{"type":"json_object"}})");
  EXPECT_EQ(o.constraint.kind, Constraint::Kind::kJsonObject);
  for (const Request* r : {&g, &s, &o}) {
    const std::string line = serialize_request(*r);
    EXPECT_EQ(parse_ok(line).constraint, r->constraint) << line;
  }
  EXPECT_EQ(serialize_request(parse_ok(head + R"("constraint":null})")).find("constraint"),
            std::string::npos);
  expect_error(head + R"("constraint":"json"})", "'constraint': expected an object");
  expect_error(head + R"("constraint":{"type":"regex"}})", "'constraint.type': 'regex' is not");
  expect_error(head + R"("constraint":{"type":"gbnf"}})", "'constraint.grammar': is required");
  expect_error(head + R"("constraint":{"type":"json_schema","schema":"x"}})",
               "'constraint.schema': expected a JSON Schema object");
  expect_error(head + R"("constraint":{"type":"json_object","grammar":"x"}})",
               "'constraint.grammar': unknown key");
}

TEST(ParseRequest, Choices) {
  Request r = parse_ok(R"({"messages":[{"role":"user","content":"hi"}],"n":3})");
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(parse_ok(serialize_request(r)).n, 3);
  EXPECT_EQ(parse_ok(R"({"messages":[{"role":"user","content":"hi"}]})").n, 1);
  EXPECT_EQ(serialize_request(Request{}).find("\"n\""), std::string::npos);
  for (const char* bad : {R"("n":0)", R"("n":129)", R"("n":"2")", R"("n":1.5)", R"("n":-1)"}) {
    auto st =
        parse_request(std::string(R"({"messages":[{"role":"user","content":"hi"}],)") + bad + "}");
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.status().message().find("field 'n'"), std::string::npos)
        << bad << ": " << st.status().message();
  }
}

TEST(Events, RoundTripEveryType) {
  Event q;
  q.type = EventType::kQueued;
  q.id = "r1";
  q.position = 3;
  EXPECT_EQ(round_trip(q).position, 3);

  Event s;
  s.type = EventType::kStart;
  s.id = "r1";
  s.usage.prompt_tokens = 12;
  s.usage.cached_tokens = 8;
  Event sb = round_trip(s);
  EXPECT_EQ(sb.usage.prompt_tokens, 12);
  EXPECT_EQ(sb.usage.cached_tokens, 8);

  Event t;
  t.id = "r1";
  t.text = "你\n\"x\"\\";
  EXPECT_EQ(round_trip(t).text, t.text);
  EXPECT_TRUE(round_trip(t).logprobs.empty());
  // Log-probabilities travel with exact bytes (a token may end inside a character).
  t.logprobs = {{{7, "\xE4\xBD", -0.125f}, {{7, "\xE4\xBD", -0.125f}, {9, "x", -3.5f}}},
                {{8, "\xA0", -0.5f}, {}}};
  EXPECT_EQ(round_trip(t).logprobs, t.logprobs);
  EXPECT_TRUE(round_trip(t).tokens.empty());
  EXPECT_EQ(serialize_event(t).find("tokens"), std::string::npos);  // absent when none
  t.tokens = {30910, 0, 64789};
  EXPECT_EQ(round_trip(t).tokens, t.tokens);
  EXPECT_EQ(round_trip(t).text, t.text);
  // A reasoning model's thinking travels apart from the text, and only when there is some.
  EXPECT_EQ(serialize_event(t).find("reasoning"), std::string::npos);
  t.reasoning = "先想\n\"x\"";
  EXPECT_EQ(round_trip(t).reasoning, t.reasoning);
  EXPECT_EQ(round_trip(t).text, t.text);

  Event p;
  p.type = EventType::kProgress;
  p.id = "r1";
  p.prefilled = 128;
  p.to_prefill = 300;
  EXPECT_EQ(serialize_event(p),
            R"({"id":"r1","event":"progress","prefilled":128,"to_prefill":300})");
  Event pb = round_trip(p);
  EXPECT_EQ(pb.type, EventType::kProgress);
  EXPECT_EQ(pb.prefilled, 128);
  EXPECT_EQ(pb.to_prefill, 300);

  Event n;
  n.type = EventType::kNotice;
  n.id = "r1";
  n.message = "history trimmed";
  n.dropped_messages = 4;
  Event nb = round_trip(n);
  EXPECT_EQ(nb.message, n.message);
  EXPECT_EQ(nb.dropped_messages, 4);

  Event d;
  d.type = EventType::kDone;
  d.id = "r1";
  d.finish_reason = FinishReason::kLength;
  d.usage = {12, 8, 30};
  d.timings = {1.5, 20.25, 22.0, 5.5, 180.0};
  Event db = round_trip(d);
  EXPECT_EQ(db.finish_reason, FinishReason::kLength);
  EXPECT_EQ(db.usage.prompt_tokens, 12);
  EXPECT_EQ(db.usage.cached_tokens, 8);
  EXPECT_EQ(db.usage.completion_tokens, 30);
  EXPECT_DOUBLE_EQ(db.timings.prefill_ms, 20.25);
  EXPECT_DOUBLE_EQ(db.timings.total_ms, 180.0);
  EXPECT_NE(serialize_event(d).find("\"total_tokens\":42"), std::string::npos);
  // Speculative decoding's counts: written only when something was drafted.
  EXPECT_EQ(serialize_event(d).find("speculative"), std::string::npos);
  EXPECT_EQ(db.speculation, generation::Speculation{});
  Event ds = d;
  ds.speculation = {40, 25};
  EXPECT_NE(serialize_event(ds).find(R"("speculative":{)"), std::string::npos);
  EXPECT_NE(serialize_event(ds).find(R"("drafted":40)"), std::string::npos);
  EXPECT_NE(serialize_event(ds).find(R"("accepted":25)"), std::string::npos);
  EXPECT_EQ(round_trip(ds).speculation, (generation::Speculation{40, 25}));

  EXPECT_EQ(db.index, 0);
  // A choice's end (n > 1) and its tokens carry the choice's index.
  Event cd = d;
  cd.type = EventType::kChoiceDone;
  cd.index = 2;
  cd.usage = {12, 8, 10};
  Event cdb = round_trip(cd);
  EXPECT_EQ(cdb.type, EventType::kChoiceDone);
  EXPECT_EQ(cdb.index, 2);
  EXPECT_EQ(cdb.finish_reason, FinishReason::kLength);
  EXPECT_EQ(cdb.usage.completion_tokens, 10);
  EXPECT_NE(serialize_event(cd).find("\"event\":\"choice_done\""), std::string::npos);
  Event ti = t;
  ti.index = 3;
  EXPECT_EQ(round_trip(ti).index, 3);
  EXPECT_EQ(round_trip(t).index, 0);
  EXPECT_EQ(serialize_event(t).find("index"), std::string::npos);  // absent for choice 0

  Event e = error_event("r2", Status(ErrorCode::kQueueFull, "queue is full"), 250);
  Event eb = round_trip(e);
  EXPECT_EQ(eb.code, ErrorCode::kQueueFull);
  EXPECT_EQ(eb.message, "queue is full");
  EXPECT_EQ(eb.retry_after_ms, 250);
  EXPECT_NE(serialize_event(e).find("\"code\":\"busy\""), std::string::npos);
  EXPECT_FALSE(eb.restart);
  EXPECT_EQ(serialize_event(e).find("restart"), std::string::npos);  // absent unless set
  Event lost = error_event("r3", Status(ErrorCode::kUnavailable, "the GPU was lost"), 2000);
  lost.restart = true;  // the engine exits to be restarted: a gateway resumes the answer
  EXPECT_NE(serialize_event(lost).find("\"restart\":true"), std::string::npos);
  EXPECT_TRUE(round_trip(lost).restart);
  auto not_bool = parse_event(R"({"id":"r4","event":"error","code":"unavailable","message":"m",)"
                              R"("restart":"yes"})");
  ASSERT_TRUE(not_bool.ok()) << not_bool.status().to_string();
  EXPECT_FALSE(not_bool->restart);  // only a JSON true says it

  Event h;
  h.type = EventType::kHealth;
  h.id = "h";
  h.health = Health::kLoading;
  h.model = "tiny";
  h.n_ctx = 512;
  h.instance = "a1b2";
  Event hb = round_trip(h);
  EXPECT_EQ(hb.health, Health::kLoading);
  EXPECT_EQ(hb.model, "tiny");
  EXPECT_EQ(hb.n_ctx, 512);
  EXPECT_EQ(hb.instance, "a1b2");
  EXPECT_EQ(serialize_event(h).find("\"load\""), std::string::npos);  // no bytes known yet
  h.load_done_bytes = 300;
  h.load_total_bytes = 1200;
  hb = round_trip(h);
  EXPECT_EQ(hb.load_done_bytes, 300u);
  EXPECT_EQ(hb.load_total_bytes, 1200u);
  EXPECT_NE(serialize_event(h).find("\"percent\":25"), std::string::npos) << serialize_event(h);

  Event st;
  st.type = EventType::kStats;
  st.id = "s";
  st.stats = {{1, 2, 3, 4, 5, 6, 7, 8}, 9, 10.5};
  Event stb = round_trip(st);
  EXPECT_EQ(stb.stats.queued, 1);
  EXPECT_EQ(stb.stats.kv_blocks_free, 4);
  EXPECT_EQ(stb.stats.generated_tokens_total, 8);
  EXPECT_EQ(stb.stats.connections, 9);
  EXPECT_DOUBLE_EQ(stb.stats.uptime_s, 10.5);
  EXPECT_EQ(stb.stats.speculation, generation::Speculation{});
  st.stats.speculation = {100, 60};
  EXPECT_EQ(round_trip(st).stats.speculation, (generation::Speculation{100, 60}));
  EXPECT_EQ(stb.stats.whole_prompts_total, 0);
  st.stats.whole_prompts_total = 11;
  EXPECT_EQ(round_trip(st).stats.whole_prompts_total, 11);

  Event tk;
  tk.type = EventType::kTokens;
  tk.id = "t";
  tk.tokens = {1, 65023, 0};
  EXPECT_EQ(round_trip(tk).tokens, tk.tokens);

  Event c;
  c.type = EventType::kCancel;
  c.id = "r1";
  c.found = true;
  EXPECT_TRUE(round_trip(c).found);
}

TEST(Events, ErrorWithoutIdHasNullId) {
  const std::string line = serialize_event(error_event("", invalid_argument("bad")));
  EXPECT_NE(line.find("\"id\":null"), std::string::npos) << line;
  EXPECT_EQ(parse_event(line)->id, "");
}

TEST(Events, InvalidUtf8TextIsReplacedNotFatal) {
  Event t;
  t.id = "r";
  t.text = "a\xff";
  auto back = parse_event(serialize_event(t));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->text, "a\xEF\xBF\xBD");
}

TEST(Events, ParseRejectsGarbage) {
  EXPECT_FALSE(parse_event("nope").ok());
  EXPECT_FALSE(parse_event(R"({"event":"party"})").ok());
  EXPECT_FALSE(parse_event("[]").ok());
  // Wrong field types are tolerated as absent rather than throwing.
  auto e = parse_event(R"({"event":"done","usage":5,"timings":"x","finish_reason":3})");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->usage.prompt_tokens, 0);
  EXPECT_FALSE(parse_event(R"({"event":"cancel","found":"yes"})")->found);
}

TEST(LineBuffer, SplitsAcrossChunks) {
  LineBuffer b(100);
  std::string line;
  b.append("{\"a\":1}\n{\"b\"");
  ASSERT_EQ(b.next(&line), LineBuffer::Next::kLine);
  EXPECT_EQ(line, "{\"a\":1}");
  EXPECT_EQ(b.next(&line), LineBuffer::Next::kNone);
  EXPECT_EQ(b.pending_bytes(), 4u);  // {"b"
  b.append(":2}\r\n\n");
  ASSERT_EQ(b.next(&line), LineBuffer::Next::kLine);
  EXPECT_EQ(line, "{\"b\":2}");
  ASSERT_EQ(b.next(&line), LineBuffer::Next::kLine);
  EXPECT_EQ(line, "");
  EXPECT_EQ(b.next(&line), LineBuffer::Next::kNone);
}

TEST(LineBuffer, OverlongLineIsReportedOnceAndSkipped) {
  LineBuffer b(10);
  std::string line;
  b.append(std::string(30, 'x'));
  EXPECT_EQ(b.next(&line), LineBuffer::Next::kOverlong);
  EXPECT_EQ(b.next(&line), LineBuffer::Next::kNone);
  b.append(std::string(30, 'y'));
  EXPECT_EQ(b.next(&line), LineBuffer::Next::kNone);  // still the same overlong line
  b.append("yy\nok\n");
  ASSERT_EQ(b.next(&line), LineBuffer::Next::kLine);
  EXPECT_EQ(line, "ok");
  // Overlong line delivered whole in one chunk.
  b.append(std::string(20, 'z') + "\nfine\n");
  EXPECT_EQ(b.next(&line), LineBuffer::Next::kOverlong);
  ASSERT_EQ(b.next(&line), LineBuffer::Next::kLine);
  EXPECT_EQ(line, "fine");
  // Exactly at the limit is fine.
  b.append(std::string(10, 'a') + "\n");
  ASSERT_EQ(b.next(&line), LineBuffer::Next::kLine);
  EXPECT_EQ(line.size(), 10u);
}

}  // namespace
}  // namespace glm::protocol
