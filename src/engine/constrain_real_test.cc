// Constrained decoding with the real vocabularies (../shared/data/vocab: ChatGLM3's SentencePiece
// 65024 tokens, GLM-4's byte-level BPE 151552) and the real chatglm3-small model (random
// weights): the grammar vocabulary spells what the tokenizer decodes, so the text a client sees
// is the text the grammar accepted, and an engine answer under a schema validates.
#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/constrain.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tool_call_stream.h"

namespace glm::engine {
namespace {

const std::string kData = GLM_SHARED_DATA;

const char* kWeatherSchema = R"({"type":"object","properties":{
  "city":{"type":"string","maxLength":10},"note":{"type":["string","null"],"maxLength":8},
  "days":{"type":"integer","minimum":1,"maximum":14},"metric":{"type":"boolean"},
  "unit":{"enum":["celsius","fahrenheit","开尔文"]}},
  "required":["city","note","days","metric","unit"],"additionalProperties":false})";

// The grammar's string rule (grammar/json_rules.cc) allows any \uXXXX escape, lone UTF-16
// surrogates included ("\udece"): valid JSON syntax (RFC 8259 section 8.2; JSON.parse, Python
// and ajv accept it) but nlohmann refuses it. Until the rule requires pairs
// (DISABLED_LoneSurrogateEscapesAreRefused below), such escapes become U+FFFD before parsing.
std::string without_lone_surrogates(const std::string& t) {
  auto hex4 = [&](size_t at, unsigned* v) {
    if (at + 4 > t.size()) return false;
    *v = 0;
    for (size_t k = at; k < at + 4; ++k) {
      const char c = t[k];
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) return false;
      *v = *v * 16 + static_cast<unsigned>(d);
    }
    return true;
  };
  std::string out;
  for (size_t i = 0; i < t.size(); ++i) {
    unsigned v = 0, w = 0;
    if (t[i] == '\\' && i + 1 < t.size() && t[i + 1] == 'u' && hex4(i + 2, &v)) {
      const bool high = v >= 0xD800 && v <= 0xDBFF;
      if (high && t.compare(i + 6, 2, "\\u") == 0 && hex4(i + 8, &w) && w >= 0xDC00 &&
          w <= 0xDFFF) {
        out += t.substr(i, 12);
        i += 11;
      } else if (v >= 0xD800 && v <= 0xDFFF) {
        out += "\\ufffd";
        i += 5;
      } else {
        out += t.substr(i, 6);
        i += 5;
      }
    } else if (t[i] == '\\' && i + 1 < t.size()) {
      out += t.substr(i, 2);
      ++i;
    } else {
      out += t[i];
    }
  }
  return out;
}

void check_answer(const nlohmann::json& v, const std::string& text) {
  ASSERT_TRUE(v.is_object()) << text;
  EXPECT_EQ(v.size(), 5u) << text;
  EXPECT_TRUE(v["city"].is_string()) << text;
  EXPECT_TRUE(v["note"].is_string() || v["note"].is_null()) << text;
  ASSERT_TRUE(v["days"].is_number_integer()) << text;
  EXPECT_GE(v["days"].get<int>(), 1);
  EXPECT_LE(v["days"].get<int>(), 14);
  EXPECT_TRUE(v["metric"].is_boolean()) << text;
  EXPECT_TRUE(v["unit"] == "celsius" || v["unit"] == "fahrenheit" || v["unit"] == "开尔文") << text;
}

