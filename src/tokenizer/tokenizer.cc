// Shared parts of the tokenizers: construction from GGUF, special tokens, decode, streaming.
#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "core/utf8.h"
#include "tokenizer/vocab_convert.h"
#include "tokenizer/vocab_tokenizer.h"

namespace glm::tok {

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const gguf::File& file) {
  StatusOr<VocabSpec> spec = read_vocab(file);
  if (!spec.ok()) return spec.status();
  return from_spec(*spec, file.path());
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::from_spec(const VocabSpec& spec,
                                                          const std::string& label) {
  if (spec.model == "llama") return SpmTokenizer::create(spec, label);
  if (spec.model == "t5") return UgmTokenizer::create(spec, label);
  if (spec.model == "gpt2") return BpeTokenizer::create(spec, label);
  return unsupported(label + ": tokenizer model '" + spec.model +
                     "' is not supported (expected llama, t5 or gpt2)");
}

bool is_answer_tag(std::string_view text) {
  static constexpr std::string_view kTags[] = {
      "<think>",          "</think>",  "<tool_call>", "</tool_call>", "<tool_response>",
      "</tool_response>", "<arg_key>", "</arg_key>",  "<arg_value>",  "</arg_value>"};
  return std::find(std::begin(kTags), std::end(kTags), text) != std::end(kTags);
}

void SpecialMatcher::add(const std::string& text, int32_t id) {
  if (text.empty()) return;
  auto& v = by_first_[static_cast<uint8_t>(text[0])];
  for (const auto& [s, i] : v) {
    if (s == text) return;  // first id wins
  }
  v.emplace_back(text, id);
  std::stable_sort(v.begin(), v.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  ++n_;
}

Status VocabTokenizer::init(const VocabSpec& spec, const std::string& label) {
  const size_t n = spec.tokens.size();
  if (n == 0) return bad_file(label + ": empty vocabulary");
  if (spec.types.size() != n) {
    return bad_file(label + ": " + std::to_string(spec.types.size()) + " token types for " +
                    std::to_string(n) + " tokens");
  }
  tokens_ = spec.tokens;
  types_ = spec.types;
  // The tags a reasoning or tool-calling answer is read by (GLM-4.5: <think>, <tool_call>,
  // <arg_key>...) are text of the answer even where a converter marked them control (llama.cpp's
  // follows the HF "special" flag, and its server keeps these tokens in GLM-4.5's output as
  // "preserved tokens"): they decode as text and a grammar may spell them.
  for (size_t i = 0; i < n; ++i) {
    if (types_[i] == kTokenControl && is_answer_tag(tokens_[i])) types_[i] = kTokenUserDefined;
  }
  index_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    index_.emplace(tokens_[i], static_cast<int32_t>(i));
    // Control and user-defined tokens are recognised in text when the caller allows it.
    if (types_[i] == kTokenControl || types_[i] == kTokenUserDefined) {
      specials_.add(tokens_[i], static_cast<int32_t>(i));
    }
  }
  bos_ = spec.bos;
  eos_ = spec.eos;
  unk_ = spec.unk;
  return Status::Ok();
}

std::vector<int32_t> VocabTokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 2 + 4);
  if (!allow_special || specials_.empty()) {
    if (!text.empty()) encode_text(text, true, &out);
    return out;
  }
  bool after_special = true;
  specials_.split(
      text,
      [&](std::string_view t) {
        encode_text(t, after_special, &out);
        after_special = false;
      },
      [&](int32_t id) {
        out.push_back(id);
        after_special = true;
      });
  return out;
}

bool VocabTokenizer::is_control(int32_t id) const {
  if (!valid(id)) return false;
  return types_[id] == kTokenControl || types_[id] == kTokenUnused;
}

int32_t VocabTokenizer::find(std::string_view piece) const {
  auto it = index_.find(piece);
  return it == index_.end() ? -1 : it->second;
}

std::string VocabTokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  std::string raw;
  bool first = true;
  for (int32_t id : ids) {
    if (!valid(id)) continue;
    if (is_control(id)) {
      if (render_special) raw += tokens_[id];
      continue;
    }
    raw += first ? token_bytes_at_start(id) : token_bytes(id);
    first = false;
  }
  return utf8_sanitize(raw);
}

// ---- StreamDecoder ---------------------------------------------------------------------------

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer) : tok_(tokenizer) {}

std::string StreamDecoder::push(int32_t id) {
  if (id < 0 || id >= tok_.n_vocab() || tok_.is_control(id)) return "";
  pending_ += first_ ? tok_.token_bytes_at_start(id) : tok_.token_bytes(id);
  first_ = false;
  const size_t n = utf8_complete_prefix(pending_);
  if (n == 0) return "";
  std::string out = utf8_sanitize(std::string_view(pending_).substr(0, n));
  pending_.erase(0, n);
  return strip(std::move(out));
}

std::string StreamDecoder::flush() {
  std::string out = utf8_sanitize(pending_);
  pending_.clear();
  return strip(std::move(out));
}

std::string StreamDecoder::strip(std::string s) {
  if (!strip_ws_) return s;
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  strip_ws_ = false;
  return s.substr(b);
}

size_t utf8_char_len(std::string_view s, size_t i) {
  const uint8_t c = static_cast<uint8_t>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
  if (i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<uint8_t>(s[i + k]) & 0xc0) != 0x80) return 1;
  }
  return n;
}

int parse_byte_piece(std::string_view p) {
  if (p.size() != 6 || p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(p[3]), lo = hex(p[4]);
  return (hi < 0 || lo < 0) ? -1 : hi * 16 + lo;
}

bool VocabTokenizer::is_text_piece(int32_t id) const {
  if (!valid(id)) return false;
  const int32_t t = types_[id];
  return t != kTokenByte && t != kTokenControl && t != kTokenUnused && t != kTokenUnknown;
}

std::string VocabTokenizer::sentencepiece_bytes(int32_t id) const {
  if (!valid(id)) return "";
  const std::string& p = tokens_[id];
  switch (types_[id]) {
    case kTokenByte: {
      const int b = parse_byte_piece(p);
      return b >= 0 ? std::string(1, static_cast<char>(b)) : std::string();
    }
    case kTokenControl:
    case kTokenUnused:
      return "";
    case kTokenUnknown:
      return " \xe2\x81\x87 ";  // sentencepiece's surface for <unk>: " ⁇ "
    default:
      break;
  }
  std::string out;
  out.reserve(p.size());
  for (size_t i = 0; i < p.size();) {
    if (p.compare(i, kSpaceMarker.size(), kSpaceMarker) == 0) {
      out.push_back(' ');
      i += kSpaceMarker.size();
    } else {
      out.push_back(p[i++]);
    }
  }
  return out;
}

std::string VocabTokenizer::sentencepiece_bytes_at_start(int32_t id, bool add_space_prefix) const {
  std::string s = sentencepiece_bytes(id);
  if (add_space_prefix && valid(id) &&
      tokens_[id].compare(0, kSpaceMarker.size(), kSpaceMarker) == 0 &&
      (types_[id] == kTokenNormal || types_[id] == kTokenUserDefined)) {
    s.erase(0, 1);
  }
  return s;
}

}  // namespace glm::tok
