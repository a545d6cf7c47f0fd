#include "generation/speculation.h"

namespace glm::generation {
namespace {

struct SpecName {
  SpecMode mode;
  const char* name;
};
constexpr SpecName kSpecNames[] = {
    {SpecMode::kOff, "off"},
    {SpecMode::kNgram, "ngram"},
    {SpecMode::kDraft, "draft"},
    {SpecMode::kMtp, "mtp"},
};

}  // namespace

const char* spec_mode_name(SpecMode m) {
  for (const SpecName& n : kSpecNames) {
    if (n.mode == m) return n.name;
  }
  return "off";  // unreachable for a valid enum value
}

std::optional<SpecMode> parse_spec_mode(std::string_view name) {
  for (const SpecName& n : kSpecNames) {
    if (name == n.name) return n.mode;
  }
  return std::nullopt;
}

}  // namespace glm::generation
