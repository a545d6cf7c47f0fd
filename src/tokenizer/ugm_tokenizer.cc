// SentencePiece unigram ("t5", ChatGLM-6B's ice_text.model), the algorithm of sentencepiece's
// normalizer.cc and unigram_model.cc written from their documented behaviour:
//  1. ChatGLM-6B only (pre "chatglm1"): "\n" -> "<n>", "\t" -> "<|tab|>", each run of 2..80
//     spaces -> "<|blank_N|>" (longer runs in chunks of 80 from the left).
//  2. Normalization: user-defined pieces are copied verbatim; otherwise the longest match in the
//     precompiled charsmap (a darts-clone double array, when the file has one) replaces its
//     bytes, else one UTF-8 character is copied. Leading, trailing and repeated spaces are
//     dropped when remove_extra_whitespaces is set; spaces become "▁"; the dummy "▁" prefix.
//  3. Viterbi over the characters: every NORMAL piece scores its log-probability, a
//     USER_DEFINED piece n_chars * max_score - 0.1 (always preferred), and a character that no
//     single-character piece covers is <unk> at min_score - 10, spelled as its bytes
//     (<0xNN>) when the vocabulary has them. Ties keep the earlier-starting piece.
#include <algorithm>
#include <cfloat>
#include <cstring>

#include "tokenizer/vocab_tokenizer.h"

