// What a directory handed to `glmserve convert` (or downloaded by `glmserve pull`) holds, told by
// its files: a PEFT LoRA adapter (adapter_config.json: peft_convert.h), a P-Tuning v2 checkpoint
// (config.json with pre_seq_len: ptuning_convert.h), else a model checkpoint (hf_convert.h).
// The one rule both commands follow. Reads at most config.json; thread-safe.
#pragma once

#include <string>

namespace glm::convert {

enum class DirKind { kModel, kLora, kPtuning };

DirKind dir_kind(const std::string& dir);

}  // namespace glm::convert