// Random walks under the mask of `constraint`: the stream decoder's text (what the engine
// emits) equals the bytes the grammar accepted, and `check` accepts it.
void walk_vocab(const std::string& vocab_file, const Constraint& constraint,
                const std::function<void(const std::string&)>& check) {
  const std::string path = kData + "/vocab/" + vocab_file;
  if (access(path.c_str(), R_OK) != 0) GTEST_SKIP() << path << " is absent";
  // Loaded once per file and process: the tests of one gtest run share it (ctest runs each test
  // in its own process, so there every test loads its vocabulary once).
  struct Loaded {
    std::unique_ptr<gguf::File> file;
    std::unique_ptr<tok::Tokenizer> tok;
    std::unique_ptr<tok::ChatTemplate> tmpl;
    std::shared_ptr<const grammar::TokenVocab> vocab;
  };
  static std::map<std::string, Loaded> cache;
  Loaded& l = cache[path];
  if (!l.vocab) {
    auto file = gguf::File::open(path);
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    l.file = std::move(file).value();
    auto t = tok::Tokenizer::from_gguf(*l.file);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    l.tok = std::move(t).value();
    auto tm = tok::ChatTemplate::for_model(*l.file, *l.tok);
    ASSERT_TRUE(tm.ok()) << tm.status().to_string();
    l.tmpl = std::move(tm).value();
    l.vocab = build_token_vocab(*l.tok, l.tok->n_vocab(), l.tmpl->stop_ids());
    ASSERT_NE(l.vocab, nullptr);
  }
  const tok::Tokenizer* tok = l.tok.get();
  const tok::ChatTemplate* tmpl = l.tmpl.get();
  const std::vector<int32_t> stops = tmpl->stop_ids();
  const auto& vocab = l.vocab;
  auto grammar = compile_constraint(constraint, tmpl->name());
  ASSERT_TRUE(grammar.ok()) << grammar.status().to_string();
  std::mt19937 rng(7);
  for (int walk = 0; walk < 20; ++walk) {
    auto m = start_matcher(*grammar, vocab);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    grammar::TokenMask mask;
    tok::StreamDecoder decoder(*tok);
    decoder.set_strip_leading_whitespace(tmpl->strips_answer_whitespace());
    std::string bytes, text;
    bool stopped = false;
    for (int step = 0; step < 400 && !stopped; ++step) {
      const grammar::MaskInfo info = (*m)->fill_mask(&mask);
      ASSERT_FALSE(info.dead()) << bytes;
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < static_cast<int32_t>(mask.size()); ++id) {
        if (mask.allowed(id)) allowed.push_back(id);
      }
      ASSERT_FALSE(allowed.empty());
      // Prefer stopping once complete, so that walks end; otherwise a uniform choice.
      int32_t id = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
      if (info.stop_allowed) {
        for (int32_t s : stops) {
          if (mask.allowed(s)) id = s;
        }
      }
      for (int32_t s : stops) stopped = stopped || s == id;
      ASSERT_TRUE((*m)->accept_token(id).ok());
      if (!stopped) {
        EXPECT_FALSE(tok->is_control(id)) << id;
        bytes += vocab->token(id);
        text += decoder.push(id);
      }
    }
    text += decoder.flush();
    ASSERT_TRUE(stopped) << bytes;
    EXPECT_EQ(text, bytes);
    check(text);
  }
}

void check_json_answer(const std::string& text) {
  check_answer(nlohmann::json::parse(without_lone_surrogates(text), nullptr, false), text);
}

TEST(ConstrainReal, Chatglm3VocabularySpellsWhatItDecodes) {
  walk_vocab("chatglm3-vocab.gguf", {Constraint::Kind::kJsonSchema, kWeatherSchema},
             check_json_answer);
}
TEST(ConstrainReal, Glm4VocabularySpellsWhatItDecodes) {
  walk_vocab("glm4-vocab.gguf", {Constraint::Kind::kJsonSchema, kWeatherSchema}, check_json_answer);
}

// A forced tool call: one of the two functions, in the model's own call format, with arguments
// that validate (bounded schemas, so that random walks end).
std::string tool_choices() {
  return std::string(R"([{"name":"get_weather","description":"天气","parameters":)") +
         kWeatherSchema +
         R"(},{"name":"ping","parameters":{"type":"object","properties":{"host":)"
         R"({"type":"string","maxLength":6}},"required":["host"],"additionalProperties":false}}])";
}

void check_call(const std::string& name, const std::string& arguments, const std::string& text) {
  const auto args = nlohmann::json::parse(without_lone_surrogates(arguments), nullptr, false);
  if (name == "get_weather") {
    check_answer(args, text);
  } else {
    EXPECT_EQ(name, "ping") << text;
    ASSERT_TRUE(args.is_object()) << text;
    EXPECT_EQ(args.size(), 1u) << text;
    EXPECT_TRUE(args["host"].is_string()) << text;
  }
}

TEST(ConstrainReal, Glm4ToolCallsAreNameLineThenJson) {
  walk_vocab("glm4-vocab.gguf", {Constraint::Kind::kToolCall, tool_choices()},
             [](const std::string& text) {
               const size_t nl = text.find('\n');
               ASSERT_NE(nl, std::string::npos) << text;
               check_call(text.substr(0, nl), text.substr(nl + 1), text);
             });
}

