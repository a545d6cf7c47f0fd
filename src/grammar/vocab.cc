#include "grammar/vocab.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <numeric>

namespace glm::grammar {

StatusOr<std::shared_ptr<const TokenVocab>> TokenVocab::create(std::vector<std::string> tokens,
                                                               std::vector<int32_t> stop_ids,
                                                               std::vector<int32_t> special_ids) {
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
      at_node.emplace_back();
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
