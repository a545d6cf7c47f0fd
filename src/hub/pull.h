// glmserve pull: a GGUF file of a hub repository into the local store, by name or quantization.
//   pull({.repo = "THUDM/chatglm3-6b-gguf", .want = "q4_0"}) -> DIR/chatglm3-6b/q4_0.gguf
// Lists the revision's files (tree API, paged answers followed), picks the file (naming.h),
// downloads it resumably and verified (download.h), checks that it is GGUF, writes the manifest
// and renames it into place. A model already in the store with the same sha256 is not fetched
// again. Blocking; not thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "hub/checkpoint.h"
#include "hub/download.h"
#include "hub/naming.h"
#include "hub/repo.h"
#include "hub/store.h"
#include "hub/tree.h"

namespace glm::hub {

struct PullOptions {
  std::string repo;          // OWNER/NAME
  std::string want;          // FILE or QUANT; "" = the repository's only GGUF
  std::string revision;      // "" = main
  std::string endpoint;      // --endpoint; "" = HF_ENDPOINT, else huggingface.co
  std::string models_dir;    // --models-dir; "" = store_dir() default
  std::string name;          // --name: the store name to use instead of BASE:TAG
  std::string token;         // HF_TOKEN
  DownloadOptions download;  // retries, backoff, progress, cancel
  std::function<void(const std::string&)> note;
  // A repository with no GGUF but an HF checkpoint or a PEFT adapter (checkpoint.h) is
  // downloaded to DIR/.staging/BASE-REVISION/ and converted by this (glmserve convert) into
  // out_path; it is stored as BASE:convert_tag, or, when the converter made an adapter, as
  // BASE:lora / BASE:ptuning (its adapter.type). Empty: such a repository is an error. The staging
  // copy is removed after a conversion unless keep_checkpoint.
  std::function<Status(const std::string& hf_dir, const std::string& out_path)> convert;
  std::string convert_tag = "q4_0";
  bool keep_checkpoint = false;
};

struct PullResult {
  ModelName name;
  std::string path;  // the GGUF in the store
  RemoteFile file;   // what the hub listed
  bool already_present = false;
  DownloadResult download;     // of the GGUF (or of the checkpoint's files, summed)
  bool converted = false;      // made from an HF checkpoint (or a PEFT adapter)
  std::string adapter;         // "lora" / "ptuning" when what it stored is an adapter
  std::string checkpoint_dir;  // where its files were (removed unless keep_checkpoint)
};

// The revision's files: every page of the tree answer, checked (tree.h). `what` errors name the
// repository and revision; a missing repository is not_found, one that needs a token
// kUnauthorized, a hub that cannot be reached kUnavailable.
StatusOr<std::vector<RemoteFile>> fetch_tree(HttpClient* http, const RepoRef& ref,
                                             const DownloadOptions& retry);

StatusOr<PullResult> pull(const PullOptions& options);

}  // namespace glm::hub
