// Reading tool calls out of GLM answers: ToolCallStream on whole texts and on every split of
// them into pieces (a streamed answer and the non-streamed one give the same call).
#include "tokenizer/tool_call_stream.h"

#include <gtest/gtest.h>

namespace glm::tok {
namespace {

// Fed one byte at a time (the worst split): the same answer as whole.
ToolAnswer read_bytewise(const std::vector<std::string>& names, const std::string& text) {
  ToolCallStream s(names);
  std::vector<ToolDelta> d;
  for (char c : text) {
    for (ToolDelta& x : s.feed(std::string(1, c))) d.push_back(std::move(x));
  }
  for (ToolDelta& x : s.finish()) d.push_back(std::move(x));
  return join_tool_deltas(d);
}

void expect_answer(const std::vector<std::string>& names, const std::string& text,
                   const std::string& content, const std::string& name,
                   const std::string& arguments) {
  for (const ToolAnswer& a : {read_tool_answer(names, text), read_bytewise(names, text)}) {
    EXPECT_EQ(a.content, content) << text;
    if (name.empty()) {
      EXPECT_TRUE(a.calls.empty()) << text;
      continue;
    }
    ASSERT_EQ(a.calls.size(), 1u) << text;
    EXPECT_EQ(a.calls[0].name, name) << text;
    EXPECT_EQ(a.calls[0].arguments, arguments) << text;
  }
}

TEST(ToolCallStream, Glm4CallsAreANameLineThenJson) {
  const std::vector<std::string> names = {"get_weather", "get"};
  expect_answer(names, "get_weather\n{\"city\": \"北京\"}", "", "get_weather",
                "{\"city\": \"北京\"}");
  expect_answer(names, "get\n  {}", "", "get", "{}");              // a name that prefixes another
  expect_answer(names, "get_weather\n", "", "get_weather", "{}");  // no arguments: an empty object
  expect_answer(names, "get_weather\n  \n", "", "get_weather", "{}");
}

TEST(ToolCallStream, Chatglm3BlocksBecomeJson) {
  expect_answer({"get_weather"}, "get_weather\n```python\ntool_call(city='Paris', days=3)\n```", "",
                "get_weather", R"({"city":"Paris","days":3})");
  // A block that does not parse is passed on as written (the client sees what came).
  expect_answer({"f"}, "f\n```python\nnot a call\n```", "", "f", "```python\nnot a call\n```");
}

TEST(ToolCallStream, AnythingElseIsAPlainAnswer) {
  const std::vector<std::string> names = {"get_weather"};
  expect_answer(names, "\nIt is sunny.", "It is sunny.", "", "");  // GLM answers start with \n
  expect_answer(names, "\n\n  \nHi\n there", "Hi\n there", "", "");
  expect_answer(names, "get the weather\nfrom a site", "get the weather\nfrom a site", "", "");
  expect_answer(names, "other_tool\n{}", "other_tool\n{}", "", "");  // not an allowed name
  expect_answer(names, "get_wea", "get_wea", "", "");                // ended inside a name
  expect_answer(names, "", "", "", "");
  expect_answer({}, "get_weather\n{}", "get_weather\n{}", "", "");
}

TEST(ToolCallStream, ContentFlowsWithoutWaitingForTheEnd) {
  ToolCallStream s({"get_weather"});
  EXPECT_TRUE(s.feed("\n").empty());
  auto d = s.feed("Hello");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, ToolDelta::Kind::kContent);
  EXPECT_EQ(d[0].text, "Hello");
  // A call starts as soon as its name line is complete; JSON arguments flow as they come.
  ToolCallStream c({"get_weather"});
  EXPECT_TRUE(c.feed("get_wea").empty());
  d = c.feed("ther\n{\"ci");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].kind, ToolDelta::Kind::kCallStart);
  EXPECT_EQ(d[0].text, "get_weather");
  EXPECT_EQ(d[1].kind, ToolDelta::Kind::kArguments);
  EXPECT_EQ(d[1].text, "{\"ci");
  EXPECT_TRUE(c.is_call());
}

}  // namespace
}  // namespace glm::tok
