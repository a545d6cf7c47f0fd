// Model names in the local store and the choice of a GGUF file in a repository (docs/hub.md).
//   repo THUDM/ChatGLM3-6B-GGUF, file chatglm3-6b.Q4_K_M.gguf  ->  name chatglm3-6b:q4_k_m
// A name is BASE:TAG: BASE is the repository's last part, lowercased, without a "-gguf" suffix;
// TAG is the file's quantization ("q4_0", "q4_k_m", "f16"), or its lowercased stem when it names
// none. Both are made of [a-z0-9._-] and never start with '.', so a name is always one safe
// file-system component. Pure; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "hub/tree.h"

namespace glm::hub {

struct ModelName {
  std::string base;  // "chatglm3-6b"
  std::string tag;   // "q4_0"; empty in a name given without one ("chatglm3-6b")
  std::string str() const { return tag.empty() ? base : base + ":" + tag; }
};

// "chatglm3-6b:q4_0" or "chatglm3-6b"; nullopt unless both parts are valid name parts
// (lowercase letters, digits, . _ -, not starting with '.', at most 128 bytes). Upper case in the
// input is folded.
std::optional<ModelName> parse_model_name(const std::string& s);

// Lowercased, with every byte outside [a-z0-9._-] replaced by '-' and leading '.'/'-' dropped;
// "model" when nothing is left.
std::string sanitize_name_part(const std::string& s);

// BASE for a repository id: "THUDM/chatglm3-6b-GGUF" -> "chatglm3-6b".
std::string base_name_for_repo(const std::string& repo);

// The quantization named in a file name, lowercased ("q4_k_m", "iq4_xs", "f16", "bf16"), or ""
// when it names none. The last one wins: "q8_0-to-q4_0.gguf" -> "q4_0".
std::string quant_of_file(const std::string& file_name);

// TAG for a file: its quantization, else its sanitized stem.
std::string tag_for_file(const std::string& path);

// True for "*.gguf" (any case).
bool is_gguf(const std::string& path);

// The GGUF file of `files` that `want` names: "" = the only one; a path exactly as listed; or a
// quantization ("Q4_0", "q4_k_m": the file whose tag is that, else the one whose name contains
// it, case-insensitive). not_found when none matches and invalid_argument when several do, each
// listing the choices; unsupported for a split file ("-00001-of-00003.gguf").
StatusOr<RemoteFile> select_gguf(const std::vector<RemoteFile>& files, const std::string& want,
                                 const std::string& repo);

}  // namespace glm::hub
