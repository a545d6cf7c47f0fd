// Matcher: interned stack sets (a lazily built DFA over grammar states) and the trie walk.
#include "grammar/matcher.h"

#include <algorithm>
#include <array>
#include <deque>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/check.h"
#include "grammar/program.h"

namespace glm::grammar {

namespace {

using detail::Op;

constexpr uint32_t kDead = 0;        // state id of the empty set
constexpr uint32_t kEmptyStack = 0;  // stack id of the finished (accepting) stack
constexpr int32_t kUnknown = -1;
constexpr uint32_t kUniform = 0xFFFFFFFF;  // State::cp of an unfinished character whose every
                                           // completion is accepted by all its stacks

// Valid code point range of a UTF-8 sequence of `len` bytes (overlong forms excluded).
constexpr uint32_t kMinOfLen[5] = {0, 0, 0x80, 0x800, 0x10000};
constexpr uint32_t kMaxOfLen[5] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};

struct StackNode {
  uint32_t pos;     // element index in Program::elems
  uint32_t parent;  // stack id below (return positions); kEmptyStack at the bottom
};

struct State {
  std::vector<uint32_t> stacks;  // sorted, unique stack ids (kEmptyStack = complete)
  uint32_t cp = 0;               // bits of an unfinished UTF-8 character
  uint8_t need = 0;              // its continuation bytes still expected
  uint8_t len = 0;               // its total length
  uint32_t rep = 0;              // kUniform: a character every completion behaves like
  bool complete = false;
  // For the walk's subtree acceptance, computed on first need: the ASCII bytes that lead back
  // to this state, and whether every non-ASCII character does too ("closed").
  bool loop_known = false;
  bool closed = false;
  std::array<uint64_t, 2> loop{0, 0};
};

}  // namespace

class Matcher::Impl {
 public:
  Impl(Grammar g, std::shared_ptr<const TokenVocab> vocab, MatcherOptions opt)
      : grammar_(std::move(g)), p_(grammar_.program()), vocab_(std::move(vocab)), opt_(opt) {
    clear_tables();
    std::vector<uint32_t> start;
    visited_.clear();
    for (uint32_t a : p_.rule_alts[p_.root]) expand(a, kEmptyStack, &start);
    initial_ = intern_state(std::move(start), 0, 0, 0);
    history_ = {{initial_, false}};
  }

  size_t n_states() const { return states_.size(); }

  MaskInfo fill_mask(TokenMask* mask) {
    GLM_CHECK(vocab_ != nullptr);
    const size_t n = vocab_->n_tokens();
    if (mask->size() != n) *mask = TokenMask(n);
    maybe_compact();
    auto [s, terminated] = history_.back();
    MaskInfo info;
    if (terminated) {
      std::fill(mask->words().begin(), mask->words().end(), 0u);
      return info;
    }
    auto it = masks_.find(s);
    if (it == masks_.end()) {
      if (masks_.size() >= opt_.max_cached_masks) masks_.clear();
      it = masks_.emplace(s, walk(s, n)).first;
    }
    mask->words() = it->second.words;
    info.n_allowed = it->second.count;
    if (states_[s].complete) {
      info.stop_allowed = true;
      for (int32_t id : vocab_->stop_ids()) {
        if (!mask->allowed(id)) ++info.n_allowed;
        mask->set(id);
      }
    }
    return info;
  }

  Status accept_token(int32_t id) {
    GLM_CHECK(vocab_ != nullptr);
    if (id < 0 || static_cast<size_t>(id) >= vocab_->n_tokens()) {
      return invalid_argument("token id " + std::to_string(id) + " out of range");
    }
    maybe_compact();
    auto [s, terminated] = history_.back();
    if (terminated) return invalid_argument("grammar already terminated by a stop token");
    if (vocab_->is_stop(id)) {
      if (!states_[s].complete) {
        return invalid_argument("stop token " + std::to_string(id) +
                                " before the grammar is complete");
      }
      push({s, true});
      return Status::Ok();
    }
    if (vocab_->is_special(id)) {
      return invalid_argument("special token " + std::to_string(id) + " is not allowed");
    }
    const std::string& bytes = vocab_->token(id);
    uint32_t t = run(s, bytes);
    if (t == kDead || bytes.empty()) {
      return invalid_argument("token " + std::to_string(id) + " is not allowed by the grammar");
    }
    push({t, false});
    return Status::Ok();
  }

