#include "generation/tool_delta.h"

namespace glm::generation {

namespace {

constexpr ToolDelta::Kind kKinds[] = {ToolDelta::Kind::kContent, ToolDelta::Kind::kCallStart,
                                      ToolDelta::Kind::kArguments, ToolDelta::Kind::kCutCall};

}  // namespace

const char* tool_delta_kind_name(ToolDelta::Kind k) {
  switch (k) {
    case ToolDelta::Kind::kContent:
      return "content";
    case ToolDelta::Kind::kCallStart:
      return "call";
    case ToolDelta::Kind::kArguments:
      return "args";
    case ToolDelta::Kind::kCutCall:
      return "cut_call";
  }
  return "content";
}

bool parse_tool_delta_kind(const std::string& name, ToolDelta::Kind* k) {
  for (ToolDelta::Kind kind : kKinds) {
    if (name == tool_delta_kind_name(kind)) {
      *k = kind;
      return true;
    }
  }
  return false;
}

}  // namespace glm::generation
