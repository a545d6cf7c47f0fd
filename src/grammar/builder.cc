// Expr constructors, GrammarBuilder and the compiler from expressions to flat rules, with the
// build-time checks (undefined rules, left recursion, rules that can never finish).
#include <algorithm>
#include <map>
#include <unordered_map>

#include "grammar/program.h"

namespace glm::grammar {

namespace {

constexpr int kMaxRepeat = 10000;              // x{0,N}: N helper rules
constexpr size_t kMaxElems = size_t{1} << 22;  // whole compiled grammar

bool valid_rule_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

std::string at(const std::string& origin) { return origin.empty() ? "" : origin + ": "; }

}  // namespace

// ---- Expr ----

Expr Expr::literal(std::string_view utf8) {
  Expr e;
  e.kind_ = Kind::kLiteral;
  e.text_ = std::string(utf8);
  return e;
}
Expr Expr::chars(std::vector<CharRange> ranges, bool negated) {
  Expr e;
  e.kind_ = Kind::kChars;
  e.ranges_ = std::move(ranges);
  e.negated_ = negated;
  return e;
}
Expr Expr::ref(std::string rule_name) {
  Expr e;
  e.kind_ = Kind::kRef;
  e.text_ = std::move(rule_name);
  return e;
}
Expr Expr::seq(std::vector<Expr> items) {
  Expr e;
  e.kind_ = Kind::kSeq;
  e.items_ = std::move(items);
  return e;
}
Expr Expr::alt(std::vector<Expr> items) {
  Expr e;
  e.kind_ = Kind::kAlt;
  e.items_ = std::move(items);
  return e;
}
Expr Expr::repeat(Expr item, int min, int max) {
  Expr e;
  e.kind_ = Kind::kRepeat;
  e.items_.push_back(std::move(item));
  e.min_ = min;
  e.max_ = max;
  return e;
}

// ---- builder ----

struct RuleDef {
  std::string name;
  Expr body;
  std::string origin;
};

struct GrammarBuilder::Rules {
  std::vector<RuleDef> list;
  std::unordered_map<std::string, size_t> index;
};

GrammarBuilder::GrammarBuilder() : rules_(std::make_unique<Rules>()) {}
GrammarBuilder::~GrammarBuilder() = default;
GrammarBuilder::GrammarBuilder(GrammarBuilder&&) noexcept = default;
GrammarBuilder& GrammarBuilder::operator=(GrammarBuilder&&) noexcept = default;

Status GrammarBuilder::add_rule(const std::string& name, Expr body, std::string origin) {
  if (!valid_rule_name(name)) {
    return invalid_argument(at(origin) + "bad rule name '" + name +
                            "' (use letters, digits, '-' and '_')");
  }
  if (rules_->index.count(name)) {
    return invalid_argument(at(origin) + "rule '" + name + "' is defined twice");
  }
  rules_->index[name] = rules_->list.size();
  rules_->list.push_back({name, std::move(body), std::move(origin)});
  return Status::Ok();
}

bool GrammarBuilder::has_rule(const std::string& name) const {
  return rules_->index.count(name) != 0;
}

std::string GrammarBuilder::fresh_name(std::string_view base) const {
  std::string s;
  for (char c : base) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    s += ok ? c : '-';
  }
  if (s.empty()) s = "r";
  if (!has_rule(s)) return s;
  for (int i = 2;; ++i) {
    std::string t = s + "-" + std::to_string(i);
    if (!has_rule(t)) return t;
  }
}

// ---- compiler ----

namespace {

using detail::Elem;
using detail::Op;
using Alt = std::vector<Elem>;

class Compiler {
 public:
  explicit Compiler(const std::vector<RuleDef>& rules) : rules_(rules) {
    for (const RuleDef& r : rules) {
      ids_[r.name] = static_cast<uint32_t>(names_.size());
      names_.push_back(r.name);
      origins_.push_back(r.origin);
    }
    alts_.resize(names_.size());
    n_helpers_.resize(names_.size());
  }

