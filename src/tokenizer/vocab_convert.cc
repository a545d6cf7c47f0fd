#include "tokenizer/vocab_convert.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "tokenizer/unicode.h"

namespace glm::tok {
namespace {

// ---- SentencePiece ModelProto: a minimal protobuf reader (only the fields we need) ----------
// ModelProto { repeated SentencePiece pieces = 1; TrainerSpec trainer_spec = 2;
//              NormalizerSpec normalizer_spec = 3; }
// SentencePiece { string piece = 1; float score = 2; Type type = 3 [default NORMAL]; }
// TrainerSpec { ModelType model_type = 3 [default UNIGRAM]; }  (UNIGRAM 1, BPE 2, WORD 3, CHAR 4)
// NormalizerSpec { string name = 1; bytes precompiled_charsmap = 2; bool add_dummy_prefix = 3;
//                  bool remove_extra_whitespaces = 4 [default true]; }
class ProtoReader {
 public:
  ProtoReader(std::string_view data) : p_(data.data()), end_(data.data() + data.size()) {}
  bool done() const { return p_ >= end_; }
  bool varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) return false;
      uint8_t b = static_cast<uint8_t>(*p_++);
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  // Reads one field key; wire type in *wt.
  bool key(uint32_t* field, uint32_t* wt) {
    uint64_t k;
    if (!varint(&k)) return false;
    *field = static_cast<uint32_t>(k >> 3);
    *wt = static_cast<uint32_t>(k & 7);
    return true;
  }
  bool bytes(std::string_view* out) {
    uint64_t n;
    if (!varint(&n) || n > static_cast<uint64_t>(end_ - p_)) return false;
    *out = std::string_view(p_, n);
    p_ += n;
    return true;
  }
  bool fixed32(uint32_t* v) {
    if (end_ - p_ < 4) return false;
    std::memcpy(v, p_, 4);
    p_ += 4;
    return true;
  }
  bool skip(uint32_t wt) {
    uint64_t v;
    std::string_view s;
    uint32_t f;
    switch (wt) {
      case 0:
        return varint(&v);
      case 1:
        if (end_ - p_ < 8) return false;
        p_ += 8;
        return true;
      case 2:
        return bytes(&s);
      case 5:
        return fixed32(&f);
      default:
        return false;
    }
  }

