// Constrained decoding through the engine, over the fake model with a vocabulary extended by
// JSON punctuation and pieces that cross grammar boundaries ("{\"", "\":", "\",\""): whatever
// the (pseudo-random) logits, greedy and sampled answers are sentences of the grammar, checked
// here by an independent reading (nlohmann + explicit schema checks).
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "core/utf8.h"
#include "engine/constrain.h"
#include "engine/engine.h"
#include "engine/fake_parts.h"
#include "engine/test_util.h"
#include "scheduler/fake_model.h"

namespace glm::engine {
namespace {

using glm::testing::FakeModel;
using glm::testing::FakeTemplate;
using glm::testing::FakeTokenizer;
using testing::EventLog;

const std::vector<std::string> kJsonPieces = {
    "{",     "}",   "[",  "]",    "\"",    ":",    ",",   "-",   ".", "\\", "{\"", "\":",  "\",\"",
    "\":\"", "yes", "no", "true", "false", "null", " \"", "\"}", "e", "+",  "\t",  "name", "age"};

std::unique_ptr<Engine> make_engine() {
  auto tok = std::make_unique<FakeTokenizer>(kJsonPieces);
  auto model = std::make_unique<FakeModel>(tok->n_vocab());
  auto tmpl = std::make_unique<FakeTemplate>(*tok);
  Options o;
  o.max_batch = 4;
  return create_engine(std::move(model), std::move(tok), std::move(tmpl), o);
}

Request constrained(const std::string& id, Constraint::Kind kind, std::string text,
                    float temperature, uint64_t seed, int max_tokens = 1500) {
  Request r;
  r.id = id;
  r.messages = {{"user", "give me json"}};
  r.params.temperature = temperature;
  r.params.top_p = 1.0f;
  r.params.seed = seed;
  r.params.max_tokens = max_tokens;
  r.constraint = Constraint{kind, std::move(text)};
  return r;
}

// Every string bounded, so an answer ends well within max_tokens whatever the logits.
const char* kBoundedSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 6},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "ok": {"type": "boolean"},
    "kind": {"enum": ["cat", "dog", null]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 3},
    "pos": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"],
            "additionalProperties": false}
  },
  "required": ["name", "age", "ok", "kind"],
  "additionalProperties": false
})";

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char ch : s) n += (ch & 0xC0) != 0x80;
  return n;
}

// The checks a validator makes for kBoundedSchema; "" if `v` validates, else what is wrong.
std::string check_schema(const nlohmann::json& v) {
  if (!v.is_object()) return "not an object";
  const std::set<std::string> known = {"name", "age", "ok", "kind", "tags", "pos"};
  for (const auto& [k, x] : v.items()) {
    if (!known.count(k)) return "unknown key " + k;
  }
  for (const char* k : {"name", "age", "ok", "kind"}) {
    if (!v.contains(k)) return std::string("missing ") + k;
  }
  if (!v["name"].is_string() || utf8_length(v["name"].get<std::string>()) > 6) return "name";
  if (!v["age"].is_number_integer() || v["age"].get<int64_t>() < 0 ||
      v["age"].get<int64_t>() > 150) {
    return "age";
  }
  if (!v["ok"].is_boolean()) return "ok";
  if (!(v["kind"].is_null() || v["kind"] == "cat" || v["kind"] == "dog")) return "kind";
  if (v.contains("tags")) {
    const auto& t = v["tags"];
    if (!t.is_array() || t.size() > 3) return "tags";
    for (const auto& s : t) {
      if (!s.is_string() || utf8_length(s.get<std::string>()) > 3) return "tags item";
    }
  }
  if (v.contains("pos")) {
    const auto& p = v["pos"];
    if (!p.is_object() || p.size() != 1 || !p.contains("x") || !p["x"].is_number()) return "pos";
  }
  return "";
}

// A reasoning model whose prompt opens the thinking (GLM-Z1): its template, faked.
class ThinkingTemplate : public FakeTemplate {
 public:
  using FakeTemplate::FakeTemplate;
  bool reasoning() const override { return true; }
  bool opens_reasoning(const tok::TemplateOptions& /*options*/) const override { return true; }
};

// GLM-4.7's template, faked: its prompt opens the thinking unless the request turns it off.
class Glm47LikeTemplate : public FakeTemplate {
 public:
  using FakeTemplate::FakeTemplate;
  bool reasoning() const override { return true; }
  bool opens_reasoning(const tok::TemplateOptions& options) const override {
    return options.enable_thinking;
  }
};

