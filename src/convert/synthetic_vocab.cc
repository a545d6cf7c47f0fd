#include "convert/synthetic_vocab.h"

#include <cstdio>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "tokenizer/vocab_convert.h"

namespace glm::convert {

namespace {

constexpr int64_t kMinVocab = 300;
constexpr const char* kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's space marker

// Templates written for glmserve in the families' prompt formats (see docs/model-files.md).
const char kChatGlm3Template[] =
    "{% for message in messages %}{% if loop.first %}[gMASK]sop{% endif %}"
    "<|{{ message['role'] }}|>\n {{ message['content'] }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}";
const char kChatGlm2Template[] =
    "{% set ns = namespace(round=1) %}[gMASK]sop{% for message in messages %}"
    "{% if message['role'] == 'user' %}[Round {{ ns.round }}]\n\n\xe9\x97\xae\xef\xbc\x9a"
    "{{ message['content'] }}\n\n\xe7\xad\x94\xef\xbc\x9a{% set ns.round = ns.round + 1 %}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] }}\n\n{% endif %}"
    "{% endfor %}";
const char kGlm4Template[] =
    "[gMASK]<sop>{% for message in messages %}<|{{ message['role'] }}|>\n"
    "{{ message['content'] }}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}";

// GLM-4-0414: no <sop>, and "<|role|>\n" before each content (the model's own template adds
// tools, reasoning and observations; tokenizer/chat_template.cc renders those).
const char kGlm4_0414Template[] =
    "[gMASK]{% for message in messages %}<|{{ message['role'] }}|>\n"
    "{{ message['content'] }}{% endfor %}{% if add_generation_prompt %}<|assistant|>\n"
    "{% endif %}";

// Pronounceable syllables (onset, vowel, optional coda), so that a random-weight model's answers
// read as made-up words ("▁trosan belmi ...") rather than letter noise: the demo model of
// scripts/serve.sh has only this vocabulary when no real tokenizer is at hand.
std::vector<std::string> syllables(bool with_coda) {
  static const char* const kOnsets[] = {"b",  "c",  "d",  "f",  "g",  "h",  "j",  "k",  "l",  "m",
                                        "n",  "p",  "r",  "s",  "t",  "v",  "w",  "y",  "z",  "ch",
                                        "sh", "th", "tr", "pl", "br", "st", "gr", "cl", "fl", "qu"};
  static const char* const kVowels[] = {"a", "e", "i", "o", "u", "ai", "ea", "oo", "ou"};
  static const char* const kCodas[] = {"", "n", "r", "s", "t", "l", "m", "nd", "ng", "st"};
  std::vector<std::string> out;
  for (const char* o : kOnsets) {
    for (const char* v : kVowels) {
      if (!with_coda) {
        out.push_back(std::string(o) + v);
        continue;
      }
      for (const char* c : kCodas) out.push_back(std::string(o) + v + c);
    }
  }
  return out;
}

// Pieces in priority order: the space marker, printable ASCII, "▁" + letter, letter pairs,
// "▁" + pair, then made-up words: syllables and "▁" + syllable, then two-syllable word starts
// ("▁" + word; so that most pieces open a word and answers have spaces). Stops at `limit`.
// Skips `reserved` (the special tokens: a token text must be unique).
std::vector<std::string> make_pieces(int64_t limit, const std::vector<const char*>& reserved) {
  std::vector<std::string> out;
  std::set<std::string> seen(reserved.begin(), reserved.end());
  auto add = [&](const std::string& p) {
    if (static_cast<int64_t>(out.size()) < limit && seen.insert(p).second) out.push_back(p);
  };
  add(kSpace);
  for (char c = 'a'; c <= 'z'; ++c) add(std::string(1, c));
  for (char c = 'a'; c <= 'z'; ++c) add(std::string(kSpace) + c);
  for (int c = 0x21; c <= 0x7e; ++c) add(std::string(1, static_cast<char>(c)));
  for (char c = 'a'; c <= 'z'; ++c) {
    for (char d = 'a'; d <= 'z'; ++d) add(std::string{c, d});
  }
  for (char c = 'a'; c <= 'z'; ++c) {
    for (char d = 'a'; d <= 'z'; ++d) add(std::string(kSpace) + c + d);
  }
  const std::vector<std::string> closed = syllables(true);
  for (const std::string& s : closed) {
    add(std::string(kSpace) + s);
    add(s);
  }
  // Every (open, closed) pair once, the first syllable cycling fastest and the second taken
  // with a stride coprime to their count, so that a vocabulary cut anywhere has every sound.
  const std::vector<std::string> open = syllables(false);
  const size_t n_pairs = open.size() * closed.size();
  for (size_t k = 0; k < n_pairs && static_cast<int64_t>(out.size()) < limit; ++k) {
    const std::string word = open[k % open.size()] + closed[(k / open.size() * 37) % closed.size()];
    add(std::string(kSpace) + word);  // word starts only: most pieces open a word
  }
  return out;
}

}  // namespace

namespace {

// ChatGLM-6B: a unigram ("t5") vocabulary in the id layout of its ice_text.model: 0 <unk>
// 1 <s> 2 </s> 3 <pad> 4 <n>, then "▁" and the pieces (log-probability-like scores), then
// [MASK] [gMASK] [sMASK] <unused_0> <sop> <eop> <ENC> <dBLOCK>, <|tab|>, <|blank_2..80|>, the 256
// byte tokens (at 130000 in a full-size vocabulary, as in the real file), then [PADn].
tok::VocabSpec chatglm1_vocab(int64_t n_vocab) {
  constexpr int64_t kV1Specials = 8 + 1 + 79 + 256;
  constexpr int64_t kV1SpecialId = 130000;
  tok::VocabSpec s;
  s.model = "t5";
  s.pre = "chatglm1";
  s.remove_extra_whitespaces = true;
  auto push = [&](std::string piece, float score, int32_t type) {
    s.tokens.push_back(std::move(piece));
    s.scores.push_back(score);
    s.types.push_back(type);
  };
  push("<unk>", 0.0f, tok::kTokenUnknown);
  push("<s>", 0.0f, tok::kTokenControl);
  push("</s>", 0.0f, tok::kTokenControl);
  push("<pad>", 0.0f, tok::kTokenControl);
  push("<n>", 0.0f, tok::kTokenUserDefined);
  const int64_t special_at =
      n_vocab >= kV1SpecialId + kV1Specials ? kV1SpecialId : n_vocab - kV1Specials;
  const int64_t n_fixed = static_cast<int64_t>(s.tokens.size());
  const std::vector<std::string> pieces = make_pieces(special_at - n_fixed, {});
  for (size_t i = 0; i < pieces.size(); ++i) {
    push(pieces[i], -2.0f - 0.001f * static_cast<float>(i), tok::kTokenNormal);
  }
  auto pad_to = [&](int64_t n) {
    while (static_cast<int64_t>(s.tokens.size()) < n) {
      push("[PAD" + std::to_string(s.tokens.size()) + "]", 0.0f, tok::kTokenUnused);
    }
  };
  pad_to(special_at);
  for (const char* sp :
       {"[MASK]", "[gMASK]", "[sMASK]", "<unused_0>", "<sop>", "<eop>", "<ENC>", "<dBLOCK>"}) {
    push(sp, 0.0f, tok::kTokenControl);
  }
  push("<|tab|>", 0.0f, tok::kTokenUserDefined);
  for (int n = 2; n <= 80; ++n) {
    push("<|blank_" + std::to_string(n) + "|>", 0.0f, tok::kTokenUserDefined);
  }
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    push(buf, 0.0f, tok::kTokenByte);
  }
  pad_to(n_vocab);
  s.unk = 0;
  s.pad = 3;
  s.bos = static_cast<int32_t>(special_at + 4);  // <sop>
  s.eos = static_cast<int32_t>(special_at + 5);  // <eop>
  s.add_bos = false;
  return s;
}

}  // namespace

