// GLM-4.5's chat template against the model's own chat_template.jinja rendered and tokenized
// outside the repository (tests/data/glm4moe/README.md: renderer, template source, llama.cpp's
// ids), its choice from the file, and its XML tool calls read back from answers, whole and
// streamed.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <string>

#include "tokenizer/chat_template.h"
#include "tokenizer/test_fixtures.h"
#include "tokenizer/tool_call_stream.h"

namespace glm::tok {
namespace {

using testing::Source;
using Ids = std::vector<int32_t>;
using ojson = nlohmann::ordered_json;

std::string glm45_data(const std::string& name) {
  return std::string(GLM_SOURCE_DIR) + "/tests/data/glm4moe/" + name;
}

// GLM-4.5's added tokens from 151343 on (its tokenizer_config.json; the ids below are GLM-4's,
// whose 151552-id vocabulary and 318088 merges GLM-4.5 shares), all written as control tokens
// (the worst a converter may do: the tokenizer still reads the tags as text, is_answer_tag).
const char* const kGlm45Added[] = {"<|begin_of_audio|>",
                                   "<|end_of_audio|>",
                                   "<|begin_of_transcription|>",
                                   "<|end_of_transcription|>",
                                   "<|code_prefix|>",
                                   "<|code_middle|>",
                                   "<|code_suffix|>",
                                   "<think>",
                                   "</think>",
                                   "<tool_call>",
                                   "</tool_call>",
                                   "<tool_response>",
                                   "</tool_response>",
                                   "<arg_key>",
                                   "</arg_key>",
                                   "<arg_value>",
                                   "</arg_value>",
                                   "/nothink",
                                   "<|begin_of_box|>",
                                   "<|end_of_box|>",
                                   "<|image|>",
                                   "<|video|>"};
constexpr int32_t kFirstAdded = 151343;

// GLM-4's real vocabulary with GLM-4.5's added tokens, as a glm4moe file; null if absent.
const testing::Loaded* glm45_vocab() {
  static testing::Loaded l = [] {
    const testing::Loaded& glm4 = testing::load("glm4", Source::kVocabGguf);
    if (!glm4.tok) return testing::Loaded{nullptr, nullptr, glm4.error};
    VocabSpec s = *read_vocab(*glm4.file);
    for (size_t i = 0; i < std::size(kGlm45Added); ++i) {
      const std::string t = kGlm45Added[i];
      s.tokens[kFirstAdded + i] = t;
      s.types[kFirstAdded + i] = kTokenControl;
    }
    return testing::load_spec(s, "glm45-vocab", "glm4moe");
  }();
  return &l;
}

#define GLM45_VOCAB_OR_SKIP(var)                     \
  const testing::Loaded* var##_l = glm45_vocab();    \
  if (!var##_l->tok) GTEST_SKIP() << var##_l->error; \
  const Tokenizer& var = *var##_l->tok

// What HF's tokenizer does with the rendered text: every added token (GLM-4's specials and
// GLM-4.5's additions) split out first, the text between them byte-level BPE'd whole.
Ids hf_ids(const Tokenizer& tok, std::string_view text) {
  std::vector<std::pair<std::string, int32_t>> added;
  for (int32_t id = 151329; id < kFirstAdded + static_cast<int32_t>(std::size(kGlm45Added)); ++id)
    added.emplace_back(tok.decode({id}, /*render_special=*/true), id);
  Ids out;
  std::string pending;
  while (!text.empty()) {
    size_t at = std::string_view::npos;
    const std::pair<std::string, int32_t>* hit = nullptr;
    for (const auto& a : added) {
      const size_t p = text.find(a.first);
      if (p < at) {
        at = p;
        hit = &a;
      }
    }
    const std::string_view before = text.substr(0, at);
    if (!before.empty()) {
      const Ids ids = tok.encode(before);
      out.insert(out.end(), ids.begin(), ids.end());
    }
    if (hit == nullptr) break;
    out.push_back(hit->second);
    text.remove_prefix(at + hit->first.size());
  }
  return out;
}

// A case's OpenAI-shaped messages as the gateway hands them to the engine (api/openai.cc): the
// tools (function objects) in a system message of their own, first; an assistant's text, then
// one message per call (metadata = name, arguments = JSON text); role tool = observation.
std::vector<Message> messages_glm45(const ojson& c) {
  std::vector<Message> out;
  if (c.contains("tools")) {
    ojson functions = ojson::array();
    for (const auto& t : c["tools"]) functions.push_back(t["function"]);
    out.push_back({"system", "", "", functions});
  }
  for (const auto& m : c["messages"]) {
    const std::string role = m["role"] == "tool" ? "observation" : m["role"].get<std::string>();
    if (!m.contains("tool_calls")) {
      out.push_back({role, m["content"]});
      continue;
    }
    if (!m["content"].get<std::string>().empty()) out.push_back({role, m["content"]});
    for (const auto& tc : m["tool_calls"]) {
      Message call{"assistant", "", tc["function"]["name"]};
      call.arguments = tc["function"]["arguments"].dump();
      out.push_back(std::move(call));
    }
  }
  return out;
}

TEST(Glm45Template, IdsEqualTheModelsJinjaTemplate) {
  GLM45_VOCAB_OR_SKIP(tok);
  auto tmpl = make_chat_template("glm45", *tok_l->file, tok);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().to_string();
  std::ifstream in(glm45_data("templates.jsonl"));
  ASSERT_TRUE(in.good()) << glm45_data("templates.jsonl");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const ojson c = ojson::parse(line);  // the tools' and arguments' key order
    const std::string text = c["text"];
    auto ids = (*tmpl)->render(messages_glm45(c));
    ASSERT_TRUE(ids.ok()) << ids.status().to_string();
    EXPECT_EQ(tok.decode(*ids, /*render_special=*/true), text) << c["name"];
    EXPECT_EQ(*ids, c["ids"].get<Ids>()) << c["name"];  // llama.cpp's tokenization of `text`
    EXPECT_EQ(*ids, hf_ids(tok, text)) << c["name"];
    if (c["name"] == "call_with_args_and_result") {  // the tags are tokens: <tool_call>, <arg_key>
      EXPECT_NE(std::find(ids->begin(), ids->end(), 151352), ids->end());
      EXPECT_NE(std::find(ids->begin(), ids->end(), 151356), ids->end());
    }
    ++n;
  }
  EXPECT_EQ(n, 6);
}

// enable_thinking (the template's variable; requests set it through chat_template_kwargs or
// Anthropic's thinking) against the same template rendered by @huggingface/jinja with it
// (templates_thinking.jsonl, README.md): false appends /nothink to each user turn (not twice)
// and opens the answer with an empty <think></think>; true is the default's render. The ids are
// HF's rule applied to the reference text (no llama.cpp ids were made for these cases).
// Renders each case of the JSONL `file` (its enable_thinking where it sets one) with `tmpl` and
// checks the text against the jinja's and the ids against HF's rule on it; then `check(case,
// options, ids)`. Returns the number of cases (-1 when the file or a render failed).
int expect_cases_render(
    const ChatTemplate& tmpl, const Tokenizer& tok, const std::string& file,
    const std::function<void(const ojson&, const TemplateOptions&, const Ids&)>& check) {
  std::ifstream in(glm45_data(file));
  EXPECT_TRUE(in.good()) << glm45_data(file);
  if (!in.good()) return -1;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const ojson c = ojson::parse(line);
    const std::string text = c["text"];
    const TemplateOptions options{c.value("enable_thinking", true)};
    auto ids = tmpl.render_with(messages_glm45(c), options);
    EXPECT_TRUE(ids.ok()) << ids.status().to_string();
    if (!ids.ok()) return -1;
    EXPECT_EQ(tok.decode(*ids, /*render_special=*/true), text) << c["name"];
    EXPECT_EQ(*ids, hf_ids(tok, text)) << c["name"];
    check(c, options, *ids);
    ++n;
  }
  return n;
}

TEST(Glm45Template, EnableThinkingFalseEqualsTheModelsJinjaTemplate) {
  GLM45_VOCAB_OR_SKIP(tok);
  auto tmpl = make_chat_template("glm45", *tok_l->file, tok);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().to_string();
  int off = 0;
  const int n =
      expect_cases_render(**tmpl, tok, "templates_thinking.jsonl",
                          [&](const ojson& c, const TemplateOptions& options, const Ids& ids) {
                            if (options.enable_thinking) {
                              EXPECT_EQ(ids, *(*tmpl)->render(messages_glm45(c))) << c["name"];
                            } else {
                              ++off;
                              EXPECT_EQ(ids.back(), 151351) << c["name"];  // </think>
                            }
                          });
  EXPECT_EQ(n, 4);
  EXPECT_EQ(off, 3);
}

TEST(Glm45Template, ChosenForGlm4MoeFilesAndThinksWithoutAnOpenedPrompt) {
  GLM45_VOCAB_OR_SKIP(tok);
  auto t = ChatTemplate::for_model(*tok_l->file, tok);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_STREQ((*t)->name(), "glm45");
  // The answer starts with the model's own "<think>" (the prompt ends at <|assistant|>).
  EXPECT_TRUE((*t)->reasoning());
  EXPECT_FALSE((*t)->opens_reasoning({}));
  EXPECT_EQ((*t)->stop_ids(), (Ids{151329, 151336, 151338}));
  auto ids = (*t)->render({{"user", "hi"}});
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->back(), 151337);  // <|assistant|>
  // The answer's tags are text of the answer (the readers see them) though written as control
  // tokens; /nothink and the <|...|> tokens stay control.
  EXPECT_EQ(tok.decode({151350, 9703, 151351, 151352}), "<think>Hello</think><tool_call>");
  StreamDecoder d(tok);
  EXPECT_EQ(d.push(151356) + d.push(151359), "<arg_key></arg_value>");
  EXPECT_FALSE(tok.is_control(151352));
  EXPECT_TRUE(tok.is_control(151360));
  EXPECT_TRUE(tok.is_control(151343));
}