  Status accept_bytes(std::string_view bytes) {
    maybe_compact();
    auto [s, terminated] = history_.back();
    uint32_t t = terminated ? kDead : run(s, bytes);
    if (t == kDead) return invalid_argument("text is not allowed by the grammar");
    push({t, false});
    return Status::Ok();
  }

  bool can_accept_bytes(std::string_view bytes) {
    auto [s, terminated] = history_.back();
    return !terminated && run(s, bytes) != kDead;
  }

  bool is_complete() const { return states_[history_.back().first].complete; }
  bool is_terminated() const { return history_.back().second; }
  bool can_continue() const {
    if (history_.back().second) return false;
    const State& st = states_[history_.back().first];
    return st.need > 0 || std::any_of(st.stacks.begin(), st.stacks.end(),
                                      [](uint32_t x) { return x != kEmptyStack; });
  }
  void rollback(size_t n) {
    GLM_CHECK(n < history_.size());
    history_.resize(history_.size() - n);
    n_accepted_ -= n;
  }
  size_t n_accepted() const { return n_accepted_; }
  void reset() {
    history_ = {{initial_, false}};
    n_accepted_ = 0;
  }

 private:
  void push(std::pair<uint32_t, bool> entry) {
    history_.push_back(entry);
    ++n_accepted_;
    if (history_.size() > opt_.max_rollback + 1) history_.pop_front();
  }

  void clear_tables() {
    nodes_.assign(1, {0, 0});  // kEmptyStack
    node_ids_.clear();
    states_.assign(1, State{});  // kDead
    state_ids_.clear();
    trans_.assign(256, static_cast<int32_t>(kDead));
    masks_.clear();
  }

  // Past max_states, rebuilds the tables from the states still referenced (history, start):
  // long generations in recursive grammars keep meeting new stacks.
  void maybe_compact() {
    if (states_.size() <= opt_.max_states) return;
    struct Saved {
      std::vector<std::vector<uint32_t>> stacks;  // positions, top first; empty = finished
      uint32_t cp, rep;
      uint8_t need, len;
    };
    auto save = [&](uint32_t s) {
      const State& st = states_[s];
      Saved out{{}, st.cp, st.rep, st.need, st.len};
      for (uint32_t id : st.stacks) {
        std::vector<uint32_t> pos;
        for (uint32_t n = id; n != kEmptyStack; n = nodes_[n].parent) pos.push_back(nodes_[n].pos);
        out.stacks.push_back(std::move(pos));
      }
      return out;
    };
    std::vector<Saved> saved;
    saved.push_back(save(initial_));
    for (const auto& h : history_) saved.push_back(save(h.first));
    clear_tables();
    std::vector<uint32_t> ids;
    for (const Saved& sv : saved) {
      std::vector<uint32_t> stacks;
      for (const auto& pos : sv.stacks) {
        uint32_t parent = kEmptyStack;
        for (size_t k = pos.size(); k-- > 0;) parent = intern_node(pos[k], parent);
        stacks.push_back(parent);
      }
      uint32_t x = intern_state(std::move(stacks), sv.cp, sv.need, sv.len);
      states_[x].rep = sv.rep;
      ids.push_back(x);
    }
    initial_ = ids[0];
    for (size_t k = 0; k < history_.size(); ++k) history_[k].first = ids[k + 1];
  }

  struct CachedMask {
    std::vector<uint32_t> words;
    size_t count = 0;
  };

