// Typed reading of a JSON request body (the page's /api routes): every body goes through
// glm::parse_json (size and depth limits), must be an object, and a field of the wrong type is
// an error that names it ("title: expected a string, got number") instead of being ignored.
// Value type; not thread-safe. Cost: O(body size) to parse, O(1) per field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/status.h"

namespace glm::api {

class BodyReader {
 public:
  // An empty body reads as {}. The status is kInvalidArgument if the text is not a JSON object.
  explicit BodyReader(const std::string& text);

  // Each returns the field (nullopt if absent or null) or records a type error in status().
  std::optional<std::string> string(const char* name);
  std::optional<bool> boolean(const char* name);
  std::optional<int64_t> integer(const char* name);
  // A JSON object field, or nullptr.
  const nlohmann::json* object(const char* name);

  // The first error met (parse or field), or ok.
  const Status& status() const { return status_; }
  const nlohmann::json& json() const { return body_; }

 private:
  const nlohmann::json* field(const char* name);
  void type_error(const char* name, const char* expected, const nlohmann::json& got);

  nlohmann::json body_ = nlohmann::json::object();
  Status status_;
};

}  // namespace glm::api
