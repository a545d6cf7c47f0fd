#include "core/json.h"

namespace glm {
namespace {

Status check_limits(std::string_view text, const char* what, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return invalid_argument(std::string(what) + " is " + std::to_string(text.size()) +
                            " bytes; the limit is " + std::to_string(limits.max_bytes));
  }
  if (json_nesting_depth(text, limits.max_depth) > limits.max_depth) {
    return invalid_argument(std::string(what) + ": JSON nested deeper than " +
                            std::to_string(limits.max_depth) + " levels");
  }
  return Status::Ok();
}

template <class Json>
StatusOr<Json> parse(std::string_view text, const char* what, const JsonLimits& limits) {
  GLM_RETURN_IF_ERROR(check_limits(text, what, limits));
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument(std::string(what) + " is not valid JSON");
  return j;
}

}  // namespace

int json_nesting_depth(std::string_view s, int limit) {
  int depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) max_depth = depth;
      if (max_depth > limit) return max_depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

namespace {
thread_local int64_t t_json_parses = 0;
}  // namespace

int64_t json_parses() { return t_json_parses; }

StatusOr<nlohmann::json> parse_json(std::string_view text, const char* what,
                                    const JsonLimits& limits) {
  ++t_json_parses;
  return parse<nlohmann::json>(text, what, limits);
}

StatusOr<nlohmann::ordered_json> parse_ordered_json(std::string_view text, const char* what,
                                                    const JsonLimits& limits) {
  ++t_json_parses;
  return parse<nlohmann::ordered_json>(text, what, limits);
}

nlohmann::json json_byte_array(std::string_view bytes) {
  nlohmann::json out = nlohmann::json::array();
  for (unsigned char c : bytes) out.push_back(static_cast<int>(c));
  return out;
}

}  // namespace glm
