// Where a hub's files live: the repository id, revision and endpoint of a pull, and the two URLs
// a Hugging Face-compatible hub answers (docs/hub.md):
//   {endpoint}/api/models/{repo}/tree/{revision}?recursive=true   the file list (JSON)
//   {endpoint}/{repo}/resolve/{revision}/{path}                   a file's bytes (Range)
// Pure value types and functions; thread-safe.
#pragma once

#include <string>

#include "core/status.h"

namespace glm::hub {

inline constexpr char kDefaultEndpoint[] = "https://huggingface.co";

struct RepoRef {
  std::string endpoint;  // "https://huggingface.co", no trailing slash
  std::string repo;      // "THUDM/chatglm3-6b" (or a bare "gpt2")
  std::string revision;  // "main", a tag, a commit, "refs/pr/1"
};

// Checks and normalizes: repo is NAME or OWNER/NAME with [A-Za-z0-9._-] parts that neither start
// with '.' nor are "..": invalid_argument saying what a repo id looks like otherwise. The
// revision may hold '/' (refs/pr/1) but no "..", spaces or control characters. The endpoint
// must be http:// or https://; `endpoint_flag` wins over `env_endpoint` (HF_ENDPOINT), then the
// default.
StatusOr<RepoRef> make_repo_ref(const std::string& repo, const std::string& revision,
                                const std::string& endpoint_flag, const char* env_endpoint);

// Percent-encodes every byte outside RFC 3986's unreserved set; '/' too unless `keep_slash`.
std::string percent_encode(const std::string& s, bool keep_slash);

std::string tree_url(const RepoRef& ref);
// `path` is a file's path in the repository, as the tree lists it.
std::string resolve_url(const RepoRef& ref, const std::string& path);

}  // namespace glm::hub
