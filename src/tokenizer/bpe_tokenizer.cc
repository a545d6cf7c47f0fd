// Byte-level BPE ("gpt2" vocabularies; GLM-4): GLM-4's pre-tokenizer cuts the text into
// pieces; a piece that is a token is that token (tiktoken's shortcut); otherwise its bytes are
// merged pairwise, lowest merge rank first (leftmost on ties), using tokenizer.ggml.merges.
#include <algorithm>

#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab_tokenizer.h"

namespace glm::tok {
namespace {

// GPT-2 byte-to-unicode text -> raw bytes; false if a character is not a mapped byte.
bool gpt2_to_bytes(std::string_view s, std::string* out) {
  out->clear();
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = utf8_next(s, &i);
    int b = (cp & kInvalidByteFlag) ? -1 : unicode_to_byte(cp);
    if (b < 0) return false;
    out->push_back(static_cast<char>(b));
  }
  return true;
}

constexpr size_t kCacheMaxEntries = 1 << 16;
constexpr size_t kCacheMaxPieceBytes = 256;

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> BpeTokenizer::create(const VocabSpec& spec,
                                                          const std::string& label) {
  if (!spec.pre.empty() && spec.pre != "chatglm-bpe" && spec.pre != "glm4") {
    return unsupported(label + ": byte-level BPE pre-tokenizer '" + spec.pre +
                       "' is not supported (only chatglm-bpe and glm4: GLM-4)");
  }
  auto t = std::unique_ptr<BpeTokenizer>(new BpeTokenizer());
  GLM_RETURN_IF_ERROR(t->init(spec, label));
  const size_t n = spec.tokens.size();
  t->bytes_.resize(n);
  t->byte_ids_.fill(-1);
  t->raw_index_.reserve(n);
  std::string raw;
  for (size_t i = 0; i < n; ++i) {
    const int32_t type = spec.types[i];
    if (type != kTokenNormal && type != kTokenByte) continue;
    if (!gpt2_to_bytes(spec.tokens[i], &raw) || raw.empty()) continue;
    t->bytes_[i] = raw;
    t->raw_index_.emplace(raw, static_cast<int32_t>(i));
    if (raw.size() == 1 && t->byte_ids_[static_cast<uint8_t>(raw[0])] < 0) {
      t->byte_ids_[static_cast<uint8_t>(raw[0])] = static_cast<int32_t>(i);
    }
  }
  for (int b = 0; b < 256; ++b) {
    if (t->byte_ids_[b] < 0) {
      return bad_file(label + ": byte-level vocabulary has no token for byte " + std::to_string(b) +
                      " (is tokenizer.ggml.tokens complete?)");
    }
  }
  t->merges_.reserve(spec.merges.size());
  int32_t rank = 0;
  std::string both_text;
  for (const std::string& m : spec.merges) {
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos) {
      return bad_file(label + ": malformed merge '" + m + "' (expected 'left right')");
    }
    std::string_view left(m.data(), sp), right(m.data() + sp + 1, m.size() - sp - 1);
    auto l = t->index_.find(left), r = t->index_.find(right);
    both_text.assign(left);
    both_text.append(right);
    auto both = t->index_.find(both_text);
    if (l == t->index_.end() || r == t->index_.end() || both == t->index_.end()) {
      return bad_file(label + ": merge '" + m + "' names a token that is not in the vocabulary");
    }
    const uint64_t key =
        (static_cast<uint64_t>(l->second) << 32) | static_cast<uint32_t>(r->second);
    t->merges_.emplace(key, MergeInfo{rank++, both->second});
  }
  return std::unique_ptr<Tokenizer>(std::move(t));
}

void BpeTokenizer::encode_text(std::string_view text, bool, std::vector<int32_t>* out) const {
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = glm4_piece_end(text, pos);
    encode_piece(text.substr(pos, end - pos), out);
    pos = end;
  }
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>* out) const {
  if (auto it = raw_index_.find(piece); it != raw_index_.end()) {
    out->push_back(it->second);
    return;
  }
  const bool cacheable = piece.size() <= kCacheMaxPieceBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (auto it = cache_.find(piece); it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  struct Symbol {
    int32_t id;
    int32_t prev, next;
  };
  struct Candidate {
    int32_t rank;
    int32_t left;
    int32_t left_id, right_id;  // to detect stale entries
    int32_t merged_id;
  };
  thread_local std::vector<Symbol> sym;
  thread_local std::vector<Candidate> heap;
  sym.clear();
  heap.clear();
  const int32_t n = static_cast<int32_t>(piece.size());
  for (int32_t i = 0; i < n; ++i) {
    sym.push_back({byte_ids_[static_cast<uint8_t>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1});
  }
  auto worse = [](const Candidate& a, const Candidate& b) {
    if (a.rank != b.rank) return a.rank > b.rank;
    return a.left > b.left;
  };
  auto try_add = [&](int32_t l) {
    if (l < 0 || sym[l].next < 0) return;
    const int32_t r = sym[l].next;
    const uint64_t key =
        (static_cast<uint64_t>(sym[l].id) << 32) | static_cast<uint32_t>(sym[r].id);
    auto it = merges_.find(key);
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, l, sym[l].id, sym[r].id, it->second.id});
    std::push_heap(heap.begin(), heap.end(), worse);
  };
  for (int32_t i = 0; i + 1 < n; ++i) try_add(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), worse);
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& l = sym[c.left];
    if (l.id != c.left_id || l.next < 0 || sym[l.next].id != c.right_id) continue;  // stale
    Symbol& r = sym[l.next];
    l.id = c.merged_id;
    r.id = -1;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    try_add(l.prev);
    try_add(c.left);
  }
  const size_t first = out->size();
  for (int32_t i = 0; i >= 0; i = sym[i].next) out->push_back(sym[i].id);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (cache_.size() >= kCacheMaxEntries) cache_.clear();
    cache_.emplace(std::string(piece), std::vector<int32_t>(out->begin() + first, out->end()));
  }
}

std::string BpeTokenizer::token_bytes(int32_t id) const {
  if (!valid(id)) return "";
  if (types_[id] == kTokenControl || types_[id] == kTokenUnused) return "";
  if (!bytes_[id].empty()) return bytes_[id];
  return tokens_[id];  // user-defined or unmappable text: as written
}

}  // namespace glm::tok
