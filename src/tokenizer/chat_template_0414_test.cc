// GLM-4-0414 / GLM-Z1 chat templates against the models' own chat_template.jinja rendered outside
// the repository (tests/data/glm4-0414/README.md: renderer, template source, tokenizer), their
// choice from the file, and their tool calls read back from the model's output.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tokenizer/chat_template.h"
#include "tokenizer/test_fixtures.h"
#include "tokenizer/tool_call_stream.h"

namespace glm::tok {
namespace {

using testing::Source;
using Ids = std::vector<int32_t>;

std::string glm4_0414_data(const std::string& name) {
  return std::string(GLM_SOURCE_DIR) + "/tests/data/glm4-0414/" + name;
}

// A case's messages as the engine hands them to the template: the tools in a system message of
// their own, first; an assistant's tool call as its metadata (the name) and its content.
std::vector<Message> messages_0414(const nlohmann::ordered_json& c) {
  std::vector<Message> out;
  if (c.contains("tools")) out.push_back({"system", "", "", c["tools"]});
  for (const auto& m : c["messages"])
    out.push_back({m["role"], m["content"], m.value("metadata", "")});
  return out;
}

TEST(Glm4_0414Template, IdsEqualTheModelsJinjaTemplates) {
  GLM_LOAD_OR_SKIP(tok, "glm4", Source::kVocabGguf);
  std::ifstream in(glm4_0414_data("templates.jsonl"));
  ASSERT_TRUE(in.good()) << glm4_0414_data("templates.jsonl");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const nlohmann::ordered_json c = nlohmann::ordered_json::parse(line);  // the tools' key order
    auto tmpl = make_chat_template(c["template"].get<std::string>(), *tok_l.file, tok);
    ASSERT_TRUE(tmpl.ok()) << tmpl.status().to_string();
    auto ids = (*tmpl)->render(messages_0414(c));
    ASSERT_TRUE(ids.ok()) << ids.status().to_string();
    EXPECT_EQ(*ids, c["ids"].get<Ids>()) << c["template"] << " " << c["name"];
    ++n;
  }
  EXPECT_EQ(n, 7);
}

TEST(Glm4_0414Template, ChosenByArchitectureAndThinkTag) {
  GLM_LOAD_OR_SKIP(tok, "glm4", Source::kVocabGguf);
  auto spec = read_vocab(*tok_l.file);
  ASSERT_TRUE(spec.ok());
  struct Case {
    const char* arch;
    const char* chat_template;
    const char* want;
  } cases[] = {{"glm4", "[gMASK]<sop>...<|assistant|>\n<think>", "glm-z1"},
               {"glm4", "[gMASK]<sop>...<|assistant|>\n", "glm4-0414"},
               {"glm4", "", "glm4-0414"},
               {"chatglm", "[gMASK]<sop>...<think>", "glm4"}};
  for (const Case& c : cases) {
    VocabSpec s = *spec;
    s.chat_template = c.chat_template;
    testing::Loaded l = testing::load_spec(s, "glm4-0414-detect", c.arch);
    ASSERT_NE(l.tok, nullptr) << l.error;
    auto t = ChatTemplate::for_model(*l.file, *l.tok);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    EXPECT_STREQ((*t)->name(), c.want) << c.arch << " " << c.chat_template;
    // GLM-Z1 thinks first: its prompt opens <think>, so --reasoning-format auto splits its
    // answers starting inside the thinking; the others are not reasoning templates.
    const bool z1 = std::string(c.want) == "glm-z1";
    EXPECT_EQ((*t)->reasoning(), z1) << c.want;
    EXPECT_EQ((*t)->opens_reasoning({}), z1) << c.want;
    // Every end of turn: <|endoftext|>, <|user|>, <|observation|>.
    EXPECT_EQ((*t)->stop_ids(), (Ids{151329, 151336, 151338}));
  }
}

TEST(Glm4_0414Template, VisibleTextDropsReasoningAndStrips) {
  EXPECT_EQ(glm4_0414_visible("<think>a</think>\n\nB "), "B");
  EXPECT_EQ(glm4_0414_visible("x</think>y</think> z"), "z");
  EXPECT_EQ(glm4_0414_visible("  plain\n"), "plain");
  EXPECT_EQ(glm4_0414_visible("<think>unfinished"), "<think>unfinished");
  EXPECT_EQ(glm4_0414_visible(" \n"), "");
}

// GLM-4-0414 calls a tool as GLM-4 does: the name on its own line after <|assistant|>, then the
// arguments as JSON; a call without arguments writes {}.
TEST(Glm4_0414ToolCalls, ReadAsTheOtherGlmFamiliesIncludingZeroArguments) {
  const std::vector<std::string> names = {"get_weather", "get_time"};
  ToolAnswer a = read_tool_answer(names, "get_weather\n{\"city\": \"北京\"}");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(a.calls[0].arguments), nlohmann::json({{"city", "北京"}}));
  EXPECT_EQ(a.content, "");
  ToolAnswer z = read_tool_answer(names, "get_time\n{}");
  ASSERT_EQ(z.calls.size(), 1u);
  EXPECT_EQ(z.calls[0].name, "get_time");
  EXPECT_EQ(nlohmann::json::parse(z.calls[0].arguments), nlohmann::json::object());
  // Stopped (at <|observation|>) right after the name line: no arguments is the empty object.
  ToolAnswer bare = read_tool_answer(names, "get_time\n");
  ASSERT_EQ(bare.calls.size(), 1u);
  EXPECT_EQ(bare.calls[0].name, "get_time");
  EXPECT_EQ(bare.calls[0].arguments, "{}");
  ToolAnswer plain = read_tool_answer(names, "\nIt is noon.");
  EXPECT_TRUE(plain.calls.empty());
  EXPECT_EQ(plain.content, "It is noon.");
}

}  // namespace
}  // namespace glm::tok