namespace glm::tok {
namespace {

constexpr int kMaxBlank = 80;  // ChatGLM-6B's max_blank_length

bool valid_char(std::string_view s, size_t i, size_t n) {
  return n > 1 || static_cast<uint8_t>(s[i]) < 0x80;
}

// "<|blank_N|>" -> N (2..80), else 0.
int blank_count(std::string_view p) {
  constexpr std::string_view kHead = "<|blank_", kTail = "|>";
  if (p.size() < kHead.size() + kTail.size() + 1 || p.compare(0, kHead.size(), kHead) != 0 ||
      p.compare(p.size() - kTail.size(), kTail.size(), kTail) != 0) {
    return 0;
  }
  int n = 0;
  for (size_t i = kHead.size(); i + kTail.size() < p.size(); ++i) {
    if (p[i] < '0' || p[i] > '9' || n > kMaxBlank) return 0;
    n = n * 10 + (p[i] - '0');
  }
  return n >= 2 && n <= kMaxBlank ? n : 0;
}

}  // namespace

std::string chatglm1_preprocess(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '\n') {
      out += "<n>";
      ++i;
    } else if (c == '\t') {
      out += "<|tab|>";
      ++i;
    } else if (c == ' ') {
      size_t run = 0;
      while (i + run < text.size() && text[i + run] == ' ') ++run;
      i += run;
      for (; run >= 2; run -= std::min<size_t>(run, kMaxBlank)) {
        out += "<|blank_" + std::to_string(std::min<size_t>(run, kMaxBlank)) + "|>";
      }
      if (run == 1) out += ' ';
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

StatusOr<std::unique_ptr<Tokenizer>> UgmTokenizer::create(const VocabSpec& spec,
                                                          const std::string& label) {
  auto t = std::unique_ptr<UgmTokenizer>(new UgmTokenizer());
  GLM_RETURN_IF_ERROR(t->init(spec, label));
  const size_t n = spec.tokens.size();
  if (spec.scores.size() != n) {
    return bad_file(label + ": unigram vocabulary needs tokenizer.ggml.scores (" +
                    std::to_string(spec.scores.size()) + " scores for " + std::to_string(n) +
                    " tokens)");
  }
  t->scores_ = spec.scores;
  t->byte_ids_.fill(-1);
  t->add_space_prefix_ = spec.add_space_prefix;
  t->remove_extra_ws_ = spec.remove_extra_whitespaces;
  t->chatglm1_ = spec.pre == "chatglm1";
  t->max_score_ = FLT_MIN;  // as sentencepiece: user-defined pieces score about -0.1
  t->min_score_ = FLT_MAX;
  for (size_t i = 0; i < n; ++i) {
    const std::string& p = spec.tokens[i];
    const int32_t type = spec.types[i];
    if (type == kTokenByte) {
      const int b = parse_byte_piece(p);
      if (b >= 0 && t->byte_ids_[b] < 0) t->byte_ids_[b] = static_cast<int32_t>(i);
    } else if (type == kTokenNormal || type == kTokenUserDefined) {
      if (t->pieces_.emplace(p, static_cast<int32_t>(i)).second) {
        t->max_piece_bytes_ = std::max(t->max_piece_bytes_, p.size());
      }
      if (type == kTokenNormal) {
        t->min_score_ = std::min(t->min_score_, spec.scores[i]);
        t->max_score_ = std::max(t->max_score_, spec.scores[i]);
      } else if (!p.empty()) {
        t->user_defined_[static_cast<uint8_t>(p[0])].push_back(p);
      }
    }
  }
  if (t->min_score_ == FLT_MAX) t->min_score_ = 0;
  for (auto& v : t->user_defined_) {
    std::stable_sort(v.begin(), v.end(), [](const std::string& a, const std::string& b) {
      return a.size() > b.size();
    });
  }
  if (t->unk_ < 0) {
    for (size_t i = 0; i < n; ++i) {
      if (spec.types[i] == kTokenUnknown) {
        t->unk_ = static_cast<int32_t>(i);
        break;
      }
    }
  }
  if (!spec.precompiled_charsmap.empty()) {
    const std::string& m = spec.precompiled_charsmap;
    uint32_t trie_bytes = 0;
    if (m.size() >= 4) std::memcpy(&trie_bytes, m.data(), 4);
    if (m.size() < 4 || trie_bytes % 4 != 0 || trie_bytes > m.size() - 4) {
      return bad_file(label + ": tokenizer.ggml.precompiled_charsmap is malformed");
    }
    t->trie_.resize(trie_bytes / 4);
    std::memcpy(t->trie_.data(), m.data() + 4, trie_bytes);
    t->normalized_ = m.substr(4 + trie_bytes);
  }
  return std::unique_ptr<Tokenizer>(std::move(t));
}

size_t UgmTokenizer::charsmap_match(std::string_view s, size_t i, std::string_view* out) const {
  // darts-clone double array: unit bits 0-7 (and 31) label, 8 has_leaf, 9-31 offset.
  auto offset = [](uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); };
  auto label = [](uint32_t u) { return u & ((1u << 31) | 0xff); };
  if (trie_.empty()) return 0;
  size_t best = 0;
  uint32_t pos = offset(trie_[0]);
  for (size_t k = i; k < s.size(); ++k) {
    const uint8_t c = static_cast<uint8_t>(s[k]);
    pos ^= c;
    if (pos >= trie_.size()) break;
    const uint32_t u = trie_[pos];
    if (label(u) != c) break;
    pos ^= offset(u);
    if (pos >= trie_.size()) break;
    if ((u >> 8) & 1) {
      const uint32_t value = trie_[pos] & ((1u << 31) - 1);
      if (value >= normalized_.size()) break;
      const char* str = normalized_.data() + value;
      *out = std::string_view(str, strnlen(str, normalized_.size() - value));
      best = k + 1 - i;
    }
  }
  return best;
}

std::string UgmTokenizer::normalize(std::string_view text, bool dummy_prefix) const {
  // One step of normalization at text[i]: the replacement and the bytes consumed.
  auto step = [&](size_t i, std::string_view* rep) -> size_t {
    for (const std::string& u : user_defined_[static_cast<uint8_t>(text[i])]) {
      if (text.compare(i, u.size(), u) == 0) {
        *rep = text.substr(i, u.size());
        return u.size();
      }
    }
    if (size_t n = charsmap_match(text, i, rep)) return n;
    const size_t n = utf8_char_len(text, i);
    *rep = valid_char(text, i, n) ? text.substr(i, n) : std::string_view("\xef\xbf\xbd");
    return n;
  };
  size_t i = 0;
  std::string_view rep;
  if (remove_extra_ws_) {
    while (i < text.size()) {
      const size_t n = step(i, &rep);
      if (rep != " ") break;
      i += n;
    }
  }
  std::string out;
  if (i >= text.size()) return out;
  out.reserve(text.size() + text.size() / 4 + 3);
  if (dummy_prefix) out.append(kSpaceMarker);
  bool prev_space = remove_extra_ws_;
  while (i < text.size()) {
    i += step(i, &rep);
    if (prev_space) {
      while (!rep.empty() && rep.front() == ' ') rep.remove_prefix(1);
    }
    if (!rep.empty()) {
      for (char c : rep) {
        if (c == ' ') {
          out.append(kSpaceMarker);
        } else {
          out.push_back(c);
        }
      }
      prev_space = rep.back() == ' ';
    }
    prev_space = prev_space && remove_extra_ws_;
  }
  if (remove_extra_ws_) {
    while (out.size() >= kSpaceMarker.size() &&
           out.compare(out.size() - kSpaceMarker.size(), kSpaceMarker.size(), kSpaceMarker) == 0) {
      out.resize(out.size() - kSpaceMarker.size());
    }
  }
  return out;
}

void UgmTokenizer::encode_text(std::string_view text, bool after_special,
                               std::vector<int32_t>* out) const {
  const std::string pre = chatglm1_ ? chatglm1_preprocess(text) : std::string();
  const std::string s =
      normalize(chatglm1_ ? std::string_view(pre) : text, add_space_prefix_ && after_special);
  const size_t n = s.size();
  if (n == 0) return;
  // best[e]: score of the best segmentation of s[0, e); from[e], id[e]: its last piece.
  std::vector<float> best(n + 1, -FLT_MAX);
  std::vector<uint32_t> from(n + 1, 0);
  std::vector<int32_t> id(n + 1, -1);  // -1: an unknown character
  std::vector<bool> reached(n + 1, false);
  reached[0] = true;
  best[0] = 0;
  const float unk_score = min_score_ - 10.0f;
  auto offer = [&](size_t start, size_t end, float score, int32_t piece) {
    const float cand = best[start] + score;
    if (!reached[end] || cand > best[end]) {
      reached[end] = true;
      best[end] = cand;
      from[end] = static_cast<uint32_t>(start);
      id[end] = piece;
    }
  };
  for (size_t start = 0; start < n; start += utf8_char_len(s, start)) {
    if (!reached[start]) continue;
    bool single = false;
    int n_chars = 0;
    for (size_t end = start; end < n && end - start < max_piece_bytes_;) {
      end += utf8_char_len(s, end);
      ++n_chars;
      auto it = pieces_.find(std::string_view(s).substr(start, end - start));
      if (it == pieces_.end()) continue;
      const int32_t pid = it->second;
      const float score = types_[pid] == kTokenUserDefined
                              ? static_cast<float>(n_chars) * max_score_ - 0.1f
                              : scores_[pid];
      if (n_chars == 1) single = true;
      offer(start, end, score, pid);
    }
    if (!single) offer(start, start + utf8_char_len(s, start), unk_score, -1);
  }
  std::vector<std::pair<uint32_t, uint32_t>> spans;  // (start, end) of each piece, reversed
  for (size_t e = n; e > 0; e = from[e]) spans.emplace_back(from[e], static_cast<uint32_t>(e));
  for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
    const int32_t pid = id[it->second];
    if (pid >= 0) {
      out->push_back(pid);
      continue;
    }
    const std::string_view piece = std::string_view(s).substr(it->first, it->second - it->first);
    bool have_bytes = true;
    for (char b : piece) have_bytes = have_bytes && byte_ids_[static_cast<uint8_t>(b)] >= 0;
    if (have_bytes) {
      for (char b : piece) out->push_back(byte_ids_[static_cast<uint8_t>(b)]);
    } else if (unk_ >= 0) {
      out->push_back(unk_);
    }
  }
}

// ChatGLM-6B's postprocess: its whitespace tokens as text ("\n", "\t", N spaces), anywhere in
// the text (the first token's too); nullopt for any other token.
std::optional<std::string> UgmTokenizer::chatglm1_whitespace(int32_t id) const {
  if (!chatglm1_ || !is_text_piece(id)) return std::nullopt;
  const std::string& p = tokens_[id];
  if (p == "<n>") return "\n";
  if (p == "<|tab|>") return "\t";
  if (const int blanks = blank_count(p)) return std::string(blanks, ' ');
  return std::nullopt;
}

std::string UgmTokenizer::token_bytes(int32_t id) const {
  if (std::optional<std::string> ws = chatglm1_whitespace(id)) return *ws;
  return sentencepiece_bytes(id);
}

std::string UgmTokenizer::token_bytes_at_start(int32_t id) const {
  if (std::optional<std::string> ws = chatglm1_whitespace(id)) return *ws;
  return sentencepiece_bytes_at_start(id, add_space_prefix_);
}

}  // namespace glm::tok