// GLM-4.7's template (GLM-4.7-Flash's chat_template.jinja in llama.cpp's models/templates at
// d32676d) rendered by Python's jinja2 as transformers does (tests/data/glm4moe/README.md) for
// the GLM-4.5 cases above and the thinking ones: the same turns without newlines, the prompt
// ending <think> (or </think> without thinking). The ids: HF's rule on the reference text.
TEST(Glm47Template, IdsEqualTheModelsJinjaTemplate) {
  GLM45_VOCAB_OR_SKIP(tok);
  auto tmpl = make_chat_template("glm47", *tok_l->file, tok);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().to_string();
  int off = 0;
  const int n = expect_cases_render(
      **tmpl, tok, "templates_glm47.jsonl",
      [&](const ojson& c, const TemplateOptions& options, const Ids& ids) {
        // The prompt opens the thinking (the answer starts inside it) unless thinking is off.
        EXPECT_EQ(ids.back(), options.enable_thinking ? 151350 : 151351) << c["name"];
        EXPECT_EQ((*tmpl)->opens_reasoning(options), options.enable_thinking);
        off += options.enable_thinking ? 0 : 1;
      });
  EXPECT_EQ(n, 10);
  EXPECT_EQ(off, 3);
}

// A glm4moe file whose own template reads clear_thinking (GLM-4.7's) gets glm47; without it,
// glm45.
TEST(Glm47Template, ChosenWhenTheFilesTemplateReadsClearThinking) {
  const testing::Loaded* base = glm45_vocab();
  if (!base->tok) GTEST_SKIP() << base->error;
  VocabSpec s = *read_vocab(*base->file);
  s.chat_template = "[gMASK]<sop>{%- if clear_thinking is defined %}{% endif %}";
  const testing::Loaded l = testing::load_spec(s, "glm47-vocab", "glm4moe");
  ASSERT_NE(l.tok, nullptr) << l.error;
  auto t = ChatTemplate::for_model(*l.file, *l.tok);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_STREQ((*t)->name(), "glm47");
  EXPECT_TRUE((*t)->reasoning());
  EXPECT_EQ((*t)->stop_ids(), (Ids{151329, 151336, 151338}));
  s.chat_template = "[gMASK]<sop>{{ messages }}";
  const testing::Loaded l45 = testing::load_spec(s, "glm45-template-vocab", "glm4moe");
  ASSERT_NE(l45.tok, nullptr) << l45.error;
  auto t45 = ChatTemplate::for_model(*l45.file, *l45.tok);
  ASSERT_TRUE(t45.ok()) << t45.status().to_string();
  EXPECT_STREQ((*t45)->name(), "glm45");
}

