// libFuzzer target over the GBNF parser and the JSON Schema converter: any input either
// compiles or returns a one-line error, never crashes or hangs; a compiled grammar is then
// run over a few bytes of the input (matcher without a vocabulary).
// The first byte picks the front end: even = GBNF text, odd = JSON schema.
// Build: CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DGLM_FUZZ=ON
//        cmake --build build-fuzz --target grammar_fuzz && build-fuzz/src/grammar/grammar_fuzz
//        -max_len=2048
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const bool gbnf = data[0] % 2 == 0;
  nlohmann::ordered_json schema;
  if (!gbnf) {
    schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (schema.is_discarded()) return 0;
  }
  glm::StatusOr<glm::grammar::Grammar> g =
      gbnf ? glm::grammar::parse_gbnf(text) : glm::grammar::json_schema_to_grammar(schema);
  if (!g.ok()) {
    if (g.status().message().find('\n') != std::string::npos) std::abort();
    return 0;
  }
  // The printed form must compile again.
  if (!glm::grammar::parse_gbnf(g->to_gbnf()).ok()) std::abort();
  glm::grammar::Matcher m(*g, nullptr);
  for (size_t i = 0; i < text.size() && i < 64; ++i) {
    if (!m.accept_bytes(text.substr(i, 1)).ok()) break;
  }
  return 0;
}
