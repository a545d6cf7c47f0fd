// `glmserve convert PTUNING_DIR -o A.gguf`: a ChatGLM-6B, ChatGLM2/3 or GLM-4 P-Tuning v2
// checkpoint (what ChatGLM's ptuning/main.py and ChatGLM3's finetune_demo write with pre_seq_len
// set: config.json with pre_seq_len and prefix_projection, and weights holding
// transformer.prefix_encoder.* — alone, or in a whole model's files) to a P-Tuning adapter GGUF
// (docs/adapters.md#p-tuning-v2).
// Weights: *.safetensors, else pytorch_model*.bin read by the data-only unpickler (no code is
// ever run). Only the prefix encoder's tensors are read; the others are skipped. Reentrant.
#pragma once

#include <string>

#include "convert/model_writer.h"
#include "core/status.h"

namespace glm::convert {

// True when `dir` has a config.json whose pre_seq_len is a number (a P-Tuning v2 checkpoint);
// false for a plain model, a missing or unreadable config (convert_hf then reports it).
bool is_ptuning_dir(const std::string& dir);

// Writes the adapter to out_path (atomically). The prefix encoder is stored as F32. Errors name
// the part: not_found (no config, no weights, no prefix encoder), bad_file (a tensor's shape or
// dtype, pre_seq_len disagreeing with the embedding, a refused pickle), unsupported (non-ChatGLM
// bases). general.architecture is the base's layout: chatglm1 for ChatGLM-6B, chatglm otherwise.
// Nothing is written on error.
Status convert_ptuning(const std::string& dir, const std::string& out_path, WriteReport* report);

}  // namespace glm::convert