// A vocabulary without GLM-4.5's tags (the synthetic glm4moe files) spells them as text.
TEST(Glm45Template, TagsAreTextWhenTheVocabularyLacksThem) {
  GLM_LOAD_OR_SKIP(tok, "glm4", Source::kVocabGguf);
  auto t = make_chat_template("glm45", *tok_l.file, tok);
  ASSERT_TRUE(t.ok());
  Message call{"assistant", "", "get_time"};
  call.arguments = "{}";
  auto ids = (*t)->render({{"user", "time?"}, call});
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  EXPECT_EQ(tok.decode(*ids, true),
            "[gMASK]<sop><|user|>\ntime?<|assistant|>\n<think></think>\n<tool_call>get_time\n"
            "</tool_call><|assistant|>");
  Message bad{"assistant", "", "get_time"};
  bad.arguments = "[1]";
  EXPECT_FALSE((*t)->render({bad}).ok());
  EXPECT_FALSE((*t)->render({{"tool", "x"}}).ok());
}

TEST(Glm45ToolCalls, PythonJsonIsJsonDumps) {
  EXPECT_EQ(python_json(ojson::parse(R"({"a":[1,2.5,{"b":null}],"c":"北\n","d":true,"e":{}})")),
            R"({"a": [1, 2.5, {"b": null}], "c": "北\n", "d": true, "e": {}})");
}

