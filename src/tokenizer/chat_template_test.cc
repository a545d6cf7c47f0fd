// Chat templates: every apply_chat_template / chat_template_text case of cases.json, template
// choice from the vocabulary, stop ids, tools, and ChatGLM3 tool-call parsing.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include "tokenizer/test_fixtures.h"

namespace glm::tok {
namespace {

using testing::Source;
using Ids = std::vector<int32_t>;

std::vector<Message> messages_of(const nlohmann::json& j) {
  std::vector<Message> out;
  for (const auto& m : j) out.push_back({m["role"], m["content"]});
  return out;
}

std::unique_ptr<ChatTemplate> template_for(const testing::Loaded& l) {
  auto t = ChatTemplate::for_model(*l.file, *l.tok);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? std::move(t.value()) : nullptr;
}

class ChatTemplateCases : public ::testing::TestWithParam<Source> {};

TEST_P(ChatTemplateCases, ChatGlm3) {
  GLM_LOAD_OR_SKIP(tok, "chatglm3", GetParam());
  GLM_CASES_OR_SKIP(c);
  auto tmpl = template_for(tok_l);
  ASSERT_NE(tmpl, nullptr);
  EXPECT_STREQ(tmpl->name(), "chatglm3");
  int n = 0;
  for (const auto& k : (*c)["chatglm3"]["apply_chat_template"]) {
    auto ids = tmpl->render(messages_of(k["messages"]));
    ASSERT_TRUE(ids.ok()) << ids.status().to_string();
    EXPECT_EQ(*ids, k["ids"].get<Ids>()) << "lines " << k["lines"];
    ++n;
  }
  EXPECT_EQ(n, 3);
  EXPECT_EQ(tmpl->stop_ids(), (Ids{2, 64795, 64797}));
  EXPECT_TRUE(tmpl->strips_answer_whitespace());
}

TEST_P(ChatTemplateCases, Glm4) {
  GLM_LOAD_OR_SKIP(tok, "glm4", GetParam());
  GLM_CASES_OR_SKIP(c);
  auto tmpl = template_for(tok_l);
  ASSERT_NE(tmpl, nullptr);
  EXPECT_STREQ(tmpl->name(), "glm4");
  int n = 0;
  for (const auto& k : (*c)["chatglm4"]["apply_chat_template"]) {
    auto ids = tmpl->render(messages_of(k["messages"]));
    ASSERT_TRUE(ids.ok()) << ids.status().to_string();
    EXPECT_EQ(*ids, k["ids"].get<Ids>()) << "lines " << k["lines"];
    ++n;
  }
  EXPECT_EQ(n, 2);
  EXPECT_EQ(tmpl->stop_ids(), (Ids{151329, 151336, 151338}));
}

TEST_P(ChatTemplateCases, ChatGlm2RoundFormat) {
  GLM_LOAD_OR_SKIP(tok, "chatglm3", GetParam());
  GLM_CASES_OR_SKIP(c);
  auto tmpl = make_chat_template("chatglm2", *tok_l.file, tok);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().to_string();
  int n = 0, n_ids = 0;
  for (const auto& k : (*c)["chatglm2"]["chat_template_text"]) {
    auto ids = (*tmpl)->render(messages_of(k["messages"]));
    ASSERT_TRUE(ids.ok()) << ids.status().to_string();
    Ids expected{64790, 64792};
    for (int32_t id : tok.encode(k["text"].get<std::string>())) expected.push_back(id);
    EXPECT_EQ(*ids, expected) << "lines " << k["lines"];
    ++n;
    // The chatglm2.encode cases hold the HF ids of the same prompt texts.
    for (const auto& e : (*c)["chatglm2"]["encode"]) {
      if (e["prompt"] == k["text"]) {
        EXPECT_EQ(*ids, e["ids"].get<Ids>());
        ++n_ids;
      }
    }
  }
  EXPECT_EQ(n, 2);
  EXPECT_EQ(n_ids, 2);
}

INSTANTIATE_TEST_SUITE_P(Sources, ChatTemplateCases,
                         ::testing::Values(Source::kVocabGguf, Source::kWrittenGguf),
                         [](const auto& info) { return testing::source_name(info.param); });

TEST(ChatTemplate, ChatGlm2ChosenForChatGlm2Vocabulary) {
  const std::string model = testing::shared("tokenizers/chatglm3.tokenizer.model");
  GLM_SKIP_IF_ABSENT(model);
  auto spec = read_tokenizer_model(model);
  ASSERT_TRUE(spec.ok());
  ASSERT_TRUE(to_chatglm2_vocab(&*spec).ok());
  testing::Loaded l = testing::load_spec(*spec, "chatglm2");
  ASSERT_NE(l.tok, nullptr) << l.error;
  EXPECT_EQ(l.tok->find("<|user|>"), -1);
  auto tmpl = template_for(l);
  ASSERT_NE(tmpl, nullptr);
  EXPECT_STREQ(tmpl->name(), "chatglm2");
  EXPECT_EQ(tmpl->stop_ids(), Ids{2});
  EXPECT_FALSE(tmpl->strips_answer_whitespace());
  // A system message is dropped; observation is refused.
  auto a = tmpl->render({{"system", "be brief"}, {"user", "你好"}});
  auto b = tmpl->render({{"user", "你好"}});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(tmpl->render({{"observation", "x"}}).status().code(), ErrorCode::kInvalidArgument);
}

TEST(ChatTemplate, ChosenBySpecialTokensWhateverTheTokenizerKind) {
  // Synthetic vocabularies (gen-model without --vocab) are SentencePiece-style for every arch.
  for (const char* sop : {"<sop>", "sop"}) {
    VocabSpec s;
    s.model = "llama";
    auto add = [&](const std::string& t, int32_t type) {
      s.tokens.push_back(t);
      s.scores.push_back(0);
      s.types.push_back(type);
    };
    add("<unk>", kTokenUnknown);
    add("<eos>", kTokenControl);
    const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      add(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", kTokenByte);
    }
    for (const char* sp :
         {"[gMASK]", sop, "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"}) {
      add(sp, kTokenControl);
    }
    s.eos = 1;
    testing::Loaded l = testing::load_spec(s, "synthetic");
    ASSERT_NE(l.tok, nullptr) << l.error;
    auto tmpl = template_for(l);
    ASSERT_NE(tmpl, nullptr);
    EXPECT_STREQ(tmpl->name(), std::string(sop) == "sop" ? "chatglm3" : "glm4");
    auto ids = tmpl->render({{"user", "hi"}});
    ASSERT_TRUE(ids.ok()) << ids.status().to_string();
    EXPECT_EQ((*ids)[1], l.tok->find(sop));
    EXPECT_EQ(tmpl->stop_ids(), (Ids{1, l.tok->find("<|user|>"), l.tok->find("<|observation|>")}));
  }
}

TEST(ChatTemplate, RawForStories) {
  GLM_LOAD_OR_SKIP(tok, "stories", Source::kVocabGguf);
  auto tmpl = template_for(tok_l);
  ASSERT_NE(tmpl, nullptr);
  EXPECT_STREQ(tmpl->name(), "raw");
  auto ids = tmpl->render({{"user", "Once upon a time"}});
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (Ids{1, 403, 407, 261, 378}));
  EXPECT_EQ(tmpl->stop_ids(), Ids{2});
}

TEST(ChatTemplate, Llama2Format) {
  GLM_LOAD_OR_SKIP(tok, "stories", Source::kVocabGguf);
  auto tmpl = make_chat_template("llama2", *tok_l.file, tok);
  ASSERT_TRUE(tmpl.ok());
  auto ids =
      (*tmpl)->render({{"system", "S"}, {"user", "hi"}, {"assistant", "yo"}, {"user", "ok"}});
  ASSERT_TRUE(ids.ok());
  Ids expected{1};
  for (int32_t id : tok.encode("[INST] <<SYS>>\nS\n<</SYS>>\n\nhi [/INST] yo "))
    expected.push_back(id);
  expected.push_back(2);
  expected.push_back(1);
  for (int32_t id : tok.encode("[INST] ok [/INST]")) expected.push_back(id);
  EXPECT_EQ(*ids, expected);
}

TEST(ChatTemplate, ChatGlm3ToolsAndMetadata) {
  GLM_LOAD_OR_SKIP(tok, "chatglm3", Source::kVocabGguf);
  auto tmpl = template_for(tok_l);
  ASSERT_NE(tmpl, nullptr);
  // The tools are appended pretty-printed (json.dumps(indent=4, ensure_ascii=False)), keys kept
  // in their order.
  Message sys{
      "system", "Tools:", "",
      nlohmann::ordered_json::parse(R"([{"name":"天气","params":[],"b":{"z":1,"a":true}}])")};
  const std::string pretty =
      "Tools:\n[\n    {\n        \"name\": \"天气\",\n        \"params\": [],\n"
      "        \"b\": {\n            \"z\": 1,\n            \"a\": true\n        }\n    }\n]";
  auto with_tools = tmpl->render({sys, {"user", "hi"}});
  auto by_hand = tmpl->render({{"system", pretty}, {"user", "hi"}});
  ASSERT_TRUE(with_tools.ok() && by_hand.ok()) << with_tools.status().to_string();
  EXPECT_EQ(*with_tools, *by_hand);
  // An assistant tool call: <|assistant|> + sp("name\n") + sp(content); then the observation.
  Message call{"assistant", "```python\ntool_call(seed=42)\n```", "random_number_generator"};
  auto ids = tmpl->render({{"user", "x"}, call, {"observation", "{\"n\": 7}"}});
  ASSERT_TRUE(ids.ok());
  Ids expected{64790, 64792, 64795};
  auto add = [&](const Ids& v) { expected.insert(expected.end(), v.begin(), v.end()); };
  add(tok.encode("\n"));
  add(tok.encode("x"));
  expected.push_back(64796);
  add(tok.encode("random_number_generator\n"));
  add(tok.encode(call.content));
  expected.push_back(64797);
  add(tok.encode("\n"));
  add(tok.encode("{\"n\": 7}"));
  expected.push_back(64796);
  EXPECT_EQ(*ids, expected);
  // Errors.
  EXPECT_EQ(tmpl->render({{"robot", "x"}}).status().code(), ErrorCode::kInvalidArgument);
  Message bad{"system", "x", "", nlohmann::ordered_json::parse(R"({"not":"an array"})")};
  EXPECT_EQ(tmpl->render({bad}).status().code(), ErrorCode::kInvalidArgument);
  Message user_tools{"user", "x", "", nlohmann::ordered_json::parse(R"([{"name":"f"}])")};
  EXPECT_EQ(tmpl->render({user_tools}).status().code(), ErrorCode::kInvalidArgument);
}

TEST(ChatTemplate, ForcedTemplateNeedsItsTokens) {
  GLM_LOAD_OR_SKIP(tok, "stories", Source::kVocabGguf);
  EXPECT_EQ(make_chat_template("chatglm3", *tok_l.file, tok).status().code(),
            ErrorCode::kUnsupported);
  EXPECT_EQ(make_chat_template("nope", *tok_l.file, tok).status().code(),
            ErrorCode::kInvalidArgument);
}

TEST(ToolCall, FunctionCallArgumentsBecomeJson) {
  auto out = parse_assistant_output(
      "random_number_generator\n```python\ntool_call(seed=42, range=(0, 100))\n```");
  ASSERT_TRUE(out.tool_call.has_value());
  EXPECT_EQ(out.tool_call->name, "random_number_generator");
  EXPECT_EQ(out.tool_call->arguments, R"({"seed":42,"range":[0,100]})");
  EXPECT_EQ(out.tool_call->code, "tool_call(seed=42, range=(0, 100))");
}

TEST(ToolCall, PythonLiterals) {
  auto call = parse_tool_call(
      " get_weather \n```python\ntool_call(city_name='北京', days=-3, ratio=2.5e-1, ok=True, "
      "none=None, tags=['a', \"b\\n\"], opts={'k': (1,), 2: False},)\n```\n");
  ASSERT_TRUE(call.has_value());
  EXPECT_EQ(call->name, "get_weather");
  auto j = nlohmann::json::parse(call->arguments);
  EXPECT_EQ(j["city_name"], "北京");
  EXPECT_EQ(j["days"], -3);
  EXPECT_DOUBLE_EQ(j["ratio"].get<double>(), 0.25);
  EXPECT_EQ(j["ok"], true);
  EXPECT_TRUE(j["none"].is_null());
  EXPECT_EQ(j["tags"], nlohmann::json::parse(R"(["a","b\n"])"));
  EXPECT_EQ(j["opts"], nlohmann::json::parse(R"({"k":[1],"2":false})"));
}

TEST(ToolCall, PlainAnswersAndUnparsableCalls) {
  auto plain = parse_assistant_output("\n 你好👋！我是人工智能助手。 \n");
  EXPECT_FALSE(plain.tool_call.has_value());
  EXPECT_EQ(plain.content, "你好👋！我是人工智能助手。");
  EXPECT_FALSE(parse_tool_call("no newline at all").has_value());
  auto code = parse_tool_call("interpreter\n```python\nprint(1)\n```");
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(code->name, "interpreter");
  EXPECT_EQ(code->code, "print(1)");
  EXPECT_TRUE(code->arguments.empty());
  for (const char* bad : {"f\n```\ntool_call(x=)\n```", "f\n```\ntool_call(x=1\n```",
                          "f\n```\ntool_call(x='unterminated)\n```", "f\n```\nos.system('x')\n```",
                          ("f\n```\ntool_call(x=[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
                           "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]])\n```")}) {
    auto c = parse_tool_call(bad);
    ASSERT_TRUE(c.has_value()) << bad;
    EXPECT_TRUE(c->arguments.empty()) << bad;
  }
}

}  // namespace
}  // namespace glm::tok
