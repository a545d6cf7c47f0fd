// The SentencePiece unigram tokenizer and ChatGLM-6B's text rules (ugm_tokenizer.cc):
//  - hand-written vocabularies whose ids follow from the rules by hand, one in the id layout of
//    the real ice_text.model (130344 pieces: [gMASK] 130001, <sop> 130004, <|tab|> 130008, the
//    bytes from 130088; the ids chatglm.cpp's tests publish for THUDM/chatglm-6b);
//  - models trained here by libsentencepiece (unigram, identity and nmt_nfkc normalization,
//    then given the v1 pieces as the real file has them) against the library's own Encode on
//    random text, the v1 rules applied first, as HF's SPTokenizer does.
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstring>
#include <random>

#include "gguf/gguf.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/sp_test_models.h"
#include "tokenizer/test_util.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab_convert.h"
#include "tokenizer/vocab_tokenizer.h"

namespace glm::tok {
namespace {

using testing::append_v1_pieces;
using testing::Piece;
using testing::piece_message;
using testing::put_bytes;
using testing::put_varint;
using testing::small_v1_pieces;
using testing::unigram_proto;

std::unique_ptr<Tokenizer> load_proto(const std::string& proto, VocabSpec* spec_out = nullptr) {
  auto spec = parse_tokenizer_model(proto, "test.model");
  EXPECT_TRUE(spec.ok()) << spec.status().to_string();
  if (!spec.ok()) return nullptr;
  if (spec_out != nullptr) *spec_out = *spec;
  auto tok = Tokenizer::from_spec(*spec, "test.model");
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

// ---- hand-derived ids -----------------------------------------------------------------------

TEST(Chatglm1Tokenizer, HandDerivedIds) {
  VocabSpec spec;
  auto tok = load_proto(unigram_proto(small_v1_pieces()), &spec);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(spec.model, "t5");
  EXPECT_EQ(spec.pre, "chatglm1");
  EXPECT_TRUE(spec.remove_extra_whitespaces);
  const int32_t mask = 11, gmask = 12, sop = 15, eop = 16, tab = 19;
  auto blank = [](int n) { return 20 + (n - 2); };  // <|blank_2|> = 20
  auto byte = [](int b) { return 20 + 79 + b; };    // <0x00> = 99
  EXPECT_EQ(tok->find("[MASK]"), mask);
  EXPECT_EQ(tok->find("[gMASK]"), gmask);
  EXPECT_EQ(tok->find("<sop>"), sop);
  EXPECT_EQ(spec.eos, eop);
  EXPECT_EQ(spec.bos, sop);
  EXPECT_EQ(spec.pad, 3);
  using V = std::vector<int32_t>;
  // "▁ab": ▁ + ab = -4 beats ▁a + b = -4.5.
  EXPECT_EQ(tok->encode("ab"), (V{5, 8}));
  // Newline, tab and blanks become their pieces; no dummy prefix after <n>.
  EXPECT_EQ(tok->encode("a\nb"), (V{9, 4, 7}));
  EXPECT_EQ(tok->encode("a\tb"), (V{9, tab, 7}));
  EXPECT_EQ(tok->encode("a    b"), (V{9, blank(4), 7}));
  EXPECT_EQ(tok->encode("a  b"), (V{9, blank(2), 7}));
  // A single space stays a space; runs over 80 go 80 at a time from the left.
  EXPECT_EQ(tok->encode("a b"), (V{9, 5, 7}));
  EXPECT_EQ(tok->encode("a" + std::string(83, ' ') + "b"), (V{9, blank(80), blank(3), 7}));
  EXPECT_EQ(tok->encode("a" + std::string(81, ' ') + "b"), (V{9, blank(80), 5, 7}));
  EXPECT_EQ(tok->encode("a" + std::string(160, ' ') + "c"), (V{9, blank(80), blank(80), 10}));
  // Leading blanks keep the dummy prefix before them; a single leading or trailing space is
  // removed by the normalizer (remove_extra_whitespaces), as sentencepiece does.
  EXPECT_EQ(tok->encode("  a"), (V{5, blank(2), 6}));
  EXPECT_EQ(tok->encode(" a "), (V{9}));
  EXPECT_EQ(tok->encode("\n"), (V{5, 4}));
  // Unknown characters fall back to bytes: é = C3 A9.
  EXPECT_EQ(tok->encode("\xc3\xa9"), (V{5, byte(0xc3), byte(0xa9)}));
  // The text of a control token is plain text unless specials are allowed.
  EXPECT_EQ(tok->encode("[gMASK]", true), (V{gmask}));
  // Decoding reverses the rules.
  for (const std::string& s :
       std::vector<std::string>{"ab", "a\nb", "a\tb", "a    b", "a b", "  a", "\xc3\xa9",
                                "a" + std::string(83, ' ') + "b", "a\n\n\tab c"}) {
    EXPECT_EQ(tok->decode(tok->encode(s)), s) << s;
  }
  // The stream decoder gives the same text piece by piece.
  const V ids = tok->encode("a\n  b\tc");
  StreamDecoder sd(*tok);
  std::string streamed;
  for (int32_t id : ids) streamed += sd.push(id);
  streamed += sd.flush();
  EXPECT_EQ(streamed, "a\n  b\tc");
  // A whitespace token first (an answer starting with it) is whitespace too, not its piece.
  const int32_t newline = tok->find("<n>"), blank2 = tok->find("<|blank_2|>");
  const int32_t tab_id = tok->find("<|tab|>");
  EXPECT_EQ(tok->decode({blank2, 6}), "  a");
  EXPECT_EQ(tok->decode({newline, 6}), "\na");
  EXPECT_EQ(tok->token_bytes_at_start(tab_id), "\t");
  StreamDecoder first(*tok);
  EXPECT_EQ(first.push(blank2) + first.push(6) + first.flush(), "  a");
  EXPECT_EQ(tok->decode({gmask, sop}), "");
  EXPECT_EQ(tok->decode({gmask, sop}, true), "[gMASK]<sop>");
}

TEST(Chatglm1Tokenizer, RealFileLayout) {
  // 130344 pieces in the order of THUDM/chatglm-6b's ice_text.model: 0 <unk> 1 <s> 2 </s>
  // 3 <pad> 4 <n> 5 ▁, text pieces up to 130000, then the specials, whitespace and bytes.
  std::vector<Piece> p = {{"<unk>", 0, kTokenUnknown},
                          {"<s>", 0, kTokenControl},
                          {"</s>", 0, kTokenControl},
                          {"<pad>", 0, kTokenControl},
                          {"<n>", 0, kTokenUserDefined},
                          {"\xe2\x96\x81", -2.0f, kTokenNormal},
                          {"def", -5.0f, kTokenNormal},
                          {"print", -5.0f, kTokenNormal},
                          {"\xe4\xbd\xa0\xe5\xa5\xbd", -5.0f, kTokenNormal}};  // 你好
  while (p.size() < 130000) {
    p.push_back({"\xe2\x9f\xa6" + std::to_string(p.size()), -20.0f, kTokenNormal});
  }
  append_v1_pieces(&p);
  ASSERT_EQ(p.size(), 130344u);
  VocabSpec spec;
  auto tok = load_proto(unigram_proto(p), &spec);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->n_vocab(), 130528);  // config.json vocab_size: the embedding's rows
  EXPECT_EQ(tok->find("[MASK]"), 130000);
  EXPECT_EQ(tok->find("[gMASK]"), 130001);
  EXPECT_EQ(tok->find("<sop>"), 130004);
  EXPECT_EQ(tok->find("<eop>"), 130005);
  EXPECT_EQ(tok->eos_id(), 130005);
  EXPECT_EQ(tok->find("<|tab|>"), 130008);
  EXPECT_EQ(tok->find("<|blank_4|>"), 130011);
  EXPECT_TRUE(tok->is_control(130527));  // padding
  using V = std::vector<int32_t>;
  // chatglm.cpp's published ids: "你好" -> 5 74874 here 5 8; 👋 -> its bytes 130328 130247
  // 130233 130227; "<n>" 4, "<|blank_4|>" 130011, "<|tab|>" 130008.
  EXPECT_EQ(tok->encode("\xe4\xbd\xa0\xe5\xa5\xbd"), (V{5, 8}));
  EXPECT_EQ(tok->encode("\xf0\x9f\x91\x8b"), (V{5, 130328, 130247, 130233, 130227}));
  EXPECT_EQ(tok->encode("def\n    print\t"), (V{5, 6, 4, 130011, 7, 130008}));
  EXPECT_EQ(tok->decode({5, 6, 4, 130011, 7, 130008}), "def\n    print\t");

  // The GGUF keys round-trip.
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::string("chatglm1"));
  write_vocab(spec, &w);
  const std::string path = testing::temp_path("ugm-real-layout.gguf");
  ASSERT_TRUE(w.begin(path).ok());
  ASSERT_TRUE(w.finish().ok());
  auto file = gguf::File::open(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto from_file = Tokenizer::from_gguf(**file);
  ASSERT_TRUE(from_file.ok()) << from_file.status().to_string();
  EXPECT_STREQ((*from_file)->kind(), "t5");
  EXPECT_EQ((*from_file)->encode("def\n    print\t"), (V{5, 6, 4, 130011, 7, 130008}));
  std::remove(path.c_str());
}

// HF chat(): a first turn is the bare query; then "[Round i]\n问：q\n答：a\n" per past round and
// "[Round n]\n问：q\n答：", then [gMASK] <sop>.
TEST(Chatglm1Template, RoundFormatAndSuffix) {
  VocabSpec spec;
  auto tok = load_proto(unigram_proto(small_v1_pieces()), &spec);
  ASSERT_NE(tok, nullptr);
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::string("chatglm1"));
  write_vocab(spec, &w);
  const std::string path = testing::temp_path("v1-template.gguf");
  ASSERT_TRUE(w.begin(path).ok());
  ASSERT_TRUE(w.finish().ok());
  auto file = gguf::File::open(path);
  ASSERT_TRUE(file.ok());
  auto tmpl = ChatTemplate::for_model(**file, *tok);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().to_string();
  EXPECT_STREQ((*tmpl)->name(), "chatglm1");
  EXPECT_EQ((*tmpl)->stop_ids(), (std::vector<int32_t>{16}));  // <eop>
  EXPECT_TRUE((*tmpl)->strips_answer_whitespace());
  const int32_t gmask = 12, sop = 15;
  auto with_suffix = [&](const std::string& text) {
    std::vector<int32_t> ids = tok->encode(text);
    ids.push_back(gmask);
    ids.push_back(sop);
    return ids;
  };
  auto one = (*tmpl)->render({{"system", "ignored"}, {"user", "ab c"}});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, with_suffix("ab c"));
  EXPECT_EQ(*one, (std::vector<int32_t>{5, 8, 5, 10, gmask, sop}));
  auto two = (*tmpl)->render({{"user", "ab"}, {"assistant", "c"}, {"user", "b\na"}});
  ASSERT_TRUE(two.ok());
  const std::string text = "[Round 0]\n问：ab\n答：c\n[Round 1]\n问：b\na\n答：";
  EXPECT_EQ(*two, with_suffix(text));
  EXPECT_EQ(tok->decode(*two, true), text + "[gMASK]<sop>");
  // Two questions in a row: the first is a round with no answer.
  auto gap = (*tmpl)->render({{"user", "a"}, {"user", "b"}});
  ASSERT_TRUE(gap.ok());
  EXPECT_EQ(tok->decode(*gap, true), "[Round 0]\n问：a\n答：\n[Round 1]\n问：b\n答：[gMASK]<sop>");
  EXPECT_FALSE((*tmpl)->render({{"observation", "x"}}).ok());
  std::remove(path.c_str());
}

