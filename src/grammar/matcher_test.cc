// Matcher and token mask: tokens spanning rule boundaries, UTF-8 split across tokens, stop and
// special tokens, dead states, rollback; the trie-walk mask against a per-token brute force, on
// a synthetic vocabulary and on the real ChatGLM3 / GLM-4 vocabularies (../shared/data).
#include "grammar/matcher.h"

#include <gtest/gtest.h>

#include <random>

#include "grammar/json_schema.h"
#include "grammar/test_util.h"

namespace glm::grammar {
namespace {

using json = nlohmann::ordered_json;

Grammar gbnf(const char* text) {
  auto g = parse_gbnf(text);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return *g;
}

std::shared_ptr<const TokenVocab> make_vocab(std::vector<std::string> toks,
                                             std::vector<int32_t> stop = {},
                                             std::vector<int32_t> special = {}) {
  auto v = TokenVocab::create(std::move(toks), std::move(stop), std::move(special));
  EXPECT_TRUE(v.ok()) << v.status().to_string();
  return *v;
}

// The allowed token texts, in id order.
std::vector<std::string> allowed(Matcher* m, const TokenVocab& v, MaskInfo* info = nullptr) {
  TokenMask mask;
  MaskInfo i = m->fill_mask(&mask);
  if (info) *info = i;
  std::vector<std::string> out;
  for (int32_t id = 0; id < static_cast<int32_t>(v.n_tokens()); ++id) {
    if (mask.allowed(id)) out.push_back(v.is_stop(id) ? "<stop>" : v.token(id));
  }
  EXPECT_EQ(out.size(), i.n_allowed);
  return out;
}

using Texts = std::vector<std::string>;

TEST(GrammarMatcher, TokensSpanRuleBoundaries) {
  Grammar g = gbnf("root ::= key \"=\" val \";\"\nkey ::= [a-z]+\nval ::= [0-9]+\n");
  auto v = make_vocab({"ab", "b=", "=1", "1;", "=", ";", "a", "1", "b=1;", "=a", "a1", ""});
  Matcher m(g, v);
  EXPECT_EQ(allowed(&m, *v), (Texts{"ab", "b=", "a", "b=1;"}));
  ASSERT_TRUE(m.accept_token(0).ok());  // "ab"
  EXPECT_EQ(allowed(&m, *v), (Texts{"ab", "b=", "=1", "=", "a", "b=1;"}));
  ASSERT_TRUE(m.accept_token(8).ok());  // "b=1;" crosses key, "=", val and ";"
  MaskInfo info;
  EXPECT_EQ(allowed(&m, *v, &info), Texts{});
  EXPECT_TRUE(m.is_complete());
  EXPECT_TRUE(info.stop_allowed);        // complete: ending is allowed (this vocabulary has no stop
  EXPECT_FALSE(info.dead());             // token, so the caller ends it)
  EXPECT_FALSE(m.accept_token(9).ok());  // "=a"
  EXPECT_FALSE(m.accept_token(11).ok());  // the empty token never advances
}

TEST(GrammarMatcher, Utf8SplitAcrossTokens) {
  // 中 = E4 B8 AD, 文 = E6 96 87
  Grammar g = gbnf("root ::= \"中文\" [a-z]\n");
  auto v = make_vocab({"\xE4", "\xB8\xAD", "\xE4\xB8", "\xAD\xE6\x96\x87", "中", "文", "中文",
                       "\x80", "\xAD", "\xE6", "\x96\x87x", "x", "\xE4\xB8\xAE"});
  Matcher m(g, v);
  EXPECT_EQ(allowed(&m, *v), (Texts{"\xE4", "\xE4\xB8", "中", "中文"}));
  ASSERT_TRUE(m.accept_token(2).ok());  // E4 B8: mid-character
  EXPECT_FALSE(m.is_complete());
  EXPECT_EQ(allowed(&m, *v), (Texts{"\xAD\xE6\x96\x87", "\xAD"}));
  ASSERT_TRUE(m.accept_token(8).ok());  // AD completes 中
  EXPECT_EQ(allowed(&m, *v), (Texts{"文", "\xE6"}));
  ASSERT_TRUE(m.accept_token(9).ok());
  EXPECT_EQ(allowed(&m, *v), (Texts{"\x96\x87x"}));  // completes 文, then [a-z]
  m.rollback(1);
  ASSERT_TRUE(m.accept_token(5).ok());
  EXPECT_EQ(allowed(&m, *v), (Texts{"x"}));
}

TEST(GrammarMatcher, InvalidUtf8IsNeverAllowed) {
  Grammar any = gbnf("root ::= .*\n");
  Matcher m(any, nullptr);
  EXPECT_FALSE(m.can_accept_bytes("\x80"));      // continuation without a lead
  EXPECT_FALSE(m.can_accept_bytes("\xC0\xAF"));  // overlong
  EXPECT_FALSE(m.can_accept_bytes("\xE0\x80"));  // overlong 3-byte prefix
  EXPECT_FALSE(m.can_accept_bytes("\xED\xA0"));  // can only be a surrogate
  EXPECT_FALSE(m.can_accept_bytes("\xF4\x90"));  // beyond U+10FFFF
  EXPECT_FALSE(m.can_accept_bytes("\xF8"));
  EXPECT_FALSE(m.can_accept_bytes("\xE4\x41"));         // lead then ASCII
  EXPECT_TRUE(m.can_accept_bytes("\xED\x9F\xBF"));      // U+D7FF
  EXPECT_TRUE(m.can_accept_bytes("\xF0\x9F\x98\x80"));  // U+1F600
  ASSERT_TRUE(m.accept_bytes("\xF0\x9F").ok());
  EXPECT_FALSE(m.is_complete());  // inside a character: not complete even though .* is
  ASSERT_TRUE(m.accept_bytes("\x98\x80").ok());
  EXPECT_TRUE(m.is_complete());
}

TEST(GrammarMatcher, ClassesPruneMultiByteSubtrees) {
  // ASCII-only grammar: no token with a non-ASCII byte survives; a class of CJK only
  // admits lead bytes that can start one.
  Grammar g = gbnf("root ::= [一-龥]+\n");
  Matcher m(g, nullptr);
  EXPECT_TRUE(m.can_accept_bytes("\xE4"));
  EXPECT_TRUE(m.can_accept_bytes("\xE9\xBE"));   // U+9F80.. contains 龥 (U+9FA5)
  EXPECT_FALSE(m.can_accept_bytes("\xE9\xBF"));  // U+9FC0..: beyond
  EXPECT_FALSE(m.can_accept_bytes("\xE3"));      // U+3000..U+3FFF: below 一 (U+4E00)
  EXPECT_FALSE(m.can_accept_bytes("\xC3"));
}

TEST(GrammarMatcher, StopAndSpecialTokens) {
  Grammar g = gbnf("root ::= \"a\"+\n");
  // id 2 "a" is special (e.g. a control token whose text happens to match): never allowed.
  auto v = make_vocab({"a", "</s>", "a", "aa"}, {1}, {2});
  Matcher m(g, v);
  MaskInfo info;
  EXPECT_EQ(allowed(&m, *v, &info), (Texts{"a", "aa"}));
  EXPECT_FALSE(info.stop_allowed);
  EXPECT_FALSE(m.accept_token(1).ok());  // stop before complete
  EXPECT_FALSE(m.accept_token(2).ok());  // special
  ASSERT_TRUE(m.accept_token(3).ok());
  EXPECT_EQ(allowed(&m, *v, &info), (Texts{"a", "<stop>", "aa"}));
  EXPECT_TRUE(info.stop_allowed);
  ASSERT_TRUE(m.accept_token(1).ok());
  EXPECT_TRUE(m.is_terminated());
  EXPECT_EQ(allowed(&m, *v, &info), Texts{});
  EXPECT_FALSE(m.accept_token(0).ok());
  m.rollback(1);
  EXPECT_FALSE(m.is_terminated());
  EXPECT_TRUE(m.accept_token(0).ok());
  EXPECT_EQ(m.n_accepted(), 2u);
  m.reset();
  EXPECT_EQ(m.n_accepted(), 0u);
  EXPECT_FALSE(m.is_complete());
}

TEST(GrammarMatcher, DeadStateIsReported) {
  // The grammar needs 'z' but no token can produce it: the caller must end with an error.
  Grammar g = gbnf("root ::= \"a\" \"z\"\n");
  auto v = make_vocab({"a", "b", "</s>"}, {2});
  Matcher m(g, v);
  ASSERT_TRUE(m.accept_token(0).ok());
  MaskInfo info;
  EXPECT_EQ(allowed(&m, *v, &info), Texts{});
  EXPECT_TRUE(info.dead());
  EXPECT_TRUE(m.can_continue());  // the grammar could go on, the vocabulary cannot
}

TEST(GrammarMatcher, TablesRebuiltPastMaxStates) {
  // Deep nesting keeps creating new stacks; with a tiny state budget the matcher rebuilds its
  // tables and must behave exactly like one with no budget.
  Grammar g = json_object_grammar();
  std::vector<std::string> toks = {"{", "}", "[", "]", "\"a\"", ":", ",", "1", " ", "\"", "x"};
  auto v = make_vocab(toks);
  MatcherOptions small;
  small.max_states = 40;
  small.max_rollback = 8;
  Matcher a(g, v, small), b(g, v);
  std::string text = "{\"a\":[[[[{\"a\":[1,[[[1]]],{\"a\":{\"a\":[[[]]]}}]}]]]]}";
  std::vector<int32_t> path;
  for (size_t i = 0; i < text.size();) {
    int32_t best = -1;
    for (int32_t id = 0; id < static_cast<int32_t>(toks.size()); ++id) {
      if (text.compare(i, toks[static_cast<size_t>(id)].size(), toks[static_cast<size_t>(id)]) ==
              0 &&
          (best < 0 ||
           toks[static_cast<size_t>(id)].size() > toks[static_cast<size_t>(best)].size())) {
        best = id;
      }
    }
    ASSERT_GE(best, 0);
    path.push_back(best);
    i += toks[static_cast<size_t>(best)].size();
  }
  size_t max_seen = 0;
  bool rolled_back = false;
  for (size_t k = 0; k < path.size(); ++k) {
    EXPECT_EQ(allowed(&a, *v), allowed(&b, *v)) << "step " << k;
    ASSERT_TRUE(a.accept_token(path[k]).ok()) << k;
    ASSERT_TRUE(b.accept_token(path[k]).ok()) << k;
    max_seen = std::max(max_seen, a.n_states());
    if (k == 20 && !rolled_back) {  // roll back across a rebuild, then redo
      rolled_back = true;
      a.rollback(5);
      b.rollback(5);
      EXPECT_EQ(allowed(&a, *v), allowed(&b, *v));
      k -= 5;
    }
  }
  EXPECT_TRUE(a.is_complete());
  EXPECT_GT(b.n_states(), 40u);  // the unbounded one grew past the budget...
  EXPECT_LT(max_seen, 200u);     // ...the bounded one was rebuilt
  EXPECT_EQ(a.n_accepted(), path.size());
}

TEST(GrammarMatcher, VocabErrors) {
  EXPECT_EQ(TokenVocab::create({"a"}, {3}, {}).status().message(),
            "stop token id 3 out of range (1 tokens)");
  EXPECT_EQ(TokenVocab::create({"a"}, {}, {-1}).status().message(),
            "special token id -1 out of range (1 tokens)");
}

// The mask must equal "this token's bytes can be accepted now", token by token.
void expect_mask_matches_brute_force(Matcher* m, const TokenVocab& v, const std::string& where) {
  TokenMask mask;
  MaskInfo info = m->fill_mask(&mask);
  size_t n = 0;
  for (int32_t id = 0; id < static_cast<int32_t>(v.n_tokens()); ++id) {
    bool want;
    if (v.is_stop(id)) {
      want = info.stop_allowed;
    } else if (v.is_special(id) || v.token(id).empty()) {
      want = false;
    } else {
      want = m->can_accept_bytes(v.token(id));
    }
    n += want;
    if (mask.allowed(id) != want) {
      ADD_FAILURE() << where << ": token " << id << " mask " << mask.allowed(id);
      return;
    }
  }
  EXPECT_EQ(n, info.n_allowed) << where;
}

constexpr const char* kTenProperties = R"({
  "type": "object",
  "properties": {
    "location": {"type": "string"},
    "unit": {"enum": ["celsius", "fahrenheit"]},
    "days": {"type": "integer"},
    "detailed": {"type": "boolean"},
    "lat": {"type": "number"},
    "lon": {"type": "number"},
    "when": {"type": "string", "format": "date-time"},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
    "note": {"type": ["string", "null"]},
    "source": {"type": "object", "properties": {"name": {"type": "string"},
               "url": {"type": "string"}}, "required": ["name", "url"],
               "additionalProperties": false}
  },
  "required": ["location", "unit", "days", "detailed", "lat", "lon", "when", "tags", "note",
               "source"],
  "additionalProperties": false
})";