TEST(Glm45ToolCalls, WholeAnswersFollowVllmsParser) {
  const Glm45Calls r = parse_glm45_tool_calls(
      "Let me look.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>北京</arg_value>\n"
      "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n<arg_key>opts</arg_key>\n"
      "<arg_value>{\"detail\": true}</arg_value>\n<arg_key>tags</arg_key>\n"
      "<arg_value>[\"a\", 1]</arg_value>\n<arg_key>zip</arg_key>\n<arg_value>007</arg_value>\n"
      "</tool_call>\n<tool_call>get_time</tool_call><tool_call>get_time\n</tool_call>");
  EXPECT_EQ(r.content, "Let me look.\n");
  ASSERT_EQ(r.calls.size(), 3u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments,
            R"({"city":"北京","days":3,"opts":{"detail":true},"tags":["a",1],"zip":"007"})");
  EXPECT_EQ(r.calls[1].name, "get_time");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  EXPECT_EQ(r.calls[2].arguments, "{}");
  // Key and value on one line, values padded: stripped.
  auto one = parse_glm45_call("f<arg_key> k </arg_key><arg_value> v w </arg_value>");
  ASSERT_TRUE(one);
  EXPECT_EQ(one->name, "f");
  EXPECT_EQ(one->arguments, R"({"k":"v w"})");
  // Malformed bodies are no call; a cut call ends the calls; no call at all is all content.
  EXPECT_FALSE(parse_glm45_call(""));
  EXPECT_FALSE(parse_glm45_call("f\n<arg_key>k</arg_key>"));
  EXPECT_FALSE(parse_glm45_call("f\n<arg_value>v</arg_value>"));
  EXPECT_FALSE(parse_glm45_call("f\nstray<arg_key>k</arg_key><arg_value>v</arg_value>"));
  EXPECT_EQ(parse_glm45_tool_calls("x<tool_call>f\n<arg_key>k").content,
            "x<tool_call>f\n<arg_key>k");
  EXPECT_EQ(parse_glm45_tool_calls("<tool_call>\n</tool_call>").calls.size(), 0u);
  const std::string deep =
      "f<arg_key>k</arg_key><arg_value>" + std::string(100000, '[') + "</arg_value>";
  ASSERT_TRUE(parse_glm45_call(deep));
}