StatusOr<tok::VocabSpec> synthetic_vocab(Family arch, int64_t n_vocab) {
  if (n_vocab < kMinVocab) {
    return invalid_argument("vocabulary of " + std::to_string(n_vocab) +
                            " tokens is too small for a synthetic vocabulary (need >= " +
                            std::to_string(kMinVocab) + ")");
  }
  if (arch == Family::kChatGLM1) {
    if (n_vocab < 512) {
      return invalid_argument("a chatglm1 vocabulary needs >= 512 tokens (it has 344 specials)");
    }
    return chatglm1_vocab(n_vocab);
  }
  tok::VocabSpec s;
  s.model = "llama";
  auto push = [&](std::string piece, float score, int32_t type) {
    s.tokens.push_back(std::move(piece));
    s.scores.push_back(score);
    s.types.push_back(type);
  };
  const bool glm = arch != Family::kLlama;
  push("<unk>", 0.0f, tok::kTokenUnknown);
  push(glm ? "<bos>" : "<s>", 0.0f, tok::kTokenControl);
  push(glm ? "<eos>" : "</s>", 0.0f, tok::kTokenControl);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    push(buf, 0.0f, tok::kTokenByte);
  }
  // The family's specials (tokenizer/vocab_convert.h): where the real vocabulary puts them when
  // this one is as large, else at its end.
  std::vector<const char*> specials;
  int64_t real_at = 0, real_vocab = 0;
  const bool glm4 = arch == Family::kGLM4 || arch == Family::kGLM4_0414 ||
                    arch == Family::kGLM4MoE || arch == Family::kGLM47Flash;
  if (glm4) {
    specials.assign(std::begin(tok::kGlm4Specials), std::end(tok::kGlm4Specials));
    real_at = tok::kGlm4Ranks;
    real_vocab = tok::kGlm4Vocab;
  } else if (glm) {
    specials.assign(std::begin(tok::kChatGlmSpecials), std::end(tok::kChatGlmSpecials));
    real_at = tok::kChatGlmPieces;
    real_vocab = tok::kChatGlmVocab;
  }
  int64_t special_at = n_vocab;
  if (!specials.empty()) {
    special_at = n_vocab >= real_vocab ? real_at : n_vocab - static_cast<int64_t>(specials.size());
  }
  const int64_t n_fixed = static_cast<int64_t>(s.tokens.size());
  const std::vector<std::string> pieces = make_pieces(special_at - n_fixed, specials);
  for (size_t i = 0; i < pieces.size(); ++i) push(pieces[i], -static_cast<float>(i + 1), 1);
  auto pad_to = [&](int64_t n) {
    while (static_cast<int64_t>(s.tokens.size()) < n) {
      push("[PAD" + std::to_string(s.tokens.size()) + "]", 0.0f, tok::kTokenUnused);
    }
  };
  pad_to(special_at);
  for (const char* sp : specials) push(sp, 0.0f, tok::kTokenControl);
  pad_to(n_vocab);

  if (arch == Family::kLlama) {
    s.unk = 0;
    s.bos = 1;
    s.eos = 2;
    s.add_bos = true;
  } else if (glm4) {
    s.eos = static_cast<int32_t>(special_at);  // <|endoftext|>
    s.pad = s.eos;
    s.eot = static_cast<int32_t>(special_at + 7);  // <|user|>
    s.add_bos = false;
    s.chat_template = arch == Family::kGLM4 ? kGlm4Template : kGlm4_0414Template;
  } else {
    s.eos = 2;
    s.pad = 0;
    s.add_bos = false;
    s.chat_template = arch == Family::kChatGLM2 ? kChatGlm2Template : kChatGlm3Template;
  }
  return s;
}

}  // namespace glm::convert
