#include "http/headers.h"

#include <algorithm>

namespace glm::http {
namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

void Headers::add(std::string name, std::string value) {
  fields_.emplace_back(std::move(name), std::move(value));
}

void Headers::set(std::string_view name, std::string value) {
  erase(name);
  fields_.emplace_back(std::string(name), std::move(value));
}

void Headers::erase(std::string_view name) {
  fields_.erase(std::remove_if(fields_.begin(), fields_.end(),
                               [&](const Field& f) { return iequals(f.first, name); }),
                fields_.end());
}

const std::string& Headers::get(std::string_view name) const {
  static const std::string kEmpty;
  for (const Field& f : fields_) {
    if (iequals(f.first, name)) return f.second;
  }
  return kEmpty;
}

size_t Headers::count(std::string_view name) const {
  return static_cast<size_t>(std::count_if(fields_.begin(), fields_.end(),
                                           [&](const Field& f) { return iequals(f.first, name); }));
}

}  // namespace glm::http