  uint32_t next(uint32_t s, uint8_t b) {
    int32_t t = trans_[static_cast<size_t>(s) * 256 + b];
    if (t == kUnknown) {
      t = static_cast<int32_t>(compute(s, b));
      trans_[static_cast<size_t>(s) * 256 + b] = t;
    }
    return static_cast<uint32_t>(t);
  }

  uint32_t run(uint32_t s, std::string_view bytes) {
    for (char c : bytes) {
      s = next(s, static_cast<uint8_t>(c));
      if (s == kDead) return kDead;
    }
    return s;
  }

  // Preorder walk of the vocabulary trie from state s; dead subtrees are skipped whole.
  CachedMask walk(uint32_t s, size_t n_tokens) {
    const TokenVocab::Trie& t = vocab_->trie();
    CachedMask m;
    m.words.assign((n_tokens + 31) / 32, 0);
    std::vector<uint32_t> at_depth(t.max_depth + 1);
    at_depth[0] = s;
    const size_t n_nodes = t.byte.size();
    for (size_t i = 0; i < n_nodes;) {
      const uint32_t up = at_depth[t.depth[i] - 1];
      const uint32_t x = next(up, t.byte[i]);
      if (x == kDead) {
        i = t.skip[i];
        continue;
      }
      // A state that loops on this byte (inside a string, say) may loop on everything below:
      // then the whole subtree is allowed without walking it.
      if ((x == up || x == s) && subtree_stays(x, i)) {
        for (uint32_t k = t.tok_begin[i]; k < t.tok_begin[t.skip[i]]; ++k) {
          int32_t id = t.node_tokens[k];
          m.words[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
        }
        m.count += t.tok_begin[t.skip[i]] - t.tok_begin[i];
        i = t.skip[i];
        continue;
      }
      at_depth[t.depth[i]] = x;
      for (uint32_t k = t.tok_begin[i]; k < t.tok_begin[i + 1]; ++k) {
        int32_t id = t.node_tokens[k];
        m.words[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
        ++m.count;
      }
      ++i;
    }
    return m;
  }

  // Whether every token below trie node i (state x after its byte) leaves x in x or in an
  // unfinished character of x: true when all ASCII bytes used below loop on x and, if there
  // are non-ASCII bytes below, every non-ASCII character loops on x and the bytes below are
  // well-formed UTF-8.
  bool subtree_stays(uint32_t x, size_t i) {
    if (states_[x].need > 0) return false;
    if (!states_[x].loop_known) compute_loop(x);
    const State& st = states_[x];
    const TokenVocab::Trie& t = vocab_->trie();
    const auto& a = t.ascii_below[i];
    if ((a[0] & ~st.loop[0]) || (a[1] & ~st.loop[1])) return false;
    return !t.nonascii_below[i] || (st.closed && t.utf8_ok_below[i]);
  }

  void compute_loop(uint32_t x) {
    std::array<uint64_t, 2> loop{0, 0};
    for (uint32_t b = 0; b < 128; ++b) {
      if (next(x, static_cast<uint8_t>(b)) == x) loop[b >> 6] |= uint64_t{1} << (b & 63);
    }
    // Closed: each top class takes all non-ASCII characters or none (so all of them lead to
    // the same state), and that state is x (checked on U+4E00).
    bool closed = true;
    for (uint32_t id : states_[x].stacks) {
      if (id == kEmptyStack) continue;
      const detail::CharClass& c = p_.classes[p_.elems[nodes_[id].pos].arg];
      if (!c.covers(0x80, 0x10FFFF) && c.intersects(0x80, 0x10FFFF)) closed = false;
    }
    closed = closed && run(x, "\xE4\xB8\x80") == x;
    State& st = states_[x];
    st.loop = loop;
    st.closed = closed;
    st.loop_known = true;
  }

  uint32_t intern_node(uint32_t pos, uint32_t parent) {
    uint64_t key = (static_cast<uint64_t>(pos) << 32) | parent;
    auto [it, inserted] = node_ids_.emplace(key, static_cast<uint32_t>(nodes_.size()));
    if (inserted) nodes_.push_back({pos, parent});
    return it->second;
  }

  // Adds to `out` every stack reachable from position `pos` above `parent` whose top is a
  // character element (or kEmptyStack when the whole grammar can end here).
  void expand(uint32_t pos, uint32_t parent, std::vector<uint32_t>* out) {
    uint64_t key = (static_cast<uint64_t>(pos) << 32) | parent;
    if (!visited_.insert(key).second) return;
    const detail::Elem& e = p_.elems[pos];
    switch (e.op) {
      case Op::kChar:
        out->push_back(intern_node(pos, parent));
        return;
      case Op::kEnd:
        if (parent == kEmptyStack) {
          out->push_back(kEmptyStack);
        } else {
          StackNode up = nodes_[parent];
          expand(up.pos, up.parent, out);
        }
        return;
      case Op::kRef: {
        // Tail call: a reference that ends its alternative returns straight to the caller.
        uint32_t cont = p_.elems[pos + 1].op == Op::kEnd ? parent : intern_node(pos + 1, parent);
        for (uint32_t a : p_.rule_alts[e.arg]) expand(a, cont, out);
        return;
      }
    }
  }

  uint32_t intern_state(std::vector<uint32_t> stacks, uint32_t cp, uint8_t need, uint8_t len) {
    std::sort(stacks.begin(), stacks.end());
    stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
    if (stacks.empty()) return kDead;
    std::string key(reinterpret_cast<const char*>(stacks.data()), stacks.size() * 4);
    key.append(reinterpret_cast<const char*>(&cp), 4);
    key.push_back(static_cast<char>(need));
    key.push_back(static_cast<char>(len));
    auto [it, inserted] = state_ids_.emplace(std::move(key), static_cast<uint32_t>(states_.size()));
    if (inserted) {
      State st;
      st.complete = need == 0 && stacks.front() == kEmptyStack;
      st.stacks = std::move(stacks);
      st.cp = cp;
      st.need = need;
      st.len = len;
      states_.push_back(std::move(st));
      trans_.resize(trans_.size() + 256, kUnknown);
    }
    return it->second;
  }

  // Stacks of `stacks` whose top may match a code point in [lo, hi].
  std::vector<uint32_t> live_for(const std::vector<uint32_t>& stacks, uint32_t lo, uint32_t hi) {
    std::vector<uint32_t> out;
    for (uint32_t id : stacks) {
      if (id == kEmptyStack) continue;
      if (p_.classes[p_.elems[nodes_[id].pos].arg].intersects(lo, hi)) out.push_back(id);
    }
    return out;
  }

  uint32_t partial(const std::vector<uint32_t>& stacks, uint32_t cp, uint8_t need, uint8_t len) {
    const uint32_t lo0 = cp << (6 * need);
    const uint32_t hi0 = lo0 | ((1u << (6 * need)) - 1);
    const uint32_t lo = std::max(lo0, kMinOfLen[len]);
    const uint32_t hi = std::min(hi0, kMaxOfLen[len]);
    if (lo > hi) return kDead;                       // overlong or beyond U+10FFFF
    if (lo >= 0xD800 && hi <= 0xDFFF) return kDead;  // only surrogates can follow
    std::vector<uint32_t> live = live_for(stacks, lo, hi);
    // Uniform: every completion is a valid character that every live stack accepts, so the
    // exact bits no longer matter and prefixes share one state (instead of one per prefix).
    bool valid = lo == lo0 && hi == hi0 && (hi < 0xD800 || lo > 0xDFFF);
    bool uniform = valid && std::all_of(live.begin(), live.end(), [&](uint32_t id) {
                     return p_.classes[p_.elems[nodes_[id].pos].arg].covers(lo, hi);
                   });
    if (uniform && !live.empty()) {
      uint32_t x = intern_state(std::move(live), kUniform, need, len);
      if (states_[x].rep == 0) states_[x].rep = lo;
      return x;
    }
    return intern_state(std::move(live), cp, need, len);
  }

  uint32_t advance(const std::vector<uint32_t>& stacks, uint32_t cp) {
    std::vector<uint32_t> out;
    visited_.clear();
    for (uint32_t id : stacks) {
      if (id == kEmptyStack) continue;
      StackNode n = nodes_[id];
      if (p_.classes[p_.elems[n.pos].arg].matches(cp)) expand(n.pos + 1, n.parent, &out);
    }
    return intern_state(std::move(out), 0, 0, 0);
  }

  uint32_t compute(uint32_t s, uint8_t b) {
    const State st = states_[s];  // copy: interning below may grow states_
    if (s == kDead) return kDead;
    if (st.need > 0) {
      if ((b & 0xC0) != 0x80) return kDead;
      if (st.cp == kUniform) {
        if (st.need > 1) {
          uint32_t x = intern_state(st.stacks, kUniform, static_cast<uint8_t>(st.need - 1), st.len);
          if (states_[x].rep == 0) states_[x].rep = st.rep;
          return x;
        }
        return advance(st.stacks, st.rep);
      }
      uint32_t cp = (st.cp << 6) | (b & 0x3F);
      uint8_t need = static_cast<uint8_t>(st.need - 1);
      if (need > 0) return partial(st.stacks, cp, need, st.len);
      if (cp < kMinOfLen[st.len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        return kDead;
      }
      return advance(st.stacks, cp);
    }
    if (b < 0x80) return advance(st.stacks, b);
    if (b >= 0xC2 && b <= 0xDF) return partial(st.stacks, b & 0x1Fu, 1, 2);
    if (b >= 0xE0 && b <= 0xEF) return partial(st.stacks, b & 0x0Fu, 2, 3);
    if (b >= 0xF0 && b <= 0xF4) return partial(st.stacks, b & 0x07u, 3, 4);
    return kDead;  // continuation byte without a lead, or never valid in UTF-8
  }

  Grammar grammar_;
  const detail::Program& p_;
  std::shared_ptr<const TokenVocab> vocab_;
  std::vector<StackNode> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_ids_;
  std::vector<State> states_;
  std::unordered_map<std::string, uint32_t> state_ids_;
  std::vector<int32_t> trans_;  // [n_states, 256]
  std::unordered_set<uint64_t> visited_;
  std::unordered_map<uint32_t, CachedMask> masks_;
  uint32_t initial_ = kDead;
  MatcherOptions opt_;
  std::deque<std::pair<uint32_t, bool>> history_;  // (state, terminated) after each accept
  size_t n_accepted_ = 0;
};

Matcher::Matcher(Grammar grammar, std::shared_ptr<const TokenVocab> vocab, MatcherOptions options)
    : impl_(std::make_unique<Impl>(std::move(grammar), std::move(vocab), options)) {}
Matcher::~Matcher() = default;
Matcher::Matcher(Matcher&&) noexcept = default;
Matcher& Matcher::operator=(Matcher&&) noexcept = default;

MaskInfo Matcher::fill_mask(TokenMask* mask) { return impl_->fill_mask(mask); }
Status Matcher::accept_token(int32_t id) { return impl_->accept_token(id); }
Status Matcher::accept_bytes(std::string_view bytes) { return impl_->accept_bytes(bytes); }
bool Matcher::can_accept_bytes(std::string_view bytes) { return impl_->can_accept_bytes(bytes); }
bool Matcher::is_complete() const { return impl_->is_complete(); }
bool Matcher::is_terminated() const { return impl_->is_terminated(); }
bool Matcher::can_continue() const { return impl_->can_continue(); }
void Matcher::rollback(size_t n) { impl_->rollback(n); }
size_t Matcher::n_accepted() const { return impl_->n_accepted(); }
size_t Matcher::n_states() const { return impl_->n_states(); }
void Matcher::reset() { impl_->reset(); }

}  // namespace glm::grammar
