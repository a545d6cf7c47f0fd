#include "grammar/vocab.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <numeric>
#include <string_view>

namespace glm::grammar {

namespace {

// Length of the well-formed UTF-8 character or completable prefix at s[0..], 0 if malformed.
// Same rules as the matcher: no overlongs, no surrogates, nothing above U+10FFFF.
size_t utf8_piece(std::string_view s) {
  const auto b0 = static_cast<uint8_t>(s[0]);
  if (b0 < 0x80) return 1;
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k < n; ++k) {
    if (k >= s.size()) return s.size();  // unfinished but completable
    const auto b = static_cast<uint8_t>(s[k]);
    if (k == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) return 0;
  }
  return n;
}

bool utf8_ok(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_piece(s.substr(i));
    if (n == 0) return false;
    i += n;
  }
  return true;
}

}  // namespace

StatusOr<std::shared_ptr<const TokenVocab>> TokenVocab::create(
    std::vector<std::string> tokens, const std::vector<int32_t>& stop_ids,
    const std::vector<int32_t>& special_ids) {
  auto v = std::shared_ptr<TokenVocab>(new TokenVocab());
  const size_t n = tokens.size();
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return invalid_argument("vocabulary too large");
  }
  v->kind_.assign(n, kText);
  for (int32_t id : special_ids) {
    if (id < 0 || static_cast<size_t>(id) >= n) {
      return invalid_argument("special token id " + std::to_string(id) + " out of range (" +
                              std::to_string(n) + " tokens)");
    }
    v->kind_[static_cast<size_t>(id)] = kSpecial;
  }
  for (int32_t id : stop_ids) {
    if (id < 0 || static_cast<size_t>(id) >= n) {
      return invalid_argument("stop token id " + std::to_string(id) + " out of range (" +
                              std::to_string(n) + " tokens)");
    }
    if (v->kind_[static_cast<size_t>(id)] != kStop) v->stop_ids_.push_back(id);
    v->kind_[static_cast<size_t>(id)] = kStop;
  }
  v->tokens_ = std::move(tokens);

  // Text tokens sorted by bytes; equal byte strings end at the same node.
  std::vector<int32_t> order;
  for (size_t i = 0; i < n; ++i) {
    if (v->kind_[i] == kText && !v->tokens_[i].empty()) order.push_back(static_cast<int32_t>(i));
  }
  const auto& toks = v->tokens_;
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return toks[static_cast<size_t>(a)] < toks[static_cast<size_t>(b)];
  });
  Trie& t = v->trie_;
  std::vector<uint32_t> path;  // node index per depth - 1
  std::string prev;
  auto close_to = [&](size_t depth) {
    while (path.size() > depth) {
      t.skip[path.back()] = static_cast<uint32_t>(t.byte.size());
      path.pop_back();
    }
  };
  std::vector<std::vector<int32_t>> at_node;
  for (int32_t id : order) {
    const std::string& s = toks[static_cast<size_t>(id)];
    if (s.size() > 0xFFFF) return invalid_argument("token " + std::to_string(id) + " too long");
    size_t lcp = 0;
    while (lcp < s.size() && lcp < prev.size() && lcp < path.size() && s[lcp] == prev[lcp]) ++lcp;
    close_to(lcp);
    for (size_t k = lcp; k < s.size(); ++k) {
      path.push_back(static_cast<uint32_t>(t.byte.size()));
      t.byte.push_back(static_cast<uint8_t>(s[k]));
      t.depth.push_back(static_cast<uint16_t>(k + 1));
      t.skip.push_back(0);
      t.ascii_below.push_back({0, 0});
      t.nonascii_below.push_back(0);
      t.utf8_ok_below.push_back(1);
      at_node.emplace_back();
    }
    // Summaries: node path[k] has the rest s[k+1..] below it.
    for (size_t k = 0; k < s.size(); ++k) {
      const uint32_t node = path[k];
      if (t.utf8_ok_below[node] && !utf8_ok(std::string_view(s).substr(k + 1))) {
        t.utf8_ok_below[node] = 0;
      }
    }
    {
      std::array<uint64_t, 2> ascii{0, 0};
      uint8_t nonascii = 0;
      for (size_t k = s.size(); k-- > 0;) {
        const uint32_t node = path[k];
        t.ascii_below[node][0] |= ascii[0];
        t.ascii_below[node][1] |= ascii[1];
        t.nonascii_below[node] |= nonascii;
        const auto b = static_cast<uint8_t>(s[k]);
        if (b < 128) {
          ascii[b >> 6] |= uint64_t{1} << (b & 63);
        } else {
          nonascii = 1;
        }
      }
    }
    at_node[path.back()].push_back(id);
    t.max_depth = std::max(t.max_depth, s.size());
    prev = s;
  }
  close_to(0);
  t.tok_begin.reserve(at_node.size() + 1);
  for (const auto& ids : at_node) {
    t.tok_begin.push_back(static_cast<uint32_t>(t.node_tokens.size()));
    t.node_tokens.insert(t.node_tokens.end(), ids.begin(), ids.end());
  }
  t.tok_begin.push_back(static_cast<uint32_t>(t.node_tokens.size()));
  return std::shared_ptr<const TokenVocab>(std::move(v));
}

size_t TokenMask::count() const {
  size_t c = 0;
  for (uint32_t w : words_) c += static_cast<size_t>(std::popcount(w));
  return c;
}

void TokenMask::apply_to_logits(float* logits) const {
  for (size_t i = 0; i < n_; ++i) {
    if (!((words_[i >> 5] >> (i & 31)) & 1u)) logits[i] = -std::numeric_limits<float>::infinity();
  }
}

}  // namespace glm::grammar