// ---- against libsentencepiece ---------------------------------------------------------------

class Sentences : public sentencepiece::SentenceIterator {
 public:
  explicit Sentences(std::vector<std::string> s) : s_(std::move(s)) {}
  bool done() const override { return i_ >= s_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return s_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  std::vector<std::string> s_;
  size_t i_ = 0;
};

const char* kWords[] = {
    "hello",      "world",      "ChatGLM-6B", "的",        "我们",         "模型",
    "推理",       "速度",       "你好",       "，",        "。",           "！",
    "？",         "：",         "token",      "tokenizer", "model",        "print",
    "def",        "return",     "main",       "2024年",    "3.14159",      "naïve",
    "Ünïcödé",    "Привет",     "ｆｕｌｌ",   "ﬁ",         "\xe3\x80\x80", "①",
    "(x)",        "[gMASK]",    "<sop>",      "<n>",       "<|tab|>",      "\xf0\x9f\x91\x8b",
    "晚上睡不着", "应该怎么办", "人工智能",   "助手",      "欢迎",         "问题"};

std::string random_text(std::mt19937& rng, bool with_space_runs) {
  std::string s;
  const int n = static_cast<int>(rng() % 24);
  for (int i = 0; i < n; ++i) {
    const unsigned r = rng() % 12;
    if (r == 0) {
      s += with_space_runs ? std::string(1 + rng() % 90, ' ') : " ";
    } else if (r == 1) {
      s += with_space_runs ? (rng() % 2 ? "\n" : "\t") : " ";
    } else if (r == 2) {
      // Any CJK ideograph: most are unknown to the model (not in its training text).
      if (with_space_runs) s += utf8_encode(0x4E00 + rng() % 0x5200);
    } else {
      // The training text leaves out the v1 piece names (a trained piece "<sop>" would clash
      // with the control token appended later).
      const char* w = kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
      if (!with_space_runs && (w[0] == '<' || w[0] == '[')) continue;
      if (rng() % 2) s += " ";
      s += w;
    }
  }
  return s;
}

// Trains a small unigram model, then gives it ChatGLM-6B's pieces as the real file has them.
std::string train_v1_like(const std::string& normalization) {
  std::mt19937 rng(7);
  std::vector<std::string> corpus;
  for (int i = 0; i < 3000; ++i) corpus.push_back(random_text(rng, false));
  Sentences it(corpus);
  std::string proto;
  const auto st = sentencepiece::SentencePieceTrainer::Train(
      "--model_type=unigram --vocab_size=600 --hard_vocab_limit=false --pad_id=3 "
      "--user_defined_symbols=<n> --character_coverage=1 --minloglevel=2 "
      "--normalization_rule_name=" +
          normalization,
      &it, &proto);
  EXPECT_TRUE(st.ok()) << st.ToString();
  // Append the v1 pieces (a ModelProto's repeated field continues where it appears again) and
  // turn byte_fallback on (a later scalar field wins).
  std::vector<Piece> extra;
  append_v1_pieces(&extra);
  for (const Piece& p : extra) put_bytes(&proto, 1, piece_message(p));
  std::string trainer;
  put_varint(&trainer, (35 << 3) | 0);
  put_varint(&trainer, 1);
  put_bytes(&proto, 2, trainer);
  return proto;
}

void expect_same_as_library(const std::string& normalization) {
  const std::string proto = train_v1_like(normalization);
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.LoadFromSerializedProto(proto).ok());
  VocabSpec spec;
  auto tok = load_proto(proto, &spec);
  ASSERT_NE(tok, nullptr);
  ASSERT_EQ(spec.pre, "chatglm1");
  EXPECT_EQ(spec.precompiled_charsmap.empty(), normalization == "identity");
  std::mt19937 rng(2026);
  int n_ids = 0, n_bytes = 0, n_blanks = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string s = random_text(rng, true);
    std::vector<int> ref;
    ASSERT_TRUE(sp.Encode(chatglm1_preprocess(s), &ref).ok());
    const std::vector<int32_t> ours = tok->encode(s);
    ASSERT_EQ(ours, std::vector<int32_t>(ref.begin(), ref.end())) << "text: " << s;
    // Decoding: the library's text with HF's postprocess (<n>, <|tab|>, <|blank_N|> back).
    std::string lib;
    ASSERT_TRUE(sp.Decode(ref, &lib).ok());
    std::string post;
    for (size_t k = 0; k < lib.size();) {
      if (lib.compare(k, 3, "<n>") == 0) {
        post += '\n';
        k += 3;
      } else if (lib.compare(k, 7, "<|tab|>") == 0) {
        post += '\t';
        k += 7;
      } else if (lib.compare(k, 8, "<|blank_") == 0) {
        const size_t end = lib.find("|>", k);
        post += std::string(std::stoi(lib.substr(k + 8, end - k - 8)), ' ');
        k = end + 2;
      } else {
        post += lib[k++];
      }
    }
    EXPECT_EQ(tok->decode(ours), post) << "text: " << s;
    n_ids += static_cast<int>(ours.size());
    for (int32_t id : ours) {
      n_bytes += spec.types[id] == kTokenByte;
      n_blanks += spec.tokens[id].compare(0, 8, "<|blank_") == 0;
    }
  }
  // The draw exercised every rule.
  EXPECT_GT(n_ids, 30000);
  EXPECT_GT(n_bytes, 1000);
  EXPECT_GT(n_blanks, 1000);
}

TEST(Chatglm1Tokenizer, SameIdsAsLibSentencePieceIdentity) { expect_same_as_library("identity"); }

TEST(Chatglm1Tokenizer, SameIdsAsLibSentencePieceNfkc) { expect_same_as_library("nmt_nfkc"); }

}  // namespace
}  // namespace glm::tok