 private:
  const char* p_;
  const char* end_;
};

struct SpPiece {
  std::string piece;
  float score = 0;
  int32_t type = kTokenNormal;
};

// What the tokenizer needs from a ModelProto besides its pieces.
struct SpOptions {
  int model_type = 1;  // UNIGRAM (the protobuf default)
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  std::string charsmap;  // precompiled_charsmap (empty: identity)
};

Status parse_sentencepiece(std::string_view data, const std::string& label,
                           std::vector<SpPiece>* pieces, SpOptions* opt) {
  ProtoReader r(data);
  *opt = SpOptions();
  auto err = [&] { return bad_file(label + ": malformed sentencepiece model (protobuf)"); };
  while (!r.done()) {
    uint32_t field, wt;
    if (!r.key(&field, &wt)) return err();
    if (field == 1 && wt == 2) {
      std::string_view msg;
      if (!r.bytes(&msg)) return err();
      ProtoReader pr(msg);
      SpPiece p;
      while (!pr.done()) {
        uint32_t f, w;
        if (!pr.key(&f, &w)) return err();
        if (f == 1 && w == 2) {
          std::string_view s;
          if (!pr.bytes(&s)) return err();
          p.piece = std::string(s);
        } else if (f == 2 && w == 5) {
          uint32_t bits;
          if (!pr.fixed32(&bits)) return err();
          std::memcpy(&p.score, &bits, 4);
        } else if (f == 3 && w == 0) {
          uint64_t t;
          if (!pr.varint(&t)) return err();
          p.type = static_cast<int32_t>(t);
        } else if (!pr.skip(w)) {
          return err();
        }
      }
      if (p.type < 1 || p.type > 6) return err();
      pieces->push_back(std::move(p));
    } else if (field == 2 && wt == 2) {
      std::string_view msg;
      if (!r.bytes(&msg)) return err();
      ProtoReader tr(msg);
      while (!tr.done()) {
        uint32_t f, w;
        if (!tr.key(&f, &w)) return err();
        if (f == 3 && w == 0) {
          uint64_t v;
          if (!tr.varint(&v)) return err();
          opt->model_type = static_cast<int>(v);
        } else if (!tr.skip(w)) {
          return err();
        }
      }
    } else if (field == 3 && wt == 2) {
      std::string_view msg;
      if (!r.bytes(&msg)) return err();
      ProtoReader nr(msg);
      while (!nr.done()) {
        uint32_t f, w;
        if (!nr.key(&f, &w)) return err();
        if ((f == 3 || f == 4) && w == 0) {
          uint64_t v;
          if (!nr.varint(&v)) return err();
          (f == 3 ? opt->add_dummy_prefix : opt->remove_extra_whitespaces) = v != 0;
        } else if (f == 2 && w == 2) {
          std::string_view map;
          if (!nr.bytes(&map)) return err();
          opt->charsmap = std::string(map);
        } else if (!nr.skip(w)) {
          return err();
        }
      }
    } else if (!r.skip(wt)) {
      return err();
    }
  }
  if (pieces->empty()) return err();
  return Status::Ok();
}

constexpr int kChatGlm1Pieces = 130344;  // ice_text.model of THUDM/chatglm-6b
constexpr int kChatGlm1Vocab = 130528;   // its config.json vocab_size (embedding rows)
constexpr int kSpUnigram = 1;            // TrainerSpec.ModelType

// The ChatGLM3-6B tokenizer_config.json template, as llama.cpp's converter copies it.
const char kChatGlm3Template[] =
    "{% for message in messages %}{% if loop.first %}[gMASK]sop<|{{ message['role'] }}|>\n "
    "{{ message['content'] }}{% else %}<|{{ message['role'] }}|>\n {{ message['content'] }}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}";

// ChatGLM-6B (v1) ice_text.model: a unigram model whose pieces include the whitespace tokens
// and its specials. Returns the id of `piece`, or -1.
int32_t piece_id(const std::vector<SpPiece>& pieces, std::string_view piece) {
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].piece == piece) return static_cast<int32_t>(i);
  }
  return -1;
}

bool is_chatglm1_layout(const std::vector<SpPiece>& pieces) {
  for (const char* p :
       {"<n>", "<|tab|>", "<|blank_2|>", "<|blank_80|>", "[gMASK]", "<sop>", "<eop>"}) {
    if (piece_id(pieces, p) < 0) return false;
  }
  return true;
}

// The v1 layout (docs/models.md "ChatGLM-6B tokenizer"): llama.cpp's unigram type "t5", pre
// "chatglm1" (the <n> / <|tab|> / <|blank_N|> text rules), eos <eop>, bos <sop>, the real
// file's 130344 pieces padded to the embedding's 130528 rows.
void make_chatglm1_spec(const std::vector<SpPiece>& pieces, VocabSpec* s) {
  s->pre = "chatglm1";
  s->eos = piece_id(pieces, "<eop>");
  s->bos = piece_id(pieces, "<sop>");
  s->pad = piece_id(pieces, "<pad>");
  s->add_bos = false;
  if (static_cast<int>(pieces.size()) == kChatGlm1Pieces) {
    while (static_cast<int>(s->tokens.size()) < kChatGlm1Vocab) {
      s->tokens.push_back("[PAD" + std::to_string(s->tokens.size()) + "]");
      s->scores.push_back(0.0f);
      s->types.push_back(kTokenUnused);
    }
  }
}