TEST(ConstrainReal, Chatglm3ToolCallsAreToolCallBlocks) {
  walk_vocab("chatglm3-vocab.gguf", {Constraint::Kind::kToolCall, tool_choices()},
             [](const std::string& text) {
               // The parser the gateway uses reads it back (Python literals -> JSON).
               const tok::AssistantOutput out = tok::parse_assistant_output(text);
               ASSERT_TRUE(out.tool_call.has_value()) << text;
               ASSERT_FALSE(out.tool_call->arguments.empty()) << text;
               check_call(out.tool_call->name, out.tool_call->arguments, text);
             });
}

// A function without parameters takes any object (GLM-4) / any keyword arguments (ChatGLM3).
TEST(ConstrainReal, ToolsWithoutParametersTakeAnyObject) {
  const std::string tools = R"([{"name":"now"}])";
  auto glm4 = compile_constraint({Constraint::Kind::kToolCall, tools}, "glm4");
  ASSERT_TRUE(glm4.ok()) << glm4.status().to_string();
  grammar::Matcher m(*glm4, nullptr);
  EXPECT_TRUE(m.can_accept_bytes("now\n{\"tz\": [1, null]}"));
  EXPECT_FALSE(m.can_accept_bytes("now\n[1]"));
  EXPECT_FALSE(m.can_accept_bytes("later\n{}"));
  auto glm3 = compile_constraint({Constraint::Kind::kToolCall, tools}, "chatglm3");
  ASSERT_TRUE(glm3.ok()) << glm3.status().to_string();
  grammar::Matcher m3(*glm3, nullptr);
  EXPECT_TRUE(m3.can_accept_bytes("now\n```python\ntool_call(tz=\"UTC\", n=None)\n```"));
  EXPECT_FALSE(m3.can_accept_bytes("now\n```python\ntool_call(tz=null)"));
}

// `call` is a whole sentence of the tool-call grammar `g`, and the answer reader reads it back as
// one get_weather call with the arguments it spells.
void expect_xml_call_read_back(const grammar::Grammar& g, const std::string& call) {
  grammar::Matcher m(g, nullptr);
  ASSERT_TRUE(m.accept_bytes(call).ok()) << call;
  EXPECT_TRUE(m.is_complete());
  const tok::ToolAnswer a = tok::read_tool_answer({"get_weather", "ping"}, call);
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  check_call(a.calls[0].name, a.calls[0].arguments, call);
}

// GLM-4.5 calls in its XML: string properties as text, the others as JSON, the required ones
// always; what the grammar accepts, the answer reader reads back as the same call.
TEST(ConstrainReal, Glm45ToolCallsAreXmlThatTheReaderReadsBack) {
  auto g = compile_constraint({Constraint::Kind::kToolCall, tool_choices()}, "glm45");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  expect_xml_call_read_back(*g,
                            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>北京"
                            "</arg_value>\n<arg_key>note</arg_key>\n<arg_value>null</arg_value>\n"
                            "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n<arg_key>metric"
                            "</arg_key>\n<arg_value>true</arg_value>\n<arg_key>unit</arg_key>\n"
                            "<arg_value>开尔文</arg_value>\n</tool_call>");
  for (const char* bad :
       {"<tool_call>ping\n</tool_call>",                      // a required argument missing
        "<tool_call>get_weather\n<arg_key>days</arg_key>\n",  // out of the schema's order
        "<tool_call>ping\n<arg_key>host</arg_key>\n<arg_value>a<b</arg_value>\n</tool_call>",
        "get_weather\n{"}) {
    grammar::Matcher b(*g, nullptr);
    EXPECT_FALSE(b.accept_bytes(bad).ok() && b.is_complete()) << bad;
  }
  // No parameters: no arguments.
  auto now = compile_constraint({Constraint::Kind::kToolCall, R"([{"name":"now"}])"}, "glm45");
  ASSERT_TRUE(now.ok()) << now.status().to_string();
  grammar::Matcher n(*now, nullptr);
  ASSERT_TRUE(n.accept_bytes("<tool_call>now\n</tool_call>").ok());
  EXPECT_TRUE(n.is_complete());
}

