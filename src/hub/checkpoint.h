// A Hugging Face checkpoint repository (config.json, safetensors or PyTorch .bin weights,
// tokenizer files), or a PEFT LoRA adapter repository (adapter_config.json and
// adapter_model.safetensors or .bin), which pull downloads into the store's staging area and hands
// to a converter (glmserve convert, supplied by the caller) to become one GGUF. Pure; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hub/tree.h"

namespace glm::hub {

struct Checkpoint {
  std::vector<RemoteFile> files;  // what conversion needs, top-level files only
  uint64_t bytes = 0;             // their total size
  std::string fingerprint;        // sha256 over the files' paths and digests: the same files,
                                  // the same fingerprint (a converted model is then up to date)
  bool lora = false;              // a PEFT LoRA adapter (stored as BASE:lora)
};

// The files of `files` a conversion reads. A PEFT adapter (a top-level adapter_config.json and
// adapter_model.safetensors, else adapter_model.bin): those two files, whatever else the
// repository holds (fine-tuning checkpoints carry the tokenizer and training state too). Else a
// model: config.json, the tokenizer and other top-level JSON files, and the weights (every
// *.safetensors when there is one, else pytorch_model*.bin, with their index). nullopt when it is
// neither.
std::optional<Checkpoint> find_checkpoint(const std::vector<RemoteFile>& files);

}  // namespace glm::hub
