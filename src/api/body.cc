#include "api/body.h"

#include "core/json.h"

namespace glm::api {

BodyReader::BodyReader(const std::string& text) {
  if (text.empty()) return;
  auto parsed = parse_json(text, "the request body");
  if (!parsed.ok()) {
    status_ = parsed.status();
  } else if (!parsed->is_object()) {
    status_ = invalid_argument("the request body must be a JSON object");
  } else {
    body_ = std::move(parsed).value();
  }
}

const nlohmann::json* BodyReader::field(const char* name) {
  if (!status_.ok()) return nullptr;
  auto it = body_.find(name);
  return it == body_.end() || it->is_null() ? nullptr : &*it;
}

void BodyReader::type_error(const char* name, const char* expected, const nlohmann::json& got) {
  status_ =
      invalid_argument(std::string(name) + ": expected " + expected + ", got " + got.type_name());
}

std::optional<std::string> BodyReader::string(const char* name) {
  const nlohmann::json* v = field(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) {
    type_error(name, "a string", *v);
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<bool> BodyReader::boolean(const char* name) {
  const nlohmann::json* v = field(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) {
    type_error(name, "true or false", *v);
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<int64_t> BodyReader::integer(const char* name) {
  const nlohmann::json* v = field(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) {
    type_error(name, "an integer", *v);
    return std::nullopt;
  }
  return v->get<int64_t>();
}

const nlohmann::json* BodyReader::object(const char* name) {
  const nlohmann::json* v = field(name);
  if (v == nullptr) return nullptr;
  if (!v->is_object()) {
    type_error(name, "an object", *v);
    return nullptr;
  }
  return v;
}

}  // namespace glm::api
