// Test doubles for the engine's text edges: a 64-token tokenizer and a role-token chat template,
// used with scheduler/fake_model.h by engine tests (src/engine, tests/engine_*). Header-only,
// test use only.
//
// Vocabulary: 0 <unk>, 1 </s> (eos), 2 <|user|>, 3 <|assistant|>, 4 <|system|> (control),
// 5-30 "a".."z", 31 " ", 32-41 "0".."9", 42 "\n", 43 " the", 44 "STOP", 45-58 "A".."N",
// 59-61 the three bytes of "你" alone, 62 "你", 63 "!".
// Template: per message <|role|> + encode(content); then <|assistant|>. Stops: </s>, <|user|>.
// FakeTokenizer(extra) appends pieces from id 64 on (constrained-decoding tests add JSON
// punctuation and pieces that cross its boundaries, such as "{\"" and "\":").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace glm::testing {

class FakeTokenizer : public tok::Tokenizer {
 public:
  explicit FakeTokenizer(const std::vector<std::string>& extra = {}) {
    pieces_ = {"<unk>", "</s>", "<|user|>", "<|assistant|>", "<|system|>"};
    for (char c = 'a'; c <= 'z'; ++c) pieces_.push_back(std::string(1, c));
    pieces_.push_back(" ");
    for (char c = '0'; c <= '9'; ++c) pieces_.push_back(std::string(1, c));
    pieces_.push_back("\n");
    pieces_.push_back(" the");
    pieces_.push_back("STOP");
    for (char c = 'A'; c <= 'N'; ++c) pieces_.push_back(std::string(1, c));
    pieces_.push_back("\xE4");
    pieces_.push_back("\xBD");
    pieces_.push_back("\xA0");
    pieces_.push_back("\xE4\xBD\xA0");
    pieces_.push_back("!");
    for (const std::string& p : extra) pieces_.push_back(p);
  }
  // Greedy longest match; unknown bytes are skipped.
  std::vector<int32_t> encode(std::string_view text, bool allow_special = false) const override {
    std::vector<int32_t> out;
    size_t i = 0;
    while (i < text.size()) {
      int best = -1;
      size_t best_len = 0;
      for (int id = allow_special ? 0 : kFirstText; id < n_vocab(); ++id) {
        const std::string& p = pieces_[id];
        if (p.size() > best_len && text.compare(i, p.size(), p) == 0) {
          best = id;
          best_len = p.size();
        }
      }
      if (best < 0) {
        ++i;
        continue;
      }
      out.push_back(best);
      i += best_len;
    }
    return out;
  }
  std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const override {
    std::string s;
    for (int32_t id : ids) {
      if (id >= 0 && id < n_vocab() && (render_special || !is_control(id))) s += pieces_[id];
    }
    return s;
  }
  std::string token_bytes(int32_t id) const override {
    return is_control(id) ? std::string() : pieces_[id];
  }
  int n_vocab() const override { return static_cast<int>(pieces_.size()); }
  int32_t find(std::string_view piece) const override {
    for (int id = 0; id < n_vocab(); ++id) {
      if (pieces_[id] == piece) return id;
    }
    return -1;
  }
  bool is_control(int32_t id) const override { return id >= 0 && id < kFirstText; }
  int32_t bos_id() const override { return -1; }
  int32_t eos_id() const override { return 1; }

 private:
  static constexpr int kFirstText = 5;
  std::vector<std::string> pieces_;
};

class FakeTemplate : public tok::ChatTemplate {
 public:
  explicit FakeTemplate(const tok::Tokenizer& tok) : tok_(tok) {}
  const char* name() const override { return "fake"; }
  StatusOr<std::vector<int32_t>> render(const std::vector<tok::Message>& messages) const override {
    std::vector<int32_t> out;
    for (const tok::Message& m : messages) {
      if (m.role == "system") {
        out.push_back(4);
      } else if (m.role == "user") {
        out.push_back(2);
      } else if (m.role == "assistant") {
        out.push_back(3);
      } else {
        return invalid_argument("unknown role '" + m.role + "'");
      }
      for (int32_t id : tok_.encode(m.content)) out.push_back(id);
    }
    out.push_back(3);
    return out;
  }
  std::vector<int32_t> stop_ids() const override { return {1, 2}; }

 private:
  const tok::Tokenizer& tok_;
};

}  // namespace glm::testing
