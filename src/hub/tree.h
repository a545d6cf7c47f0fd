// The file list of a repository revision, from the hub's tree API answer:
//   [{"type":"file","oid":"<git blob sha1>","size":123,"path":"config.json"},
//    {"type":"file","oid":"...","size":3600000000,"path":"m.Q4_0.gguf",
//     "lfs":{"oid":"<sha256>","size":3600000000,"pointerSize":134}},
//    {"type":"directory","oid":"...","size":0,"path":"sub"}]
// (the blob form of the same data names the LFS digest "sha256" instead of "oid"; both are read).
// The answer comes from the network: every field is checked, and a hostile answer (not a list,
// wrong types, sizes out of range, path traversal such as "../../x", control characters) is a
// clear error, never a crash or a file outside the store. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace glm::hub {

struct RemoteFile {
  std::string path;     // in the repository, '/'-separated, checked by check_repo_path()
  uint64_t size = 0;    // bytes
  std::string sha256;   // 64 lowercase hex digits, for LFS files; empty otherwise
  std::string git_oid;  // 40 lowercase hex digits (git blob SHA-1), when given; empty otherwise
};

inline constexpr size_t kMaxTreeBytes = 32u << 20;  // a tree answer larger than this is refused
inline constexpr size_t kMaxTreeEntries = 100000;
inline constexpr uint64_t kMaxFileBytes = uint64_t{1} << 44;  // 16 TiB

// ok when `path` is a relative '/'-separated path whose parts are non-empty, not "." or "..",
// without '\\', control characters or a leading '/'; at most 1024 bytes.
Status check_repo_path(std::string_view path);

// Parses one page of a tree answer; directories are skipped. `what` names the source in errors
// ("the tree of THUDM/chatglm3-6b at main").
StatusOr<std::vector<RemoteFile>> parse_tree(std::string_view text, const std::string& what);

}  // namespace glm::hub
