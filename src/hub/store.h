// The local model store: one directory, one GGUF per model name (docs/hub.md).
//   DIR/chatglm3-6b/q4_0.gguf        the model chatglm3-6b:q4_0
//   DIR/chatglm3-6b/q4_0.json        where it came from: repo, revision, file, sha256, size
//   DIR/chatglm3-6b/q4_0.gguf.part   a download in progress (and its .part.json)
// DIR is --models-dir, else $GLMSERVE_MODELS, else $XDG_DATA_HOME/glmserve/models, else
// ~/.local/share/glmserve/models. Every path below DIR is built from a validated ModelName (one
// safe component each), never from a name a hub sent. Not thread-safe for writers; concurrent
// readers are fine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "hub/naming.h"

namespace glm::hub {

// The store directory for a --models-dir flag value (may be empty) and the environment.
// invalid_argument when none of the variables gives a directory.
StatusOr<std::string> store_dir(const std::string& flag);

struct StoreEntry {
  ModelName name;
  std::string path;  // DIR/BASE/TAG.gguf
  uint64_t size_bytes = 0;
  std::string type;          // weight type ("Q4_0", "Q4_K_M", "F16"), from the GGUF header
  std::string architecture;  // general.architecture ("chatglm")
  std::string adapter;       // "lora" / "ptuning" for an adapter file (file_type.h); "" a model
  int64_t context = 0;       // ARCH.context_length; 0 when absent
  std::string repo;          // from the manifest, when there is one
  std::string error;         // why the header could not be read ("truncated ..."); else empty
};

// Provenance written beside a pulled model.
struct Manifest {
  std::string endpoint, repo, revision, file, sha256;
  uint64_t size = 0;
};

class Store {
 public:
  explicit Store(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }

  // DIR/BASE/TAG.gguf (the tag must be set).
  std::string model_path(const ModelName& name) const;
  std::string manifest_path(const ModelName& name) const;

  // Every model, sorted by name; headers read with the GGUF reader (cost: one mmap and a
  // metadata parse per file). A missing DIR is an empty store.
  StatusOr<std::vector<StoreEntry>> list() const;

  // The file a name stands for: "base:tag" exactly, or "base" when the store holds exactly one
  // tag of it. not_found naming the store and what to run otherwise.
  StatusOr<std::string> find(const ModelName& name) const;

  // Removes the model (GGUF, manifest, partial downloads; or only a partial download of BASE:TAG)
  // and BASE's directory when it empties.
  Status remove(const ModelName& name);

  // Creates DIR/BASE (0755) when missing.
  Status make_dirs(const ModelName& name) const;
  Status write_manifest(const ModelName& name, const Manifest& m) const;
  std::optional<Manifest> read_manifest(const ModelName& name) const;

  // The tags of BASE that have a GGUF, sorted.
  std::vector<std::string> tags_of(const std::string& base) const;

 private:
  std::string dir_;
};

// The --model value as a path: an existing file is itself; a model name (see naming.h) found in
// the store is its file; anything else comes back unchanged, so the caller reports it as a
// missing file ("cannot open 'x.gguf'"), except a BASE:TAG name, which is looked up and reported
// as missing from the store.
StatusOr<std::string> resolve_model(const std::string& value, const std::string& models_dir_flag);

}  // namespace glm::hub