// GLM-4.7's calls: GLM-4.5's XML without its newlines (its template's format); the reader reads
// them back the same.
TEST(ConstrainReal, Glm47ToolCallsAreXmlWithoutNewlines) {
  auto g = compile_constraint({Constraint::Kind::kToolCall, tool_choices()}, "glm47");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  expect_xml_call_read_back(*g,
                            "<tool_call>get_weather<arg_key>city</arg_key><arg_value>北京"
                            "</arg_value><arg_key>note</arg_key><arg_value>null</arg_value>"
                            "<arg_key>days</arg_key><arg_value>3</arg_value><arg_key>metric"
                            "</arg_key><arg_value>true</arg_value><arg_key>unit</arg_key>"
                            "<arg_value>开尔文</arg_value></tool_call>");
  grammar::Matcher newline(*g, nullptr);  // GLM-4.5's spelling is not GLM-4.7's
  EXPECT_FALSE(newline.accept_bytes("<tool_call>get_weather\n").ok());
  auto now = compile_constraint({Constraint::Kind::kToolCall, R"([{"name":"now"}])"}, "glm47");
  ASSERT_TRUE(now.ok()) << now.status().to_string();
  grammar::Matcher n(*now, nullptr);
  ASSERT_TRUE(n.accept_bytes("<tool_call>now</tool_call>").ok());
  EXPECT_TRUE(n.is_complete());
}

TEST(ConstrainReal, ToolCallsNeedATemplateWithAToolFormat) {
  auto g = compile_constraint({Constraint::Kind::kToolCall, tool_choices()}, "llama2");
  EXPECT_EQ(g.status().code(), ErrorCode::kUnsupported);
  g = compile_constraint(
      {Constraint::Kind::kToolCall,
       R"([{"name":"f","parameters":{"type":"object","properties":{"a-b":{}}}}])"},
      "chatglm3");
  EXPECT_EQ(g.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("tool 'f' parameters #/properties/a-b"), std::string::npos)
      << g.status().message();
}

TEST(ConstrainReal, Chatglm3SmallAnswersValidate) {
  const std::string model = kData + "/reference/chatglm3-small.gguf";
  if (access(model.c_str(), R_OK) != 0) GTEST_SKIP() << model << " is absent";
  Options o;
  o.model_path = model;
  o.n_threads = 2;
  o.n_ctx = 512;
  o.max_batch = 4;
  auto e = load_engine(o);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::string> text;
  std::map<std::string, Event> done;
  auto sink = [&](const Event& ev) {
    std::lock_guard<std::mutex> lock(mu);
    if (ev.type == EventType::kToken) text[ev.id] += ev.text;
    if (ev.type == EventType::kDone || ev.type == EventType::kError) done[ev.id] = ev;
    cv.notify_all();
  };
  const std::vector<std::pair<float, uint64_t>> runs = {{0.0f, 1}, {1.0f, 1}, {1.0f, 2}};
  for (size_t i = 0; i < runs.size(); ++i) {
    Request r;
    r.id = "r" + std::to_string(i);
    r.messages = {{"user", "What is the weather in Paris?"}};
    r.params.temperature = runs[i].first;
    r.params.seed = runs[i].second;
    r.params.max_tokens = 200;
    r.constraint = {Constraint::Kind::kJsonSchema, kWeatherSchema};
    ASSERT_TRUE((*e)->submit(r, sink).ok());
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string id = "r" + std::to_string(i);
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(300), [&] { return done.count(id) > 0; }));
    ASSERT_EQ(done[id].type, EventType::kDone) << done[id].error.to_string();
    EXPECT_EQ(done[id].finish_reason, FinishReason::kStop) << text[id];
    check_answer(nlohmann::json::parse(without_lone_surrogates(text[id]), nullptr, false),
                 text[id]);
  }
}

// The fix belongs to grammar/json_rules.cc: "\\u" then a non-surrogate, or a high surrogate
// followed by "\\u" and a low one.
TEST(ConstrainReal, LoneSurrogateEscapesAreRefused) {
  auto g = compile_constraint({Constraint::Kind::kJsonSchema, R"({"type":"string"})"}, "glm4");
  ASSERT_TRUE(g.ok());
  grammar::Matcher m(*g, nullptr);
  EXPECT_TRUE(m.can_accept_bytes(R"("\u00e9\ud83d\ude00")"));
  EXPECT_FALSE(m.can_accept_bytes(R"("\udece")"));
  EXPECT_FALSE(m.can_accept_bytes(R"("\ud83d")"));
  EXPECT_FALSE(m.can_accept_bytes(R"("\ud83dx")"));
}

TEST(ConstrainReal, LoneSurrogateHelper) {
  EXPECT_EQ(without_lone_surrogates(R"("a\udece\ud83d\ude00\\udece\u00e9")"),
            R"("a\ufffd\ud83d\ude00\\udece\u00e9")");
}

}  // namespace
}  // namespace glm::engine