// An answer starts inside the thinking where the request's prompt opened it (GLM-4.7 with
// enable_thinking, the default): its text up to "</think>" is reasoning. With thinking off the
// same tokens are all answer text (the prompt closed the thinking).
TEST(EngineReasoning, AnAnswerStartsInsideTheThinkingOnlyWhenItsPromptOpenedIt) {
  const std::vector<std::string> extra = {"</think>"};
  std::string reasoning[2], text[2];
  for (int on = 0; on < 2; ++on) {
    auto tok = std::make_unique<FakeTokenizer>(extra);
    const int32_t close = tok->n_vocab() - 1;
    auto model = std::make_unique<FakeModel>(tok->n_vocab());
    auto tmpl = std::make_unique<Glm47LikeTemplate>(*tok);
    // A question whose greedy answer writes "</think>" after some text, then more.
    std::vector<tok::Message> messages;
    for (int q = 0; q < 200 && messages.empty(); ++q) {
      const std::vector<tok::Message> m = {{"user", "question " + std::to_string(q)}};
      const auto ids =
          glm::testing::fake_greedy(tmpl->render(m).value(), tok->n_vocab(), 30, {1, 2});
      const auto at = std::find(ids.begin(), ids.end(), close);
      if (at != ids.end() && at - ids.begin() >= 2 && ids.end() - at >= 2) messages = m;
    }
    ASSERT_FALSE(messages.empty());
    auto e = create_engine(std::move(model), std::move(tok), std::move(tmpl), Options{});
    EventLog c;
    Request r;
    r.id = on ? "thinking" : "not thinking";
    r.messages = messages;
    r.enable_thinking = on == 1;
    r.params.temperature = 0.0f;
    r.params.max_tokens = 30;
    ASSERT_TRUE(e->submit(r, c.sink()).ok());
    ASSERT_TRUE(c.wait(r.id));
    ASSERT_EQ(c.last(r.id).type, EventType::kDone) << c.last(r.id).error.to_string();
    for (const Event& ev : c.events[r.id]) {
      reasoning[on] += ev.reasoning;
      text[on] += ev.text;
    }
  }
  EXPECT_TRUE(reasoning[0].empty()) << reasoning[0];
  EXPECT_NE(text[0].find("</think>"), std::string::npos) << text[0];
  EXPECT_FALSE(reasoning[1].empty());
  EXPECT_EQ(text[1].find("</think>"), std::string::npos) << text[1];
  // The same tokens either way: the thinking and the answer after it make the whole text.
  EXPECT_NE(text[0].find(reasoning[1]), std::string::npos);
}