StatusOr<VocabSpec> spec_from_sentencepiece(std::string_view data, const std::string& label) {
  std::vector<SpPiece> pieces;
  SpOptions opt;
  GLM_RETURN_IF_ERROR(parse_sentencepiece(data, label, &pieces, &opt));
  VocabSpec s;
  s.model = opt.model_type == kSpUnigram ? "t5" : "llama";
  for (const SpPiece& p : pieces) {
    s.tokens.push_back(p.piece);
    s.scores.push_back(p.score);
    s.types.push_back(p.type);
  }
  if (s.model == "t5") {
    s.precompiled_charsmap = opt.charsmap;
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (pieces[i].type == kTokenUnknown && s.unk < 0) s.unk = static_cast<int32_t>(i);
    }
    s.remove_extra_whitespaces = opt.remove_extra_whitespaces;
    s.add_space_prefix = opt.add_dummy_prefix;
    if (is_chatglm1_layout(pieces)) {
      make_chatglm1_spec(pieces, &s);
    } else {
      s.eos = piece_id(pieces, "</s>");
      s.bos = piece_id(pieces, "<s>");
    }
    return s;
  }
  if (static_cast<int>(pieces.size()) == kChatGlmPieces) {
    // ChatGLM2/3: llama.cpp's set_vocab_chatglm3 layout.
    s.pre = "chatglm-spm";
    s.tokens[1] = "<bos>";
    s.tokens[2] = "<eos>";
    for (const char* sp : kChatGlmSpecials) {
      s.tokens.push_back(sp);
      s.scores.push_back(0.0f);
      s.types.push_back(kTokenControl);
    }
    while (static_cast<int>(s.tokens.size()) < kChatGlmVocab) {
      s.tokens.push_back("[PAD" + std::to_string(s.tokens.size()) + "]");
      s.scores.push_back(0.0f);
      s.types.push_back(kTokenUnused);
    }
    s.eos = 2;
    s.pad = 0;
    s.chat_template = kChatGlm3Template;
    s.add_bos = false;
  } else {
    // A plain LLaMA-style sentencepiece model.
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (pieces[i].type == kTokenUnknown && s.unk < 0) s.unk = static_cast<int32_t>(i);
      if (pieces[i].piece == "<s>") s.bos = static_cast<int32_t>(i);
      if (pieces[i].piece == "</s>") s.eos = static_cast<int32_t>(i);
    }
    s.add_bos = true;
  }
  s.add_space_prefix = opt.add_dummy_prefix;
  return s;
}

// ---- tiktoken -------------------------------------------------------------------------------