  StatusOr<std::shared_ptr<detail::Program>> compile(const std::string& root) {
    auto it = ids_.find(root);
    if (rules_.empty()) return invalid_argument("empty grammar: no rules");
    if (it == ids_.end()) return invalid_argument("no start rule '" + root + "'");
    for (size_t i = 0; i < rules_.size(); ++i) {
      GLM_RETURN_IF_ERROR(lower_rule(static_cast<uint32_t>(i), rules_[i].body));
    }
    auto p = std::make_shared<detail::Program>();
    p->root = it->second;
    p->rule_names = names_;
    p->classes = std::move(classes_);
    for (auto& alts : alts_) {
      std::vector<uint32_t> starts;
      for (auto& a : alts) {
        starts.push_back(static_cast<uint32_t>(p->elems.size()));
        p->elems.insert(p->elems.end(), a.begin(), a.end());
        p->elems.push_back({Op::kEnd, 0});
      }
      p->rule_alts.push_back(std::move(starts));
    }
    GLM_RETURN_IF_ERROR(check(*p));
    return p;
  }

 private:
  uint32_t new_rule(uint32_t owner) {
    // Helper rules are named after the user rule that owns them: "value-3".
    uint32_t top = owner < rules_.size() ? owner : owner_of_[owner - rules_.size()];
    std::string name;
    do {
      name = names_[top] + "-" + std::to_string(++n_helpers_[top]);
    } while (ids_.count(name));
    uint32_t id = static_cast<uint32_t>(names_.size());
    ids_[name] = id;
    names_.push_back(name);
    origins_.push_back(origins_[top]);
    alts_.emplace_back();
    n_helpers_.push_back(0);
    owner_of_.push_back(top);
    return id;
  }

  Status lower_rule(uint32_t id, const Expr& body) {
    std::vector<Alt> alts;
    if (body.kind() == Expr::Kind::kAlt && !body.items().empty()) {
      for (const Expr& item : body.items()) {
        alts.emplace_back();
        GLM_RETURN_IF_ERROR(lower_seq(item, id, &alts.back()));
      }
    } else {
      alts.emplace_back();
      GLM_RETURN_IF_ERROR(lower_seq(body, id, &alts.back()));
    }
    alts_[id] = std::move(alts);
    return Status::Ok();
  }

  Status count(size_t n) {
    n_elems_ += n;
    if (n_elems_ > kMaxElems) {
      return invalid_argument("grammar too large (over " + std::to_string(kMaxElems) +
                              " elements after expanding repetitions)");
    }
    return Status::Ok();
  }

  uint32_t class_id(std::vector<CharRange> ranges, bool negated) {
    detail::CharClass c = detail::make_class(std::move(ranges), negated);
    std::string key(negated ? "^" : "+");
    for (const CharRange& r : c.ranges) {
      key.append(reinterpret_cast<const char*>(&r.lo), 4);
      key.append(reinterpret_cast<const char*>(&r.hi), 4);
    }
    auto [it, inserted] = class_ids_.emplace(key, static_cast<uint32_t>(classes_.size()));
    if (inserted) classes_.push_back(std::move(c));
    return it->second;
  }