// The constraint applies to the answer after the thinking (docs/engine.md#reasoning): the
// thinking is the model's own greedy text up to its "</think>", and the answer after it is a
// whole sentence of the grammar, from the grammar's start. Applied from the first token
// instead (as before), the digits-only grammar could never close the thinking.
TEST(EngineConstraint, AReasoningModelsConstraintAppliesAfterItsThinking) {
  const std::vector<std::string> extra = {"</think>"};
  FakeTokenizer probe(extra);
  const int32_t close = probe.n_vocab() - 1;
  const std::vector<int32_t> stops = {1, 2};
  // A question whose unconstrained greedy answer closes its thinking early on.
  std::vector<tok::Message> messages;
  std::vector<int32_t> greedy;
  for (int q = 0; q < 200 && messages.empty(); ++q) {
    const std::vector<tok::Message> m = {{"user", "question " + std::to_string(q)}};
    FakeTemplate t(probe);
    const auto ids = glm::testing::fake_greedy(t.render(m).value(), probe.n_vocab(), 30, stops);
    const auto at = std::find(ids.begin(), ids.end(), close);
    if (at != ids.end() && at - ids.begin() >= 2 && ids.end() - at >= 2) {
      messages = m;
      greedy.assign(ids.begin(), at + 1);
    }
  }
  ASSERT_FALSE(messages.empty()) << "no question closes its thinking within 30 tokens";
  std::string thinking;
  for (size_t i = 0; i + 1 < greedy.size(); ++i) thinking += probe.token_bytes(greedy[i]);

  auto tok = std::make_unique<FakeTokenizer>(extra);
  auto model = std::make_unique<FakeModel>(tok->n_vocab());
  auto tmpl = std::make_unique<ThinkingTemplate>(*tok);
  auto e = create_engine(std::move(model), std::move(tok), std::move(tmpl), Options{});
  EventLog c;
  Request r;
  r.id = "z1";
  r.messages = messages;
  r.params.temperature = 0.0f;
  r.params.max_tokens = 60;
  r.constraint = {Constraint::Kind::kGbnf, R"(root ::= [0-9] [0-9]? [0-9]? "!")"};
  ASSERT_TRUE(e->submit(r, c.sink()).ok());
  ASSERT_TRUE(c.wait("z1"));
  ASSERT_EQ(c.last("z1").type, EventType::kDone) << c.last("z1").error.to_string();
  std::string reasoning, text;
  for (const Event& ev : c.events["z1"]) {
    reasoning += ev.reasoning;
    text += ev.text;
  }
  EXPECT_EQ(reasoning, utf8_sanitize(thinking));  // stray bytes of "你" go out as U+FFFD
  EXPECT_TRUE(std::regex_match(text, std::regex("[0-9]{1,3}!"))) << text;
  EXPECT_EQ(c.last("z1").finish_reason, FinishReason::kStop);

  // Resumed past the thinking and the answer's first token, it goes on as the uninterrupted run
  // (the matcher sees only the resumed tokens after the thinking).
  std::vector<int32_t> ids;
  for (const Event& ev : c.events["z1"]) ids.insert(ids.end(), ev.tokens.begin(), ev.tokens.end());
  ASSERT_GE(ids.size(), greedy.size() + 2);
  Request again = r;
  again.id = "z1 resumed";
  again.resume.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(greedy.size()) + 1);
  ASSERT_TRUE(e->submit(again, c.sink()).ok());
  ASSERT_TRUE(c.wait("z1 resumed"));
  ASSERT_EQ(c.last("z1 resumed").type, EventType::kDone) << c.last("z1 resumed").error.to_string();
  std::vector<int32_t> rest;
  for (const Event& ev : c.events["z1 resumed"]) {
    rest.insert(rest.end(), ev.tokens.begin(), ev.tokens.end());
  }
  EXPECT_EQ(rest, std::vector<int32_t>(
                      ids.begin() + static_cast<std::ptrdiff_t>(again.resume.size()), ids.end()));
}

TEST(EngineConstraint, JsonSchemaAnswersValidateGreedyAndSampled) {
  auto e = make_engine();
  EventLog c;
  std::vector<std::string> ids;
  const std::vector<std::pair<float, uint64_t>> runs = {{0.0f, 1}, {1.0f, 1}, {1.0f, 2}, {1.0f, 3},
                                                        {1.0f, 4}, {1.0f, 5}, {1.5f, 6}, {1.5f, 7}};
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string id = "s" + std::to_string(i);
    ASSERT_TRUE(e->submit(constrained(id, Constraint::Kind::kJsonSchema, kBoundedSchema,
                                      runs[i].first, runs[i].second),
                          c.sink())
                    .ok());
    ids.push_back(id);
  }
  std::set<std::string> distinct;
  for (const std::string& id : ids) {
    ASSERT_TRUE(c.wait(id));
    const Event last = c.last(id);
    const std::string text = c.text(id);
    ASSERT_EQ(last.type, EventType::kDone) << last.error.to_string();
    EXPECT_EQ(last.finish_reason, FinishReason::kStop) << text;
    const auto v = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(v.is_discarded()) << "not JSON: " << text;
    EXPECT_EQ(check_schema(v), "") << text;
    // Keys come out in the schema's order.
    size_t at = 0;
    for (const char* k : {"\"name\"", "\"age\"", "\"ok\"", "\"kind\""}) {
      const size_t p = text.find(k, at);
      EXPECT_NE(p, std::string::npos) << k << " out of order in " << text;
      at = p == std::string::npos ? at : p;
    }
    distinct.insert(text);
  }
  EXPECT_GT(distinct.size(), 3u) << "sampling should vary the answers";
}

