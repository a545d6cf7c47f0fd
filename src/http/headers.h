// HTTP header fields: names compared case-insensitively (RFC 9110), order of arrival kept.
// Value type; not thread-safe. Cost: lookups are a linear scan (a request has ~10 fields).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace glm::http {

// ASCII case-insensitive equality.
bool iequals(std::string_view a, std::string_view b);

class Headers {
 public:
  using Field = std::pair<std::string, std::string>;

  // Appends a field (a name may repeat).
  void add(std::string name, std::string value);
  // Replaces every field named `name` with one.
  void set(std::string_view name, std::string value);
  void erase(std::string_view name);

  // The first value of `name`, or "" when absent.
  const std::string& get(std::string_view name) const;
  bool has(std::string_view name) const { return count(name) > 0; }
  size_t count(std::string_view name) const;

  std::vector<Field>::const_iterator begin() const { return fields_.begin(); }
  std::vector<Field>::const_iterator end() const { return fields_.end(); }
  size_t size() const { return fields_.size(); }

 private:
  std::vector<Field> fields_;
};

}  // namespace glm::http