int b64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool b64_decode(std::string_view in, std::string* out) {
  out->clear();
  uint32_t acc = 0;
  int bits = 0;
  size_t i = 0;
  for (; i < in.size() && in[i] != '='; ++i) {
    int v = b64_value(in[i]);
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  for (; i < in.size(); ++i) {
    if (in[i] != '=') return false;
  }
  return !out->empty();
}

bool looks_like_tiktoken(std::string_view data) {
  size_t nl = data.find('\n');
  std::string_view line = data.substr(0, nl == std::string_view::npos ? data.size() : nl);
  size_t sp = line.find(' ');
  if (sp == std::string_view::npos || sp == 0) return false;
  for (size_t i = 0; i < sp; ++i) {
    if (b64_value(line[i]) < 0 && line[i] != '=') return false;
  }
  for (size_t i = sp + 1; i < line.size(); ++i) {
    if (line[i] < '0' || line[i] > '9') return false;
  }
  return sp + 1 < line.size();
}

std::string bytes_to_gpt2(std::string_view bytes) {
  std::string out;
  for (char c : bytes) out += byte_to_unicode(static_cast<uint8_t>(c));
  return out;
}

StatusOr<VocabSpec> spec_from_tiktoken(std::string_view data, const std::string& label) {
  std::vector<std::string> by_rank;
  std::unordered_map<std::string, int32_t> rank_of;
  size_t pos = 0;
  int line_no = 0;
  std::string tok;
  while (pos < data.size()) {
    size_t nl = data.find('\n', pos);
    if (nl == std::string_view::npos) nl = data.size();
    std::string_view line = data.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos || !b64_decode(line.substr(0, sp), &tok)) {
      return bad_file(label + ": line " + std::to_string(line_no) +
                      ": expected 'base64 rank' (tiktoken format)");
    }
    long rank = std::strtol(std::string(line.substr(sp + 1)).c_str(), nullptr, 10);
    if (rank != static_cast<long>(by_rank.size())) {
      return bad_file(label + ": line " + std::to_string(line_no) + ": rank " +
                      std::to_string(rank) + " out of order (expected " +
                      std::to_string(by_rank.size()) + ")");
    }
    if (!rank_of.emplace(tok, static_cast<int32_t>(rank)).second) {
      return bad_file(label + ": line " + std::to_string(line_no) + ": duplicate token");
    }
    by_rank.push_back(tok);
  }
  VocabSpec s;
  s.model = "gpt2";
  const int n_ranks = static_cast<int>(by_rank.size());
  for (const std::string& t : by_rank) {
    s.tokens.push_back(bytes_to_gpt2(t));
    s.types.push_back(kTokenNormal);
  }
  // Merges, as transformers' TikTokenConverter derives them.
  struct Merge {
    int32_t rank, left, right;
    size_t split;
  };
  std::vector<Merge> merges;
  for (int32_t r = 0; r < n_ranks; ++r) {
    const std::string& t = by_rank[r];
    for (size_t i = 1; i < t.size(); ++i) {
      auto l = rank_of.find(t.substr(0, i));
      if (l == rank_of.end()) continue;
      auto rt = rank_of.find(t.substr(i));
      if (rt == rank_of.end()) continue;
      merges.push_back({r, l->second, rt->second, i});
    }
  }
  std::sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    if (a.rank != b.rank) return a.rank < b.rank;
    if (a.left != b.left) return a.left < b.left;
    return a.right < b.right;
  });
  s.merges.reserve(merges.size());
  for (const Merge& m : merges) {
    s.merges.push_back(s.tokens[m.left] + " " + s.tokens[m.right]);
  }
  if (n_ranks == kGlm4Ranks) {
    s.pre = "chatglm-bpe";
    for (const char* sp : kGlm4Specials) {
      s.tokens.push_back(sp);
      s.types.push_back(kTokenControl);
    }
    while (static_cast<int>(s.tokens.size()) < kGlm4Vocab) {
      s.tokens.push_back("[PAD" + std::to_string(s.tokens.size()) + "]");
      s.types.push_back(kTokenUnused);
    }
    s.eos = kGlm4Ranks;  // <|endoftext|>
    s.pad = kGlm4Ranks;
    s.unk = kGlm4Ranks;
    s.eot = kGlm4Ranks + 7;  // <|user|>
  }
  s.add_bos = false;
  return s;
}

}  // namespace

StatusOr<VocabSpec> parse_tokenizer_model(const std::string& bytes, const std::string& label) {
  if (bytes.empty()) return bad_file(label + ": empty tokenizer file");
  if (looks_like_tiktoken(bytes)) return spec_from_tiktoken(bytes, label);
  // A sentencepiece ModelProto starts with field 1 (pieces), length-delimited: byte 0x0a.
  if (static_cast<uint8_t>(bytes[0]) == 0x0a) return spec_from_sentencepiece(bytes, label);
  return bad_file(label +
                  ": not a tokenizer.model (expected a sentencepiece protobuf or tiktoken "
                  "'base64 rank' lines)");
}

StatusOr<VocabSpec> read_tokenizer_model(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path + ": cannot open tokenizer file (check the path)");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_tokenizer_model(ss.str(), path);
}

Status to_chatglm2_vocab(VocabSpec* s) {
  if (s->model != "llama" || static_cast<int>(s->tokens.size()) != kChatGlmVocab ||
      s->tokens[kChatGlmPieces + 6] != "<|user|>") {
    return invalid_argument("to_chatglm2_vocab: not a ChatGLM3 vocabulary");
  }
  for (int i = kChatGlmPieces + 5; i < kChatGlmPieces + 9; ++i) {
    s->tokens[i] = "[PAD" + std::to_string(i) + "]";
    s->types[i] = kTokenUnused;
  }
  s->chat_template.clear();
  return Status::Ok();
}