// Fed one byte at a time (the worst split) and whole: the same answer.
std::vector<ToolAnswer> both_ways(const std::vector<std::string>& names, const std::string& text,
                                  const ToolReading& reading = {}) {
  ToolCallStream s(names, reading);
  std::vector<ToolDelta> d;
  for (char c : text) {
    for (ToolDelta& x : s.feed(std::string(1, c))) d.push_back(std::move(x));
  }
  for (ToolDelta& x : s.finish()) d.push_back(std::move(x));
  return {read_tool_answer(names, text, reading), join_tool_deltas(d)};
}

// "name args" for each call, joined by " | ".
std::string calls_of(const ToolAnswer& a) {
  std::string out;
  for (const ToolCall& c : a.calls) out += (out.empty() ? "" : " | ") + c.name + " " + c.arguments;
  return out;
}

TEST(Glm45ToolCalls, StreamedAsTheWholeAnswer) {
  const std::vector<std::string> names = {"get_weather", "get_time"};
  for (const ToolAnswer& a : both_ways(names,
                                       "<tool_call>get_weather\n<arg_key>city</arg_key>\n"
                                       "<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n"
                                       "<arg_value>2</arg_value>\n</tool_call>")) {
    EXPECT_EQ(a.content, "");
    EXPECT_EQ(calls_of(a), R"(get_weather {"city":"Paris","days":2})");
  }
  // Text before the calls streams (without the whitespace before the first); every call is read.
  for (const ToolAnswer& a :
       both_ways(names,
                 "\nChecking <b>now</b>.\n\n<tool_call>get_time</tool_call>\n"
                 "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>x"
                 "</arg_value>\n</tool_call>")) {
    EXPECT_EQ(a.content, "Checking <b>now</b>.");
    EXPECT_EQ(calls_of(a), R"(get_time {} | get_weather {"city":"x"})");
  }
  // Cut, malformed or unknown calls are text; so is a lone "<tool_c".
  for (const std::string& text :
       {std::string("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_val"),
        std::string("<tool_call>get_weather\n<arg_value>x</arg_value></tool_call>"),
        std::string("<tool_call>delete_all</tool_call>"), std::string("see <tool_c")}) {
    for (const ToolAnswer& a : both_ways(names, text)) {
      EXPECT_TRUE(a.calls.empty()) << text;
      EXPECT_EQ(a.content, text) << text;
    }
  }
  // After a malformed call the answer goes on (the space before it kept) and may still call.
  for (const ToolAnswer& a :
       both_ways(names, "a <tool_call>nope</tool_call> then <tool_call>get_time\n</tool_call>")) {
    EXPECT_EQ(a.content, "a <tool_call>nope</tool_call> then");
    EXPECT_EQ(calls_of(a), "get_time {}");
  }
  // GLM-4's format still reads.
  for (const ToolAnswer& a : both_ways(names, "get_time\n{}")) {
    EXPECT_EQ(calls_of(a), "get_time {}");
  }
}

// After the first call, only further calls are read: text between and after them, malformed,
// unknown and cut calls are dropped (vLLM's parser keeps only the text before the first call).
TEST(Glm45ToolCalls, AfterACallOnlyCallsAreRead) {
  const std::vector<std::string> names = {"get_weather", "get_time"};
  const std::string first = "Sure.<tool_call>get_time</tool_call>";
  for (const std::string& tail :
       {std::string(" and more text"), std::string("<tool_call>nope</tool_call>"),
        std::string("\n<tool_call>delete_all</tool_call>"),
        std::string("\n<tool_call>get_weather\n<arg_key>city</arg_key>"),  // cut
        std::string("<tool_c")}) {
    for (const ToolAnswer& a : both_ways(names, first + tail)) {
      EXPECT_EQ(a.content, "Sure.") << tail;
      EXPECT_EQ(calls_of(a), "get_time {}") << tail;
    }
  }
  for (const ToolAnswer& a : both_ways(
           names, first + " x <tool_call>bad</tool_call> y <tool_call>get_time</tool_call>")) {
    EXPECT_EQ(calls_of(a), "get_time {} | get_time {}");
  }
  // parallel_tool_calls false: the first call only.
  ToolReading one;
  one.several = false;
  for (const ToolAnswer& a : both_ways(names, first + "<tool_call>get_time</tool_call>", one)) {
    EXPECT_EQ(calls_of(a), "get_time {}");
  }
}

