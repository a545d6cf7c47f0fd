// libFuzzer target: an arbitrary id stream through StreamDecoder. No crash, every piece valid
// UTF-8, and the pieces concatenate to decode(ids).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/utf8.h"
#include "tokenizer/fuzz_vocab.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace glm::tok;
  if (size == 0) return 0;
  const auto& toks = fuzz::tokenizers();
  const Tokenizer& tok = *toks[data[0] % toks.size()];
  std::vector<int32_t> ids;
  for (size_t i = 1; i + 1 < size; i += 2) {
    // Mostly valid ids, sometimes out of range (ignored by both paths).
    int32_t id = static_cast<int32_t>(data[i] | (data[i + 1] << 8));
    ids.push_back(id % (tok.n_vocab() + 3) - 1);
  }
  StreamDecoder dec(tok);
  std::string streamed;
  for (int32_t id : ids) {
    std::string piece = dec.push(id);
    if (!glm::utf8_valid(piece)) std::abort();
    streamed += piece;
  }
  std::string tail = dec.flush();
  if (!glm::utf8_valid(tail)) std::abort();
  streamed += tail;
  if (streamed != tok.decode(ids)) std::abort();
  return 0;
}