void write_vocab(const VocabSpec& spec, gguf::Writer* w) {
  if (spec.write_add_bos)
    w->set("tokenizer.ggml.add_bos_token", gguf::Value::boolean(spec.add_bos));
  w->set("tokenizer.ggml.model", gguf::Value::string(spec.model));
  if (!spec.pre.empty()) w->set("tokenizer.ggml.pre", gguf::Value::string(spec.pre));
  w->set("tokenizer.ggml.tokens", gguf::Value::string_array(spec.tokens));
  if (!spec.scores.empty()) w->set("tokenizer.ggml.scores", gguf::Value::f32_array(spec.scores));
  w->set("tokenizer.ggml.token_type", gguf::Value::i32_array(spec.types));
  if (!spec.merges.empty()) {
    w->set("tokenizer.ggml.merges", gguf::Value::string_array(spec.merges));
  }
  if (!spec.precompiled_charsmap.empty()) {
    std::vector<gguf::Value> bytes;
    bytes.reserve(spec.precompiled_charsmap.size());
    for (char c : spec.precompiled_charsmap)
      bytes.push_back(gguf::Value::u8(static_cast<uint8_t>(c)));
    w->set("tokenizer.ggml.precompiled_charsmap",
           gguf::Value::array(gguf::ValueType::kUint8, std::move(bytes)));
  }
  if (spec.remove_extra_whitespaces) {
    w->set("tokenizer.ggml.remove_extra_whitespaces", gguf::Value::boolean(true));
  }
  if (!spec.add_space_prefix) {
    w->set("tokenizer.ggml.add_space_prefix", gguf::Value::boolean(false));
  }
  auto id = [&](const char* key, int32_t v) {
    if (v >= 0) w->set(key, gguf::Value::u32(static_cast<uint32_t>(v)));
  };
  id("tokenizer.ggml.bos_token_id", spec.bos);
  id("tokenizer.ggml.eos_token_id", spec.eos);
  id("tokenizer.ggml.unknown_token_id", spec.unk);
  id("tokenizer.ggml.padding_token_id", spec.pad);
  id("tokenizer.ggml.eot_token_id", spec.eot);
  if (!spec.chat_template.empty()) {
    w->set("tokenizer.chat_template", gguf::Value::string(spec.chat_template));
  }
}