// A walk through a real vocabulary: at each step the mask is checked against the brute force
// (every `check_every` steps), a random allowed token is taken, and at the end the text must
// parse as JSON with the schema's keys.
void walk_real_vocab(const std::string& file, const std::string& kind) {
  std::string path = testing::shared_data(file.c_str());
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    std::fclose(f);
  } else {
    GTEST_SKIP() << path << " absent (../shared/data not mounted)";
  }
  auto loaded = testing::load_vocab(path, kind);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  const TokenVocab& v = *loaded->vocab;
  ASSERT_FALSE(loaded->stop_ids.empty());
  json schema = json::parse(kTenProperties);
  auto g = json_schema_to_grammar(schema);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  std::mt19937 rng(kind == "glm4" ? 4 : 3);
  int n_finished = 0;
  for (int walk = 0; walk < 3; ++walk) {
    Matcher m(*g, loaded->vocab);
    std::string text;
    TokenMask mask;
    for (int step = 0; step < 400 && !m.is_terminated(); ++step) {
      if (step % 25 == 0) expect_mask_matches_brute_force(&m, v, kind + " after " + text);
      MaskInfo info = m.fill_mask(&mask);
      ASSERT_FALSE(info.dead()) << text;
      // Prefer short tokens late in the walk so strings end; stop when allowed.
      if (info.stop_allowed) {
        ASSERT_TRUE(m.accept_token(loaded->stop_ids[0]).ok());
        break;
      }
      std::vector<int32_t> ids;
      for (int32_t id = 0; id < static_cast<int32_t>(v.n_tokens()); ++id) {
        if (mask.allowed(id) && (step < 200 || v.token(id).size() <= 2)) ids.push_back(id);
      }
      if (ids.empty()) {
        for (int32_t id = 0; id < static_cast<int32_t>(v.n_tokens()); ++id) {
          if (mask.allowed(id)) ids.push_back(id);
        }
      }
      // Favour tokens that close something, so the walk finishes within the step budget.
      int32_t id = ids[rng() % ids.size()];
      for (int32_t c : ids) {
        if (v.token(c).find_first_of("\"]}") != std::string::npos && rng() % 3 == 0) id = c;
      }
      ASSERT_TRUE(m.accept_token(id).ok());
      text += v.token(id);
    }
    if (!m.is_terminated()) continue;  // ran out of steps inside a long string: no verdict
    ++n_finished;
    if (std::getenv("GLM_GRAMMAR_PRINT")) std::printf("%s\n", text.c_str());
    json parsed;
    try {
      parsed = json::parse(text);
    } catch (const std::exception& e) {
      FAIL() << "not JSON (" << e.what() << "): " << text;
    }
    ASSERT_TRUE(parsed.is_object()) << text;
    std::vector<std::string> keys;
    for (const auto& [k, x] : parsed.items()) keys.push_back(k);
    EXPECT_EQ(keys, (std::vector<std::string>{"location", "unit", "days", "detailed", "lat", "lon",
                                              "when", "tags", "note", "source"}))
        << text;
    EXPECT_TRUE(parsed["unit"] == "celsius" || parsed["unit"] == "fahrenheit") << text;
    EXPECT_TRUE(parsed["days"].is_number_integer()) << text;
    EXPECT_LE(parsed["tags"].size(), 5u) << text;
  }
  EXPECT_GE(n_finished, 2) << "the walks should mostly finish within their step budget";
}

