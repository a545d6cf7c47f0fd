#include "hub/tree.h"

#include "core/json.h"

namespace glm::hub {

namespace {

bool is_hex(const std::string& s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
      return false;
    }
  }
  return true;
}

std::string lower(std::string s) {
  for (char& c : s) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return s;
}

// A non-negative integer within kMaxFileBytes, or an error naming the field.
StatusOr<uint64_t> read_size(const nlohmann::json& j, const std::string& where) {
  // nlohmann stores every integer >= 0 as unsigned: negatives and floats are refused here.
  if (!j.is_number_unsigned()) return bad_file(where + " is not a non-negative integer");
  const auto v = j.get<uint64_t>();
  if (v > kMaxFileBytes) return bad_file(where + " is " + std::to_string(v) + " bytes: too large");
  return v;
}

StatusOr<RemoteFile> read_entry(const nlohmann::json& e, const std::string& where) {
  if (!e.is_object()) return bad_file(where + " is not an object");
  auto path = e.find("path");
  if (path == e.end() || !path->is_string()) return bad_file(where + ": 'path' is not a string");
  RemoteFile f;
  f.path = path->get<std::string>();
  const std::string at = where + " ('" + f.path.substr(0, 200) + "')";
  if (Status s = check_repo_path(f.path); !s.ok()) return bad_file(at + ": " + s.message());
  auto size = e.find("size");
  if (size == e.end()) return bad_file(at + ": no 'size'");
  StatusOr<uint64_t> n = read_size(*size, at + ": 'size'");
  if (!n.ok()) return n.status();
  f.size = *n;
  if (auto oid = e.find("oid"); oid != e.end()) {
    if (!oid->is_string()) return bad_file(at + ": 'oid' is not a string");
    // A git blob id (SHA-1); other forms (a future hash) are not verified but not refused.
    if (is_hex(oid->get<std::string>(), 40)) f.git_oid = lower(oid->get<std::string>());
  }
  auto lfs = e.find("lfs");
  if (lfs != e.end() && !lfs->is_null()) {
    if (!lfs->is_object()) return bad_file(at + ": 'lfs' is not an object");
    auto digest = lfs->find("oid");
    if (digest == lfs->end()) digest = lfs->find("sha256");
    if (digest == lfs->end() || !digest->is_string() || !is_hex(digest->get<std::string>(), 64)) {
      return bad_file(at + ": 'lfs' has no sha256 (64 hex digits in 'oid' or 'sha256')");
    }
    f.sha256 = lower(digest->get<std::string>());
    f.git_oid.clear();  // the blob id of an LFS file is its pointer's, not its bytes'
    if (auto lsize = lfs->find("size"); lsize != lfs->end()) {
      StatusOr<uint64_t> ln = read_size(*lsize, at + ": 'lfs.size'");
      if (!ln.ok()) return ln.status();
      if (*ln != f.size) {
        return bad_file(at + ": 'size' " + std::to_string(f.size) + " and 'lfs.size' " +
                        std::to_string(*ln) + " disagree");
      }
    }
  }
  return f;
}

}  // namespace

Status check_repo_path(std::string_view path) {
  if (path.empty()) return invalid_argument("empty file name");
  if (path.size() > 1024) return invalid_argument("file name longer than 1024 bytes");
  if (path[0] == '/') return invalid_argument("absolute file name");
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") {
      return invalid_argument("unsafe file name (empty, '.' or '..' part)");
    }
    start = end + 1;
  }
  for (char c : path) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '\\') {
      return invalid_argument("unsafe file name (control character or backslash)");
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<RemoteFile>> parse_tree(std::string_view text, const std::string& what) {
  if (text.size() > kMaxTreeBytes) {
    return bad_file(what + " is over " + std::to_string(kMaxTreeBytes >> 20) + " MiB: refused");
  }
  JsonLimits limits;
  limits.max_bytes = kMaxTreeBytes;
  limits.max_depth = 8;
  StatusOr<nlohmann::json> j = parse_json(text, what.c_str(), limits);
  if (!j.ok()) return bad_file(j.status().message());
  if (!j->is_array()) {
    return bad_file(what + " is not a JSON list of files (is the endpoint a Hugging Face-" +
                    "compatible hub?)");
  }
  if (j->size() > kMaxTreeEntries) {
    return bad_file(what + " lists " + std::to_string(j->size()) + " entries: too many");
  }
  std::vector<RemoteFile> files;
  for (size_t i = 0; i < j->size(); ++i) {
    const nlohmann::json& e = (*j)[i];
    const std::string where = what + ": entry " + std::to_string(i);
    if (!e.is_object()) return bad_file(where + " is not an object");
    auto type = e.find("type");
    if (type == e.end() || !type->is_string()) return bad_file(where + ": 'type' is not a string");
    if (*type == "directory") continue;
    if (*type != "file") {
      return bad_file(where + ": unknown type '" + type->get<std::string>().substr(0, 40) + "'");
    }
    StatusOr<RemoteFile> f = read_entry(e, where);
    if (!f.ok()) return f.status();
    files.push_back(std::move(*f));
  }
  return files;
}

}  // namespace glm::hub
