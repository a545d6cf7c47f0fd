// The tool parts of the GLM prompts: ChatGLM3's tool_call(...) block written from JSON
// arguments (and read back by the parser), GLM-4's tool system prompt as the official
// glm-4-9b-chat chat template writes it, and both templates rendering tools, calls and
// observations.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"
#include "tokenizer/test_fixtures.h"

namespace glm::tok {
namespace {

using testing::Source;
using Ids = std::vector<int32_t>;

// A tool as an OpenAI client writes it, keys deliberately not in alphabetical order.
constexpr const char* kTools =
    R"([{"name":"get_weather","description":"查询天气","parameters":{"type":"object",)"
    R"("properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}])";

// The text the official template writes after <|system|> for kTools: its sentence, "# 可用工具",
// then "## name", tojson(indent=4) of the function (transformers' tojson: ensure_ascii=False,
// keys unsorted) and the JSON note.
const std::string kGlm4ToolsText =
    "\n你是一个名为 ChatGLM 的人工智能助手。你是基于智谱AI训练的语言模型 GLM-4 模型开发的，"
    "你的任务是针对用户的问题和要求提供适当的答复和支持。\n\n# 可用工具\n\n## get_weather\n\n"
    "{\n    \"name\": \"get_weather\",\n    \"description\": \"查询天气\",\n"
    "    \"parameters\": {\n        \"type\": \"object\",\n        \"properties\": {\n"
    "            \"city\": {\n                \"type\": \"string\"\n            },\n"
    "            \"days\": {\n                \"type\": \"integer\"\n            }\n"
    "        },\n        \"required\": [\n            \"city\"\n        ]\n    }\n}\n"
    "在调用上述函数时，请使用 Json 格式表示调用的参数。";

TEST(ToolPrompt, PythonToolCallIsWhatTheModelWrites) {
  auto call = python_tool_call(
      R"({"city":"Paris","days":3,"ok":true,"none":null,"l":[1.5,"it's"],"d":{"k":"v\n"}})");
  ASSERT_TRUE(call.ok()) << call.status().to_string();
  EXPECT_EQ(*call,
            "```python\ntool_call(city='Paris', days=3, ok=True, none=None, l=[1.5, \"it's\"], "
            "d={'k': 'v\\n'})\n```");
  // ... and the parser reads it back to the same arguments, in order.
  auto back = parse_assistant_output("get_weather\n" + *call);
  ASSERT_TRUE(back.tool_call.has_value());
  EXPECT_EQ(back.tool_call->name, "get_weather");
  EXPECT_EQ(back.tool_call->arguments,
            R"({"city":"Paris","days":3,"ok":true,"none":null,"l":[1.5,"it's"],"d":{"k":"v\n"}})");
  EXPECT_EQ(*python_tool_call("{}"), "```python\ntool_call()\n```");
  EXPECT_EQ(python_tool_call(R"({"not-an-identifier":1})").status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(python_tool_call("[1]").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(python_tool_call("{bad").status().code(), ErrorCode::kInvalidArgument);
}

TEST(ToolPrompt, Glm4ToolsTextKeepsTheClientsKeyOrder) {
  auto text = glm4_tools_prompt(nlohmann::ordered_json::parse(kTools));
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  EXPECT_EQ(*text, kGlm4ToolsText);
  EXPECT_EQ(glm4_tools_prompt(nlohmann::ordered_json::parse(R"([{"description":"no name"}])"))
                .status()
                .code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(glm4_tools_prompt(nlohmann::ordered_json::parse(R"({"name":"x"})")).status().code(),
            ErrorCode::kInvalidArgument);
}

TEST(ToolTemplates, Glm4ToolsCallsAndObservations) {
  GLM_LOAD_OR_SKIP(tok, "glm4", Source::kVocabGguf);
  auto tmpl = ChatTemplate::for_model(*tok_l.file, tok);
  ASSERT_TRUE(tmpl.ok());
  ASSERT_STREQ((*tmpl)->name(), "glm4");
  constexpr int32_t kGmask = 151331, kSop = 151333, kSystem = 151335, kUser = 151336,
                    kAssistant = 151337, kObservation = 151338;
  Ids expected{kGmask, kSop};
  auto add = [&](const std::string& text) {
    const Ids ids = tok.encode(text);
    expected.insert(expected.end(), ids.begin(), ids.end());
  };
  // A tools-only system message (no content: only its tool prompt), the user, a call given as
  // arguments, the observation, and an empty message (the template skips it).
  Message tools{"system", "", "", nlohmann::ordered_json::parse(kTools)};
  Message call{"assistant", "", "get_weather"};
  call.arguments = R"({"city": "北京"})";
  auto ids = (*tmpl)->render({tools,
                              {"user", "北京天气"},
                              call,
                              {"observation", R"({"temp": 20})"},
                              {"user", ""},
                              {"system", "Be brief."}});
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  expected.push_back(kSystem);
  add(kGlm4ToolsText);
  expected.push_back(kUser);
  add("\n北京天气");
  expected.push_back(kAssistant);
  add("get_weather\n{\"city\": \"北京\"}");
  expected.push_back(kObservation);
  add("\n{\"temp\": 20}");
  expected.push_back(kSystem);
  add("\nBe brief.");
  expected.push_back(kAssistant);
  EXPECT_EQ(*ids, expected);
  // Tools and text on one system message: the tool prompt, then the text as its own message.
  Message both{"system", "Be brief.", "", nlohmann::ordered_json::parse(kTools)};
  auto ids2 = (*tmpl)->render({both, {"user", "x"}});
  ASSERT_TRUE(ids2.ok());
  expected = {kGmask, kSop, kSystem};
  add(kGlm4ToolsText);
  expected.push_back(kSystem);
  add("\nBe brief.");
  expected.push_back(kUser);
  add("\nx");
  expected.push_back(kAssistant);
  EXPECT_EQ(*ids2, expected);
  // Arguments need an assistant naming the tool.
  Message orphan{"assistant", "", ""};
  orphan.arguments = "{}";
  EXPECT_EQ((*tmpl)->render({{"user", "x"}, orphan, {"user", "y"}}).status().code(),
            ErrorCode::kInvalidArgument);
}

TEST(ToolTemplates, ChatGlm3ToolsSentenceAndCallsFromArguments) {
  GLM_LOAD_OR_SKIP(tok, "chatglm3", Source::kVocabGguf);
  auto tmpl = ChatTemplate::for_model(*tok_l.file, tok);
  ASSERT_TRUE(tmpl.ok());
  ASSERT_STREQ((*tmpl)->name(), "chatglm3");
  // A tools-only system message gets the official demo's sentence; a call given as JSON
  // arguments is written as the model writes it.
  Message call{"assistant", "", "get_weather"};
  call.arguments = R"({"city":"北京","days":2})";
  auto ids = (*tmpl)->render({{"system", "", "", nlohmann::ordered_json::parse(kTools)},
                              {"user", "q"},
                              call,
                              {"observation", "晴"}});
  Message pretty_sys{"system", std::string(kChatGlm3ToolsSentence) + "\n" +
                                   nlohmann::ordered_json::parse(kTools).dump(4)};
  Message raw_call{"assistant", "```python\ntool_call(city='北京', days=2)\n```", "get_weather"};
  auto by_hand = (*tmpl)->render({pretty_sys, {"user", "q"}, raw_call, {"observation", "晴"}});
  ASSERT_TRUE(ids.ok() && by_hand.ok()) << ids.status().to_string();
  EXPECT_EQ(*ids, *by_hand);
}

}  // namespace
}  // namespace glm::tok