StatusOr<VocabSpec> read_vocab(const gguf::File& f) {
  VocabSpec s;
  const std::string& label = f.path();
  auto model = f.get_string("tokenizer.ggml.model");
  if (!model.ok()) {
    return bad_file(label +
                    ": no tokenizer in this file (tokenizer.ggml.model missing); "
                    "convert it with a vocabulary (gen-model --vocab / convert)");
  }
  s.model = *model;
  if (s.model != "llama" && s.model != "gpt2" && s.model != "t5") {
    return unsupported(label + ": tokenizer model '" + s.model +
                       "' is not supported (expected llama, t5 or gpt2)");
  }
  if (auto pre = f.get_string("tokenizer.ggml.pre"); pre.ok()) s.pre = *pre;
  const gguf::Value* toks = f.find("tokenizer.ggml.tokens");
  if (!toks || toks->type() != gguf::ValueType::kArray ||
      toks->array_type() != gguf::ValueType::kString || toks->strings().empty()) {
    return bad_file(label + ": tokenizer.ggml.tokens missing or not a string array");
  }
  s.tokens = toks->strings();
  const size_t n = s.tokens.size();
  if (const gguf::Value* v = f.find("tokenizer.ggml.scores")) {
    if (v->type() != gguf::ValueType::kArray || v->array_size() != n) {
      return bad_file(label + ": tokenizer.ggml.scores has the wrong length or type");
    }
    s.scores = v->floats();
    if (s.scores.size() != n) return bad_file(label + ": tokenizer.ggml.scores is not numeric");
  }
  if (const gguf::Value* v = f.find("tokenizer.ggml.token_type")) {
    if (v->type() != gguf::ValueType::kArray || v->array_size() != n) {
      return bad_file(label + ": tokenizer.ggml.token_type has the wrong length or type");
    }
    std::vector<int64_t> t = v->ints();
    if (t.size() != n) return bad_file(label + ": tokenizer.ggml.token_type is not integer");
    s.types.assign(t.begin(), t.end());
  } else {
    s.types.assign(n, kTokenNormal);
  }
  if (const gguf::Value* v = f.find("tokenizer.ggml.merges")) {
    if (v->type() != gguf::ValueType::kArray || v->array_type() != gguf::ValueType::kString) {
      return bad_file(label + ": tokenizer.ggml.merges is not a string array");
    }
    s.merges = v->strings();
  }
  auto id = [&](const char* key, int32_t* out) -> Status {
    auto v = f.get_int_or(key, -1);
    if (!v.ok()) return v.status();
    int64_t x = *v;
    // 0xFFFFFFFF (written as u32 "none") and out-of-range ids mean "no such token".
    *out = (x >= 0 && x < static_cast<int64_t>(n)) ? static_cast<int32_t>(x) : -1;
    return Status::Ok();
  };
  GLM_RETURN_IF_ERROR(id("tokenizer.ggml.bos_token_id", &s.bos));
  GLM_RETURN_IF_ERROR(id("tokenizer.ggml.eos_token_id", &s.eos));
  GLM_RETURN_IF_ERROR(id("tokenizer.ggml.unknown_token_id", &s.unk));
  GLM_RETURN_IF_ERROR(id("tokenizer.ggml.padding_token_id", &s.pad));
  GLM_RETURN_IF_ERROR(id("tokenizer.ggml.eot_token_id", &s.eot));
  if (auto t = f.get_string("tokenizer.chat_template"); t.ok()) s.chat_template = *t;
  if (const gguf::Value* v = f.find("tokenizer.ggml.add_bos_token")) {
    s.write_add_bos = true;
    s.add_bos = v->type() == gguf::ValueType::kBool ? v->as_bool() : false;
  } else {
    s.write_add_bos = false;
    s.add_bos = s.model == "llama";
  }
  if (const gguf::Value* v = f.find("tokenizer.ggml.add_space_prefix")) {
    if (v->type() == gguf::ValueType::kBool) s.add_space_prefix = v->as_bool();
  }
  if (const gguf::Value* v = f.find("tokenizer.ggml.remove_extra_whitespaces")) {
    if (v->type() == gguf::ValueType::kBool) s.remove_extra_whitespaces = v->as_bool();
  }
  if (const gguf::Value* v = f.find("tokenizer.ggml.precompiled_charsmap")) {
    if (v->type() != gguf::ValueType::kArray ||
        (v->array_type() != gguf::ValueType::kUint8 && v->array_type() != gguf::ValueType::kInt8)) {
      return bad_file(label + ": tokenizer.ggml.precompiled_charsmap is not a byte array");
    }
    for (int64_t b : v->ints()) s.precompiled_charsmap.push_back(static_cast<char>(b));
  }
  return s;
}

// ---- GPT-2 byte <-> unicode -------------------------------------------------------------------

namespace {
struct ByteMap {
  std::array<std::string, 256> to_utf8;
  std::array<int16_t, 512> from_cp;  // code points < 512 only
  ByteMap() {
    from_cp.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + extra++);
      to_utf8[b] = utf8_encode(cp);
      from_cp[cp] = static_cast<int16_t>(b);
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}
}  // namespace

const std::string& byte_to_unicode(uint8_t b) { return byte_map().to_utf8[b]; }

int unicode_to_byte(uint32_t cp) { return cp < 512 ? byte_map().from_cp[cp] : -1; }

}  // namespace glm::tok
