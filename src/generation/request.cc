#include "generation/request.h"

namespace glm::generation {

const nlohmann::ordered_json& SharedJson::operator*() const {
  static const nlohmann::ordered_json kNull;
  return value_ != nullptr ? *value_ : kNull;
}

std::vector<std::string> tool_names(const nlohmann::ordered_json& functions) {
  std::vector<std::string> names;
  if (!functions.is_array()) return names;
  for (const auto& f : functions) {
    if (f.is_object() && f.contains("name") && f["name"].is_string()) {
      names.push_back(f["name"].get<std::string>());
    }
  }
  return names;
}

}  // namespace glm::generation
