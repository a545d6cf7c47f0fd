// Speculative decoding's switch and counts (docs/engine.md#speculative-decoding): the mode an
// engine runs with (--spec), with one name table, and the drafted / accepted token counts that
// travel from the scheduler through the engine's done event and the socket protocol to the
// gateway's /metrics. Pure value types; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace glm::generation {

enum class SpecMode {
  kOff,
  kNgram,  // model-free drafts: the tokens that followed the last n-gram earlier in the sequence
  kDraft,  // a draft model (--draft M.gguf)
  kMtp,    // the model's own multi-token-prediction block (GLM-4.5's nextn)
};
// "off", "ngram", "draft", "mtp".
const char* spec_mode_name(SpecMode m);
std::optional<SpecMode> parse_spec_mode(std::string_view name);

// One request's (or one engine's, summed) speculation: tokens proposed to the target model and
// tokens of those it accepted (each accepted token saved one forward pass of the sequence).
struct Speculation {
  int64_t drafted = 0;
  int64_t accepted = 0;
  bool operator==(const Speculation&) const = default;
};

}  // namespace glm::generation