TEST(EngineConstraint, JsonObjectIsAnyObject) {
  auto e = make_engine();
  EventLog c;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const std::string id = "o" + std::to_string(seed);
    // Unbounded strings: a cut answer (length) is allowed; a complete one must be an object.
    ASSERT_TRUE(
        e->submit(constrained(id, Constraint::Kind::kJsonObject, "", 1.0f, seed, 300), c.sink())
            .ok());
    ASSERT_TRUE(c.wait(id));
    const Event last = c.last(id);
    ASSERT_EQ(last.type, EventType::kDone) << last.error.to_string();
    const std::string text = c.text(id);
    ASSERT_FALSE(text.empty());
    EXPECT_EQ(text[0], '{') << text;
    if (last.finish_reason == FinishReason::kStop) {
      const auto v = nlohmann::json::parse(text, nullptr, false);
      EXPECT_TRUE(v.is_object()) << text;
    } else {
      EXPECT_EQ(last.finish_reason, FinishReason::kLength);
    }
  }
}

TEST(EngineConstraint, GbnfYesOrNo) {
  auto e = make_engine();
  EventLog c;
  std::set<std::string> seen;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    const std::string id = "g" + std::to_string(seed);
    const float temperature = seed == 0 ? 0.0f : 1.0f;
    ASSERT_TRUE(e->submit(constrained(id, Constraint::Kind::kGbnf, R"(root ::= "yes" | "no")",
                                      temperature, seed, 50),
                          c.sink())
                    .ok());
    ASSERT_TRUE(c.wait(id));
    ASSERT_EQ(c.last(id).type, EventType::kDone);
    EXPECT_EQ(c.last(id).finish_reason, FinishReason::kStop);
    const std::string text = c.text(id);
    EXPECT_TRUE(text == "yes" || text == "no") << text;
    seen.insert(text);
  }
  EXPECT_EQ(seen.size(), 2u);
}

TEST(EngineConstraint, BadConstraintsAreRefusedAtSubmit) {
  auto e = make_engine();
  EventLog c;
  auto refused = [&](Constraint::Kind kind, const std::string& text, const std::string& needle) {
    const Status st = e->submit(constrained("bad", kind, text, 0.0f, 1), c.sink());
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << text;
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
  };
  refused(Constraint::Kind::kGbnf, "root ::= vaule", "undefined rule 'vaule'");
  refused(Constraint::Kind::kGbnf, "root ::= \"a\" root", "invalid GBNF grammar");
  refused(Constraint::Kind::kGbnf, "root ::= \"@\"", "no token of this model's vocabulary");
  refused(Constraint::Kind::kJsonSchema,
          R"({"type":"object","properties":{"t":{"uniqueItems":true}}})", "#/properties/t");
  refused(Constraint::Kind::kJsonSchema, "{not json", "not valid JSON");
  EXPECT_TRUE(c.events.empty());  // nothing was queued
}

TEST(EngineConstraint, ADeadEndIsAnErrorNotAHang) {
  auto e = make_engine();
  EventLog c;
  // 'a' can be spelled, '@' cannot: the request starts and then has no continuation.
  ASSERT_TRUE(
      e->submit(constrained("dead", Constraint::Kind::kGbnf, R"(root ::= "a@")", 0.0f, 1), c.sink())
          .ok());
  ASSERT_TRUE(c.wait("dead"));
  const Event last = c.last("dead");
  ASSERT_EQ(last.type, EventType::kError);
  EXPECT_EQ(last.error.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(c.text("dead"), "a");
  // The engine goes on serving.
  ASSERT_TRUE(
      e->submit(constrained("next", Constraint::Kind::kGbnf, R"(root ::= "no")", 0.0f, 1), c.sink())
          .ok());
  ASSERT_TRUE(c.wait("next"));
  EXPECT_EQ(c.text("next"), "no");
}

TEST(EngineConstraint, VocabularyMarksControlAndStopTokens) {
  FakeTokenizer tok(kJsonPieces);
  auto vocab = build_token_vocab(tok, tok.n_vocab() + 3, {1, 2});
  ASSERT_NE(vocab, nullptr);
  EXPECT_EQ(vocab->n_tokens(), static_cast<size_t>(tok.n_vocab() + 3));  // padded to the model
  EXPECT_TRUE(vocab->is_stop(1));
  EXPECT_TRUE(vocab->is_stop(2));
  EXPECT_TRUE(vocab->is_special(3));
  EXPECT_FALSE(vocab->is_special(5));
  EXPECT_EQ(vocab->token(tok.find("{\"")), "{\"");
}

}  // namespace
}  // namespace glm::engine
