// The models and adapters of a several-model serve (serve_models.h).
#include "cli/serve_models.h"

#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "hub/store.h"
#include "model/config.h"
#include "model/lora.h"

namespace glm::cli {

std::string served_name(const std::string& value, const std::string& path) {
  if (path != value && hub::parse_model_name(value)) return hub::parse_model_name(value)->str();
  std::string name = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0)
    name.resize(name.size() - 5);
  return name;
}

StatusOr<std::vector<serve::ManagedModel>> served_models(const Args& args) {
  std::vector<serve::ManagedModel> out;
  const std::vector<std::string> given = args.get_all("model");
  if (given.empty()) {
    auto dir = hub::store_dir(args.get("models-dir"));
    if (!dir.ok()) return dir.status();
    auto entries = hub::Store(*dir).list();
    if (!entries.ok()) return entries.status();
    for (const hub::StoreEntry& e : *entries) {
      if (!e.error.empty()) {
        GLM_LOG_WARN("serve: skipping %s: %s", e.name.str().c_str(), e.error.c_str());
        continue;
      }
      if (!e.adapter.empty()) continue;  // not a model: served with --adapter on its base
      out.push_back({e.name.str(), e.path, "", e.size_bytes, 0});
    }
    if (out.empty()) {
      return not_found("the model store " + *dir +
                       " holds no model (glmserve pull REPO QUANT, or give --model)");
    }
    return out;
  }
  for (const std::string& value : given) {
    auto path = hub::resolve_model(value, args.get("models-dir"));
    if (!path.ok()) return Status(path.status().code(), "--model: " + path.status().message());
    struct stat st;
    if (::stat(path->c_str(), &st) != 0 || ::access(path->c_str(), R_OK) != 0) {
      return not_found("cannot read model file '" + *path + "'");
    }
    const std::string name = served_name(value, *path);
    for (const auto& m : out) {
      if (m.name == name) {
        return invalid_argument("two --model values are both named '" + name +
                                "'; give them files with different names");
      }
    }
    out.push_back({name, *path, "", static_cast<uint64_t>(st.st_size), 0});
  }
  return out;
}

Status attach_adapters(const Args& args, std::vector<serve::ManagedModel>* models,
                       std::vector<std::vector<std::string>>* engine_flags) {
  engine_flags->assign(models->size(), {});
  if (!args.has("adapter")) return Status::Ok();
  // Each model's header once (its config: what an adapter must fit).
  std::vector<StatusOr<model::Config>> configs;
  for (const serve::ManagedModel& m : *models) {
    StatusOr<std::unique_ptr<gguf::File>> file = gguf::File::open(m.path);
    configs.push_back(file.ok() ? model::read_config(**file)
                                : StatusOr<model::Config>(file.status()));
  }
  for (const std::string& value : args.get_all("adapter")) {
    StatusOr<engine::AdapterSpec> spec = engine::parse_adapter_spec(value);
    if (!spec.ok()) return spec.status();
    std::string why;  // each model's reason, when it fits none
    int fits = 0;
    for (size_t i = 0; i < models->size(); ++i) {
      serve::ManagedModel& m = (*models)[i];
      if (m.name == spec->name) {
        return invalid_argument("--adapter " + spec->name + ": '" + spec->name +
                                "' is a served model's name; give the adapter another");
      }
      Status s = configs[i].status();
      if (s.ok()) {
        s = model::load_adapter(spec->path, *configs[i], spec->scale, spec->name).status();
      }
      if (!s.ok()) {
        why += (why.empty() ? "" : "; ") + m.name + ": " + s.message();
        continue;
      }
      for (const std::string& a : m.adapters) {
        if (a == spec->name) {
          return invalid_argument("--adapter " + spec->name + " is given twice");
        }
      }
      m.adapters.push_back(spec->name);
      (*engine_flags)[i].push_back(value);
      ++fits;
    }
    if (fits == 0) {
      return invalid_argument("--adapter " + spec->name + " fits none of the served models (" +
                              why + ")");
    }
    GLM_LOG_INFO("serve: adapter %s on %d model(s)", spec->name.c_str(), fits);
  }
  return Status::Ok();
}

}  // namespace glm::cli