  Status lower_seq(const Expr& e, uint32_t owner, Alt* out) {
    switch (e.kind()) {
      case Expr::Kind::kLiteral: {
        size_t i = 0;
        uint32_t cp = 0;
        while (i < e.text().size()) {
          if (!detail::next_code_point(e.text(), &i, &cp)) {
            return invalid_argument(at(e.origin()) + "literal is not valid UTF-8");
          }
          out->push_back({Op::kChar, class_id({{cp, cp}}, false)});
        }
        return count(e.text().size());
      }
      case Expr::Kind::kChars: {
        for (const CharRange& r : e.ranges()) {
          if (r.lo > r.hi || r.hi > 0x10FFFF) {
            return invalid_argument(at(e.origin()) + "bad character range");
          }
        }
        uint32_t c = class_id(e.ranges(), e.negated());
        if (classes_[c].empty()) {
          return invalid_argument(at(e.origin()) + "character class matches nothing");
        }
        out->push_back({Op::kChar, c});
        return count(1);
      }
      case Expr::Kind::kRef: {
        auto it = ids_.find(e.text());
        if (it == ids_.end() || it->second >= rules_.size()) {
          return invalid_argument(at(e.origin()) + "undefined rule '" + e.text() + "'");
        }
        out->push_back({Op::kRef, it->second});
        return count(1);
      }
      case Expr::Kind::kSeq:
        for (const Expr& item : e.items()) GLM_RETURN_IF_ERROR(lower_seq(item, owner, out));
        return Status::Ok();
      case Expr::Kind::kAlt: {
        if (e.items().size() == 1) return lower_seq(e.items()[0], owner, out);
        if (e.items().empty()) return Status::Ok();
        uint32_t g = new_rule(owner);
        std::vector<Alt> alts;
        for (const Expr& item : e.items()) {
          alts.emplace_back();
          GLM_RETURN_IF_ERROR(lower_seq(item, g, &alts.back()));
        }
        alts_[g] = std::move(alts);
        out->push_back({Op::kRef, g});
        return count(1);
      }
      case Expr::Kind::kRepeat:
        return lower_repeat(e, owner, out);
    }
    return Status::Ok();
  }

  Status lower_repeat(const Expr& e, uint32_t owner, Alt* out) {
    int min = e.min(), max = e.max();
    if (min < 0 || (max != Expr::kUnbounded && max < min)) {
      return invalid_argument(at(e.origin()) + "bad repetition bounds {" + std::to_string(min) +
                              "," + std::to_string(max) + "}");
    }
    if (min > kMaxRepeat || max > kMaxRepeat) {
      return invalid_argument(at(e.origin()) + "repetition bound over " +
                              std::to_string(kMaxRepeat));
    }
    if (max == 0) return Status::Ok();
    // The repeated unit as one element: itself if it lowers to one, else a helper rule.
    Alt unit;
    GLM_RETURN_IF_ERROR(lower_seq(e.items()[0], owner, &unit));
    if (unit.size() != 1) {
      uint32_t g = new_rule(owner);
      alts_[g] = {unit};
      unit = {{Op::kRef, g}};
    }
    for (int i = 0; i < min; ++i) out->push_back(unit[0]);
    GLM_RETURN_IF_ERROR(count(static_cast<size_t>(min) + 1));
    if (max == Expr::kUnbounded) {
      uint32_t s = new_rule(owner);  // s ::= unit s | ""
      alts_[s] = {{unit[0], {Op::kRef, s}}, {}};
      out->push_back({Op::kRef, s});
    } else if (max > min) {
      // opt1 ::= unit | "";  optk ::= unit opt(k-1) | ""  (nested, so no x? x? x? ambiguity)
      uint32_t prev = new_rule(owner);
      alts_[prev] = {{unit[0]}, {}};
      for (int k = 2; k <= max - min; ++k) {
        uint32_t r = new_rule(owner);
        alts_[r] = {{unit[0], {Op::kRef, prev}}, {}};
        prev = r;
      }
      GLM_RETURN_IF_ERROR(count(static_cast<size_t>(3 * (max - min))));
      out->push_back({Op::kRef, prev});
    }
    return Status::Ok();
  }

  std::string describe(uint32_t r) const {
    std::string s = "rule '" + names_[r] + "'";
    if (r >= rules_.size()) s += " (inside rule '" + names_[owner_of_[r - rules_.size()]] + "')";
    if (!origins_[r].empty()) s += " at " + origins_[r];
    return s;
  }

