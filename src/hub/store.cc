#include "hub/store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/json.h"
#include "gguf/gguf.h"
#include "hub/file_type.h"
#include "hub/segment.h"

namespace glm::hub {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void read_header(StoreEntry* e) {
  StatusOr<std::unique_ptr<gguf::File>> f = gguf::File::open(e->path);
  if (!f.ok()) {
    e->error = f.status().message();
    return;
  }
  const gguf::File& g = **f;
  StatusOr<std::string> arch = g.get_string("general.architecture");
  e->architecture = arch.ok() ? *arch : "?";
  StatusOr<int64_t> ctx = g.get_int_or(e->architecture + ".context_length", 0);
  e->context = ctx.ok() ? *ctx : 0;
  e->type = weight_type_name(g);
  e->adapter = adapter_kind(g);
}

}  // namespace

StatusOr<std::string> store_dir(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* m = std::getenv("GLMSERVE_MODELS"); m != nullptr && m[0] != '\0')
    return std::string(m);
  if (const char* x = std::getenv("XDG_DATA_HOME"); x != nullptr && x[0] == '/') {
    return std::string(x) + "/glmserve/models";
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && h[0] == '/') {
    return std::string(h) + "/.local/share/glmserve/models";
  }
  return invalid_argument(
      "no model store: set --models-dir, GLMSERVE_MODELS, XDG_DATA_HOME or HOME");
}

std::string Store::model_path(const ModelName& name) const {
  return dir_ + "/" + name.base + "/" + name.tag + ".gguf";
}

std::string Store::manifest_path(const ModelName& name) const {
  return dir_ + "/" + name.base + "/" + name.tag + ".json";
}

std::vector<std::string> Store::tags_of(const std::string& base) const {
  std::vector<std::string> tags;
  std::error_code ec;
  for (fs::directory_iterator it(dir_ + "/" + base, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    if (!ends_with(file, ".gguf")) continue;
    const std::string tag = file.substr(0, file.size() - 5);
    if (parse_model_name(base + ":" + tag) && it->is_regular_file(ec)) tags.push_back(tag);
  }
  std::sort(tags.begin(), tags.end());
  return tags;
}

StatusOr<std::vector<StoreEntry>> Store::list() const {
  std::vector<StoreEntry> out;
  std::error_code ec;
  if (!fs::exists(dir_, ec)) return out;
  std::vector<std::string> bases;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string base = it->path().filename().string();
    if (parse_model_name(base) && it->is_directory(ec)) bases.push_back(base);
  }
  if (ec) return Status(ErrorCode::kInternal, "cannot read '" + dir_ + "': " + ec.message());
  std::sort(bases.begin(), bases.end());
  for (const std::string& base : bases) {
    for (const std::string& tag : tags_of(base)) {
      StoreEntry e;
      e.name = ModelName{base, tag};
      e.path = model_path(e.name);
      e.size_bytes = fs::file_size(e.path, ec);
      read_header(&e);
      if (std::optional<Manifest> m = read_manifest(e.name)) e.repo = m->repo;
      out.push_back(std::move(e));
    }
  }
  return out;
}

StatusOr<std::string> Store::find(const ModelName& name) const {
  const std::vector<std::string> tags = tags_of(name.base);
  if (!name.tag.empty()) {
    if (std::find(tags.begin(), tags.end(), name.tag) != tags.end()) return model_path(name);
  } else if (tags.size() == 1) {
    return model_path(ModelName{name.base, tags[0]});
  }
  std::string msg = "no model '" + name.str() + "' in the store " + dir_;
  if (!tags.empty()) {
    msg += " (it holds";
    for (const std::string& t : tags) msg += " " + name.base + ":" + t;
    msg += ")";
  } else {
    msg += " (glmserve list shows what it holds; glmserve pull REPO fetches a model)";
  }
  return not_found(msg);
}

Status Store::remove(const ModelName& name) {
  StatusOr<std::string> path = find(name);
  if (!path.ok() && !name.tag.empty() &&
      ::access((model_path(name) + ".part").c_str(), F_OK) == 0) {
    path = model_path(name);  // only a partial download: removed like a model
  }
  if (!path.ok()) return path.status();
  const std::string stem = path->substr(0, path->size() - 5);  // DIR/BASE/TAG
  for (const std::string& p : {*path, stem + ".json", *path + ".part", *path + ".part.json"}) {
    if (::unlink(p.c_str()) != 0 && errno != ENOENT) {
      return Status(ErrorCode::kInternal, "cannot remove '" + p + "': " + std::strerror(errno));
    }
  }
  // A parallel download's sidecars (segment.h).
  for (const Segment& seg : find_segments(*path + ".part", 0)) ::unlink(seg.path.c_str());
  ::rmdir((dir_ + "/" + name.base).c_str());  // only when empty
  return Status::Ok();
}

Status Store::make_dirs(const ModelName& name) const {
  std::error_code ec;
  fs::create_directories(dir_ + "/" + name.base, ec);
  if (ec) {
    return Status(ErrorCode::kInternal, "cannot create '" + dir_ + "/" + name.base + "': " +
                                            ec.message() + " (choose another --models-dir)");
  }
  return Status::Ok();
}

Status Store::write_manifest(const ModelName& name, const Manifest& m) const {
  const nlohmann::json j = {{"endpoint", m.endpoint}, {"repo", m.repo},
                            {"revision", m.revision}, {"file", m.file},
                            {"sha256", m.sha256},     {"size", m.size}};
  const std::string path = manifest_path(name), tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << dump_json(j, 2) << "\n";
    if (!out.flush()) return Status(ErrorCode::kInternal, "cannot write '" + tmp + "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status(ErrorCode::kInternal, "cannot write '" + path + "': " + std::strerror(errno));
  }
  return Status::Ok();
}

std::optional<Manifest> Store::read_manifest(const ModelName& name) const {
  std::ifstream in(manifest_path(name));
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  StatusOr<nlohmann::json> j = parse_json(ss.str(), "a store manifest");
  if (!j.ok() || !j->is_object()) return std::nullopt;
  Manifest m;
  try {
    m.endpoint = j->value("endpoint", "");
    m.repo = j->value("repo", "");
    m.revision = j->value("revision", "");
    m.file = j->value("file", "");
    m.sha256 = j->value("sha256", "");
    m.size = j->value("size", uint64_t{0});
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // a hand-edited manifest with wrong types: treated as absent
  }
  return m;
}

StatusOr<std::string> resolve_model(const std::string& value, const std::string& models_dir_flag) {
  struct stat st {};
  if (value.empty() || ::stat(value.c_str(), &st) == 0) return value;
  const std::optional<ModelName> name = parse_model_name(value);
  if (!name || ends_with(value, ".gguf")) return value;
  StatusOr<std::string> dir = store_dir(models_dir_flag);
  if (!dir.ok()) return name->tag.empty() ? StatusOr<std::string>(value) : dir.status();
  Store store(*dir);
  StatusOr<std::string> path = store.find(*name);
  if (path.ok() || !name->tag.empty() || !store.tags_of(name->base).empty()) return path;
  return value;  // "x" is neither a file nor a model: the caller's "cannot open 'x'" says so
}

}  // namespace glm::hub
