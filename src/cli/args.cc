#include "cli/args.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "hub/store.h"
#include "model/lora.h"

namespace glm::cli {

std::map<std::string, std::string> llama_cpp_aliases(std::map<std::string, std::string> extra) {
  extra.insert({{"m", "model"}, {"c", "ctx-size"}, {"ngl", "gpu-layers"}, {"t", "threads"}});
  return extra;
}

namespace {

// The one place a --model (or --draft) value becomes a file: "chatglm3-6b:q4_0" ->
// DIR/chatglm3-6b/q4_0.gguf (hub/store.h); a path is kept as given. Errors name `flag`.
Status resolve_model_value(const char* flag, const std::string& models_dir, std::string* value) {
  StatusOr<std::string> path = hub::resolve_model(*value, models_dir);
  if (!path.ok()) {
    return Status(path.status().code(), "--" + std::string(flag) + ": " + path.status().message());
  }
  *value = *path;
  return Status::Ok();
}

}  // namespace

StatusOr<Args> Args::parse(int argc, char** argv, const std::set<std::string>& known_flags,
                           const std::set<std::string>& bool_flags,
                           const std::map<std::string, std::string>& aliases) {
  Args a;
  // Every command that takes a model file takes a model name of the local store too.
  const bool takes_model = known_flags.count("model") != 0;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-' || arg == "--") {
      a.positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(arg[1] == '-' ? 2 : 1);
    std::string value;
    bool has_value = false;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto alias = aliases.find(name);
    if (alias != aliases.end()) name = alias->second;
    const bool store_flag = takes_model && name == "models-dir";
    if (known_flags.count(name) == 0 && bool_flags.count(name) == 0 && !store_flag) {
      return invalid_argument("unknown flag " + arg + " (see --help)");
    }
    if (bool_flags.count(name) != 0) {
      a.values_[name] = has_value ? value : "1";
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) return invalid_argument("flag --" + name + " needs a value");
      value = argv[++i];
    }
    a.values_[name] = value;
    a.all_[name].push_back(value);
  }
  for (const char* flag : {"model", "draft"}) {
    auto it = a.values_.find(flag);
    if (it == a.values_.end() || known_flags.count(flag) == 0) continue;
    GLM_RETURN_IF_ERROR(resolve_model_value(flag, a.get("models-dir"), &it->second));
  }
  // Adapters by store name as well (glmserve pull of an adapter repository): --lora NAME[:S] and
  // --adapter ALIAS=NAME[:S]; the scale and the alias are kept as typed.
  for (const char* flag : {"lora", "adapter"}) {
    auto all = a.all_.find(flag);
    if (all == a.all_.end() || known_flags.count(flag) == 0) continue;
    const bool named = std::string(flag) == "adapter";  // ALIAS= before the file
    for (std::string& v : all->second) {
      const size_t start = named ? v.find('=') + 1 : 0;
      if (named && start == 0) continue;  // no '=': reported where the flag is read
      StatusOr<model::LoraSpec> spec = model::parse_lora_spec(v.substr(start));
      if (!spec.ok()) continue;  // reported where the flag is read
      StatusOr<std::string> path = hub::resolve_model(spec->path, a.get("models-dir"));
      if (!path.ok()) {
        return Status(path.status().code(),
                      "--" + std::string(flag) + ": " + path.status().message());
      }
      v.replace(start, spec->path.size(), *path);
    }
    a.values_[flag] = all->second.back();
  }
  return a;
}

std::vector<std::string> Args::get_all(const std::string& name) const {
  auto it = all_.find(name);
  return it == all_.end() ? std::vector<std::string>{} : it->second;
}

Status Args::model_from_positional() {
  if (positional_.empty()) return Status::Ok();
  if (positional_.size() > 1 || has("model")) {
    return invalid_argument("unexpected argument '" + positional_.back() +
                            "' (one model: --model M or M alone)");
  }
  std::string model = positional_[0];
  GLM_RETURN_IF_ERROR(resolve_model_value("model", get("models-dir"), &model));
  values_["model"] = model;
  all_["model"].push_back(positional_[0]);
  positional_.clear();
  return Status::Ok();
}

std::string Args::get(const std::string& name, const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second;
}

StatusOr<int64_t> Args::get_int(const std::string& name, int64_t def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || errno != 0) {
    return invalid_argument("--" + name + ": expected an integer, got '" + it->second + "'");
  }
  return static_cast<int64_t>(v);
}

StatusOr<double> Args::get_float(const std::string& name, double def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0' || errno != 0) {
    return invalid_argument("--" + name + ": expected a number, got '" + it->second + "'");
  }
  return v;
}

StatusOr<std::vector<int32_t>> Args::get_int_list(const std::string& name) const {
  std::vector<int32_t> out;
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return out;
  const std::string& s = it->second;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    const std::string item = s.substr(pos, comma - pos);
    errno = 0;
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno != 0 || v < INT32_MIN || v > INT32_MAX) {
      return invalid_argument("--" + name + ": expected comma-separated integers, got '" + item +
                              "'");
    }
    out.push_back(static_cast<int32_t>(v));
    pos = comma + 1;
  }
  return out;
}

StatusOr<std::string> Args::require(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) {
    return invalid_argument("missing --" + name + " (see --help)");
  }
  return it->second;
}

int fail(const Status& status) {
  std::fprintf(stderr, "glmserve: %s\n", status.message().c_str());
  return status.code() == ErrorCode::kInvalidArgument ? 2 : 1;
}

}  // namespace glm::cli
