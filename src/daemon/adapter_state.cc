#include "daemon/adapter_state.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/json.h"

namespace glm::daemon {

namespace {

constexpr size_t kMaxStateBytes = 1 << 20;

}  // namespace

Status save_adapter_state(const std::string& path,
                          const std::vector<engine::AdapterSpec>& adapters) {
  nlohmann::json list = nlohmann::json::array();
  for (const engine::AdapterSpec& a : adapters) {
    list.push_back({{"name", a.name}, {"path", a.path}, {"scale", a.scale}});
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << dump_json(list) << "\n";
    if (!out.good()) {
      return Status(ErrorCode::kInternal,
                    "cannot write the adapter list " + tmp + ": " + std::strerror(errno));
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Status(ErrorCode::kInternal, "cannot write the adapter list " + path + ": " + why);
  }
  return Status::Ok();
}

StatusOr<std::vector<engine::AdapterSpec>> read_adapter_state(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::vector<engine::AdapterSpec>{};
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > kMaxStateBytes) {
    return bad_file("the adapter list " + path + " is over 1 MiB");
  }
  auto parsed = parse_json(text.str(), "the adapter list");
  if (!parsed.ok() || !parsed->is_array()) {
    return bad_file("the adapter list " + path + " is not a JSON array");
  }
  std::vector<engine::AdapterSpec> out;
  for (const nlohmann::json& e : *parsed) {
    const nlohmann::json* name = e.is_object() && e.contains("name") ? &e["name"] : nullptr;
    const nlohmann::json* file = e.is_object() && e.contains("path") ? &e["path"] : nullptr;
    const nlohmann::json* scale = e.is_object() && e.contains("scale") ? &e["scale"] : nullptr;
    if (name == nullptr || !name->is_string() || file == nullptr || !file->is_string() ||
        file->get<std::string>().empty() || scale == nullptr || !scale->is_number() ||
        !std::isfinite(scale->get<double>())) {
      return bad_file("the adapter list " + path + " has an entry that is not " +
                      "{\"name\",\"path\",\"scale\"}: " + dump_json(e).substr(0, 200));
    }
    // The name by the one rule of --adapter (engine::parse_adapter_spec).
    auto spec = engine::parse_adapter_spec(name->get<std::string>() + "=x");
    if (!spec.ok()) return bad_file("the adapter list " + path + ": " + spec.status().message());
    out.push_back({name->get<std::string>(), file->get<std::string>(), scale->get<float>()});
  }
  return out;
}

}  // namespace glm::daemon
