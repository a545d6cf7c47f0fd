// Property tests over random Unicode text and random id streams: decode(encode(s)) == s;
// streamed pieces are valid UTF-8 and concatenate to decode(ids); ordinary text never yields
// control tokens; the pre-tokenizer pieces cover the text exactly.
#include <gtest/gtest.h>

#include <random>

#include "core/utf8.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/test_fixtures.h"
#include "tokenizer/unicode.h"

namespace glm::tok {
namespace {

using testing::Source;

// Random text mixing scripts, emoji (incl. ZWJ sequences and variation selectors), digits,
// punctuation and whitespace runs.
std::string random_text(std::mt19937& rng, int max_chars) {
  static const uint32_t kPool[][2] = {
      {'a', 'z'},         {'A', 'Z'},       {'0', '9'},         {'!', '/'},
      {0x4E00, 0x9FFF},   {0x3000, 0x303F}, {0xFF01, 0xFF5E},   {0x0400, 0x04FF},
      {0x0600, 0x06FF},   {0x0E00, 0x0E7F}, {0x1780, 0x17FF},   {0x0300, 0x036F},
      {0x1F300, 0x1FAFF}, {0x2600, 0x27BF}, {0x20000, 0x2A6DF}, {0xAC00, 0xD7A3},
  };
  static const char* kSpaces[] = {
      " ",    "  ",   "   ",          "\t",       "\n",           "\n\n",
      "\r\n", " \n ", "\xe3\x80\x80", "\xc2\xa0", "\xe2\x80\x8d", "\xef\xb8\x8f"};
  std::uniform_int_distribution<int> n_dist(0, max_chars);
  std::uniform_int_distribution<int> kind(0, 99);
  std::string s;
  const int n = n_dist(rng);
  for (int i = 0; i < n; ++i) {
    const int k = kind(rng);
    if (k < 15) {
      s += kSpaces[rng() % (sizeof(kSpaces) / sizeof(kSpaces[0]))];
    } else {
      const auto& r = kPool[rng() % (sizeof(kPool) / sizeof(kPool[0]))];
      s += utf8_encode(r[0] + rng() % (r[1] - r[0] + 1));
    }
  }
  return s;
}

class TokenizerProperties : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerProperties, DecodeEncodeRoundTrips) {
  GLM_LOAD_OR_SKIP(tok, GetParam(), Source::kVocabGguf);
  std::mt19937 rng(1234);
  for (int it = 0; it < 400; ++it) {
    const std::string s = random_text(rng, it < 200 ? 12 : 120);
    ASSERT_TRUE(utf8_valid(s));
    const std::vector<int32_t> ids = tok.encode(s);
    for (int32_t id : ids) ASSERT_FALSE(tok.is_control(id)) << "control id " << id << " in " << s;
    ASSERT_EQ(tok.decode(ids), s) << "iteration " << it;
    // Streaming the same ids gives the same text, piece by piece valid.
    StreamDecoder dec(tok);
    std::string streamed;
    for (int32_t id : ids) {
      std::string piece = dec.push(id);
      ASSERT_TRUE(utf8_valid(piece));
      streamed += piece;
    }
    streamed += dec.flush();
    ASSERT_EQ(streamed, s);
  }
}

TEST_P(TokenizerProperties, StreamOfRandomIdsMatchesDecode) {
  GLM_LOAD_OR_SKIP(tok, GetParam(), Source::kVocabGguf);
  std::mt19937 rng(99);
  // Byte tokens (SentencePiece <0xNN>, or single-byte BPE tokens) make partial characters.
  std::vector<int32_t> byte_like;
  for (int id = 0; id < tok.n_vocab(); ++id) {
    if (tok.token_bytes(id).size() == 1) byte_like.push_back(id);
  }
  ASSERT_FALSE(byte_like.empty());
  for (int it = 0; it < 500; ++it) {
    std::vector<int32_t> ids;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      ids.push_back(rng() % 2 ? byte_like[rng() % byte_like.size()]
                              : static_cast<int32_t>(rng() % tok.n_vocab()));
    }
    StreamDecoder dec(tok);
    std::string streamed;
    for (int32_t id : ids) {
      std::string piece = dec.push(id);
      ASSERT_TRUE(utf8_valid(piece));
      streamed += piece;
    }
    std::string tail = dec.flush();
    ASSERT_TRUE(utf8_valid(tail));
    streamed += tail;
    ASSERT_EQ(streamed, tok.decode(ids)) << "iteration " << it;
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, TokenizerProperties,
                         ::testing::Values("chatglm3", "glm4", "stories"));

TEST(StreamDecoder, HoldsPartialCharactersAndNeverTakesBack) {
  GLM_LOAD_OR_SKIP(tok, "chatglm3", Source::kVocabGguf);
  // 👋 = <0xF0><0x9F><0x91><0x8B>: nothing until the fourth byte.
  StreamDecoder dec(tok);
  EXPECT_EQ(dec.push(tok.find("\u2581Hi")), "Hi");  // leading space dropped
  EXPECT_EQ(dec.push(243), "");
  EXPECT_EQ(dec.push(162), "");
  EXPECT_EQ(dec.push(148), "");
  EXPECT_EQ(dec.push(142), "\xf0\x9f\x91\x8b");
  EXPECT_EQ(dec.push(tok.find("\u2581Hi")), " Hi");  // not first: space kept
  EXPECT_EQ(dec.push(tok.eos_id()), "");
  // A truncated character at the end becomes U+FFFD, as decode() renders it.
  EXPECT_EQ(dec.push(243), "");
  EXPECT_EQ(dec.flush(), "\xef\xbf\xbd");
  EXPECT_EQ(tok.decode({tok.find("\u2581Hi"), 243}), "Hi\xef\xbf\xbd");
}

TEST(StreamDecoder, ControlTokensDoNotConsumeTheLeadingSpaceRule) {
  GLM_LOAD_OR_SKIP(tok, "chatglm3", Source::kVocabGguf);
  StreamDecoder dec(tok);
  EXPECT_EQ(dec.push(tok.find("<|assistant|>")), "");
  EXPECT_EQ(dec.push(tok.find("\u2581Hi")), "Hi");
  EXPECT_EQ(dec.push(-5), "");
  EXPECT_EQ(dec.push(1 << 30), "");
}

TEST(StreamDecoder, ContinuationKeepsTheFirstSpace) {
  GLM_LOAD_OR_SKIP(tok, "stories", Source::kVocabGguf);
  const std::vector<int32_t> ids = tok.encode("Once upon a time");
  StreamDecoder dec(tok);
  dec.set_continuation();
  std::string s;
  for (int32_t id : ids) s += dec.push(id);
  EXPECT_EQ(s + dec.flush(), " Once upon a time");
}

TEST(StreamDecoder, StripsTheAnswerNewlineOfChatGlm3) {
  GLM_LOAD_OR_SKIP(tok, "chatglm3", Source::kVocabGguf);
  // What ChatGLM3 generates after <|assistant|> for a plain answer: sp("\n") + sp("你好").
  std::vector<int32_t> ids = tok.encode("\n");
  for (int32_t id : tok.encode("你好 ")) ids.push_back(id);
  EXPECT_EQ(tok.decode(ids), "\n 你好 ");
  StreamDecoder dec(tok);
  dec.set_strip_leading_whitespace(true);
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(dec.push(id));
  pieces.push_back(dec.flush());
  std::string all;
  for (const auto& p : pieces) all += p;
  EXPECT_EQ(all, "你好 ");  // only leading whitespace goes
  EXPECT_EQ(pieces[0], "");
  EXPECT_EQ(pieces[1], "");
}

TEST(Glm4Pretokenizer, PiecesCoverTheTextAndFollowThePattern) {
  auto pieces = [](std::string_view s) {
    std::vector<std::string> out;
    for (size_t p = 0; p < s.size();) {
      size_t e = glm4_piece_end(s, p);
      out.emplace_back(s.substr(p, e - p));
      p = e;
    }
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces("I've been 'told"), (V{"I", "'ve", " been", " '", "told"}));
  EXPECT_EQ(pieces("a  b"), (V{"a", " ", " b"}));
  EXPECT_EQ(pieces("x   \n\n  y  "), (V{"x", "   \n\n", " ", " y", "  "}));
  EXPECT_EQ(pieces("12345 3.3"), (V{"123", "45", " ", "3", ".", "3"}));
  EXPECT_EQ(pieces("你好，世界!!\n\nok"), (V{"你好", "，世界", "!!\n\n", "ok"}));
  // Invalid bytes are "other" characters (like punctuation).
  EXPECT_EQ(pieces("\xff"
                   "ab"),
            (V{std::string("\xff") + "ab"}));
  EXPECT_EQ(pieces("\xff\xfe"
                   "ab"),
            (V{"\xff\xfe", "ab"}));
  std::mt19937 rng(7);
  for (int it = 0; it < 300; ++it) {
    std::string s = random_text(rng, 60);
    if (it % 3 == 0) s[rng() % (s.size() + 1 > 1 ? s.size() : 1)] ^= 0x40;  // break UTF-8
    std::string joined;
    for (const auto& p : pieces(s)) {
      ASSERT_FALSE(p.empty());
      joined += p;
    }
    ASSERT_EQ(joined, s);
  }
}

}  // namespace
}  // namespace glm::tok