  Status check(const detail::Program& p) const {
    const size_t n = p.rule_alts.size();
    auto alt_elems = [&](uint32_t start) {
      size_t end = start;
      while (p.elems[end].op != Op::kEnd) ++end;
      return std::pair<size_t, size_t>(start, end);
    };
    // Nullable and productive rules (least fixpoints).
    std::vector<char> nullable(n, 0), productive(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        for (uint32_t a : p.rule_alts[r]) {
          auto [b, e] = alt_elems(a);
          bool all_null = true, all_prod = true;
          for (size_t i = b; i < e; ++i) {
            const Elem& el = p.elems[i];
            if (el.op == Op::kChar) {
              all_null = false;
            } else {
              all_null = all_null && nullable[el.arg];
              all_prod = all_prod && productive[el.arg];
            }
          }
          if (all_null && !nullable[r]) nullable[r] = 1, changed = true;
          if (all_prod && !productive[r]) productive[r] = 1, changed = true;
        }
      }
    }
    // Reachable rules from the root.
    std::vector<char> reach(n, 0);
    std::vector<uint32_t> todo = {p.root};
    reach[p.root] = 1;
    while (!todo.empty()) {
      uint32_t r = todo.back();
      todo.pop_back();
      for (uint32_t a : p.rule_alts[r]) {
        auto [b, e] = alt_elems(a);
        for (size_t i = b; i < e; ++i) {
          if (p.elems[i].op == Op::kRef && !reach[p.elems[i].arg]) {
            reach[p.elems[i].arg] = 1;
            todo.push_back(p.elems[i].arg);
          }
        }
      }
    }
    for (size_t r = 0; r < n; ++r) {
      if (reach[r] && !productive[r]) {
        return invalid_argument(describe(static_cast<uint32_t>(r)) +
                                " can never finish: no finite text matches it");
      }
    }
    // Left recursion: a cycle of rules each reachable at the start of the other (after a
    // nullable prefix). Depth-first search with colours, iterative.
    std::vector<std::vector<uint32_t>> left(n);
    for (size_t r = 0; r < n; ++r) {
      for (uint32_t a : p.rule_alts[r]) {
        auto [b, e] = alt_elems(a);
        for (size_t i = b; i < e; ++i) {
          if (p.elems[i].op != Op::kRef) break;
          left[r].push_back(p.elems[i].arg);
          if (!nullable[p.elems[i].arg]) break;
        }
      }
    }
    std::vector<uint8_t> colour(n, 0);  // 0 new, 1 on stack, 2 done
    for (size_t start = 0; start < n; ++start) {
      if (colour[start] || !reach[start]) continue;
      std::vector<std::pair<uint32_t, size_t>> st = {{static_cast<uint32_t>(start), 0}};
      colour[start] = 1;
      while (!st.empty()) {
        auto& [r, k] = st.back();
        if (k == left[r].size()) {
          colour[r] = 2;
          st.pop_back();
          continue;
        }
        uint32_t next = left[r][k++];
        if (colour[next] == 1) {
          return invalid_argument("left recursion in " + describe(next) +
                                  ": it can start with itself (rewrite it as a repetition, "
                                  "e.g. a ::= b (\"+\" b)*)");
        }
        if (colour[next] == 0) {
          colour[next] = 1;
          st.push_back({next, 0});
        }
      }
    }
    return Status::Ok();
  }

  const std::vector<RuleDef>& rules_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::string> names_;
  std::vector<std::string> origins_;
  std::vector<std::vector<Alt>> alts_;
  std::vector<int> n_helpers_;
  std::vector<uint32_t> owner_of_;  // helper rule -> user rule
  std::vector<detail::CharClass> classes_;
  std::map<std::string, uint32_t> class_ids_;
  size_t n_elems_ = 0;
};

}  // namespace

StatusOr<Grammar> GrammarBuilder::build(const std::string& root) const {
  Compiler c(rules_->list);
  auto p = c.compile(root);
  if (!p.ok()) return p.status();
  Grammar g;
  g.program_ = std::move(p.value());
  return g;
}

size_t Grammar::n_rules() const { return program_ ? program_->rule_alts.size() : 0; }

}  // namespace glm::grammar