TEST(GrammarMatcher, RealVocabGlm4) { walk_real_vocab("vocab/glm4-vocab.gguf", "glm4"); }
TEST(GrammarMatcher, RealVocabChatglm3) {
  walk_real_vocab("vocab/chatglm3-vocab.gguf", "chatglm3");
}

TEST(GrammarMatcher, SyntheticVocabBruteForce) {
  std::vector<std::string> toks;
  for (int b = 0; b < 256; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"{\"", "\":", "\": \"", "celsius", "\"celsius\"", "true,", "1.5", "中",
                        "\xE4\xB8", "\xAD\"", "2024-06-01T", "12:00:00Z\"", "[\"a\"]", "null",
                        "}\n", "\n    ", "\"location\": \""}) {
    toks.push_back(t);
  }
  toks.push_back("<eos>");
  int32_t eos = static_cast<int32_t>(toks.size() - 1);
  auto v = make_vocab(toks, {eos});
  auto g = json_schema_to_grammar(json::parse(kTenProperties));
  ASSERT_TRUE(g.ok());
  std::mt19937 rng(11);
  Matcher m(*g, v);
  TokenMask mask;
  for (int step = 0; step < 300 && !m.is_terminated(); ++step) {
    expect_mask_matches_brute_force(&m, *v, "step " + std::to_string(step));
    MaskInfo info = m.fill_mask(&mask);
    ASSERT_FALSE(info.dead());
    std::vector<int32_t> ids;
    for (int32_t id = 0; id < static_cast<int32_t>(v->n_tokens()); ++id) {
      if (mask.allowed(id)) ids.push_back(id);
    }
    ASSERT_TRUE(m.accept_token(ids[rng() % ids.size()]).ok());
  }
}

}  // namespace
}  // namespace glm::grammar
