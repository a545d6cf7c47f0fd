#include "hub/repo.h"

namespace glm::hub {

namespace {

bool is_id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

// One part of a repo id: non-empty, [A-Za-z0-9._-], not starting with '.' (no "..", no hidden
// names), at most 96 characters (the hub's own limit).
bool valid_id_part(const std::string& s) {
  if (s.empty() || s.size() > 96 || s[0] == '.') return false;
  for (char c : s) {
    if (!is_id_char(c)) return false;
  }
  return true;
}

}  // namespace

StatusOr<RepoRef> make_repo_ref(const std::string& repo, const std::string& revision,
                                const std::string& endpoint_flag, const char* env_endpoint) {
  RepoRef ref;
  const size_t slash = repo.find('/');
  const bool ok_repo = slash == std::string::npos ? valid_id_part(repo)
                                                  : valid_id_part(repo.substr(0, slash)) &&
                                                        valid_id_part(repo.substr(slash + 1));
  if (!ok_repo) {
    return invalid_argument("'" + repo +
                            "' is not a repository id (expected OWNER/NAME, e.g. "
                            "THUDM/chatglm3-6b, with letters, digits and . _ -)");
  }
  ref.repo = repo;
  ref.revision = revision.empty() ? "main" : revision;
  bool ok_rev = ref.revision.size() <= 256 && ref.revision[0] != '/' &&
                ref.revision.find("..") == std::string::npos;
  for (char c : ref.revision) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f || c == '\\' || c == '?' || c == '#') {
      ok_rev = false;
    }
  }
  if (!ok_rev) {
    return invalid_argument("--revision '" + ref.revision +
                            "' is not a branch, tag or commit name (no spaces, '..' or '?')");
  }
  std::string ep = !endpoint_flag.empty()                               ? endpoint_flag
                   : env_endpoint != nullptr && env_endpoint[0] != '\0' ? env_endpoint
                                                                        : kDefaultEndpoint;
  while (!ep.empty() && ep.back() == '/') ep.pop_back();
  if (ep.rfind("http://", 0) != 0 && ep.rfind("https://", 0) != 0) {
    return invalid_argument("endpoint '" + ep +
                            "' must start with http:// or https:// (--endpoint or HF_ENDPOINT)");
  }
  for (char c : ep) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
      return invalid_argument("endpoint '" + ep + "' holds spaces or control characters");
    }
  }
  ref.endpoint = ep;
  return ref;
}

std::string percent_encode(const std::string& s, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == '~';
    if (unreserved || (keep_slash && c == '/')) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string tree_url(const RepoRef& ref) {
  return ref.endpoint + "/api/models/" + ref.repo + "/tree/" +
         percent_encode(ref.revision, /*keep_slash=*/false) + "?recursive=true";
}

std::string resolve_url(const RepoRef& ref, const std::string& path) {
  return ref.endpoint + "/" + ref.repo + "/resolve/" +
         percent_encode(ref.revision, /*keep_slash=*/false) + "/" +
         percent_encode(path, /*keep_slash=*/true);
}

}  // namespace glm::hub