// Values are typed by the functions' schemas: a "string" parameter keeps "7", "true", "null"
// and "[1]" as text; others read JSON when they can (vLLM's rule).
TEST(Glm45ToolCalls, SchemaTypesTheValues) {
  const auto functions = nlohmann::ordered_json::parse(R"([
    {"name": "f", "parameters": {"type": "object", "properties": {
      "s": {"type": "string"}, "n": {"type": "integer"}, "o": {"type": ["string", "null"]},
      "b": {"type": "boolean"}, "any": {}}}},
    {"name": "g"}])");
  const ToolReading reading = tool_reading(functions);
  EXPECT_EQ(reading.text_params.at("f"), (std::set<std::string>{"s", "o"}));
  EXPECT_TRUE(reading.text_params.at("g").empty());
  const std::string text =
      "<tool_call>f\n<arg_key>s</arg_key><arg_value>7</arg_value><arg_key>n</arg_key>"
      "<arg_value>7</arg_value><arg_key>o</arg_key><arg_value>null</arg_value>"
      "<arg_key>b</arg_key><arg_value>true</arg_value><arg_key>any</arg_key>"
      "<arg_value>[1]</arg_value><arg_key>extra</arg_key><arg_value>x y</arg_value></tool_call>"
      "<tool_call>g\n<arg_key>s</arg_key><arg_value>7</arg_value></tool_call>";
  for (const ToolAnswer& a : both_ways({"f", "g"}, text, reading)) {
    EXPECT_EQ(calls_of(a),
              R"(f {"s":"7","n":7,"o":"null","b":true,"any":[1],"extra":"x y"} | g {"s":7})");
  }
  EXPECT_EQ(parse_glm45_tool_calls(text, &reading).calls.at(0).arguments,
            R"({"s":"7","n":7,"o":"null","b":true,"any":[1],"extra":"x y"})");
  // Without the schemas (or with a bad tools value) every JSON value is JSON.
  EXPECT_EQ(parse_glm45_tool_calls(text).calls.at(0).arguments,
            R"({"s":7,"n":7,"o":null,"b":true,"any":[1],"extra":"x y"})");
  EXPECT_TRUE(tool_reading(nlohmann::ordered_json("x")).text_params.empty());
}

// Random answers made of the format's pieces, cut at random: the streamed reading always joins
// to the whole one, and every call read has a JSON object as arguments (tool_call_fuzz runs the
// same checks on arbitrary bytes).
TEST(Glm45ToolCalls, AnySplitOfAnyAnswerReadsTheSame) {
  const std::vector<std::string> names = {"get_weather", "get_time"};
  const char* const pieces[] = {"<tool_call>", "</tool_call>",
                                "<arg_key>",   "</arg_key>",
                                "<arg_value>", "</arg_value>",
                                "get_weather", "get_time",
                                "\n",          " ",
                                "x",           "[1",
                                "{\"a\": 2}",  "\"s\"",
                                "<",           "</",
                                "<tool_c",     "city",
                                "7",           "北"};
  std::mt19937 rng(33);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text;
    const int n = static_cast<int>(rng() % 14);
    for (int i = 0; i < n; ++i) text += pieces[rng() % std::size(pieces)];
    ToolCallStream s(names);
    std::vector<ToolDelta> d;
    for (size_t i = 0; i < text.size();) {
      const size_t step = 1 + rng() % 9;
      for (ToolDelta& x : s.feed(text.substr(i, step))) d.push_back(std::move(x));
      i += step;
    }
    for (ToolDelta& x : s.finish()) d.push_back(std::move(x));
    const ToolAnswer streamed = join_tool_deltas(d);
    const ToolAnswer whole = read_tool_answer(names, text);
    ASSERT_EQ(streamed.content, whole.content) << text;
    ASSERT_EQ(calls_of(streamed), calls_of(whole)) << text;
    for (const ToolCall& c : parse_glm45_tool_calls(text).calls) {
      ASSERT_TRUE(nlohmann::json::parse(c.arguments, nullptr, false).is_object()) << text;
    }
  }
}

}  // namespace
}  // namespace glm::tok
