// The weight type of a GGUF file as people name it ("Q4_K_M", "Q8_0", "F16"): llama.cpp's
// general.file_type when the file has it, else the type holding most bytes of its 2-D tensors.
// Pure; thread-safe.
#pragma once

#include <string>

#include "gguf/gguf.h"

namespace glm::hub {

std::string weight_type_name(const gguf::File& file);

// What an adapter file adapts with (general.type = "adapter"): its adapter.type ("lora",
// "ptuning"; "?" when absent); "" for a model. llama.cpp's LoRA GGUF and ours share the keys
// (docs/adapters.md).
std::string adapter_kind(const gguf::File& file);

}  // namespace glm::hub
