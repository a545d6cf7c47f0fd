// `glmserve convert PEFT_DIR -o A.gguf`: a PEFT LoRA directory (what ChatGLM3's finetune_demo,
// GLM-4's finetune.py and other PEFT trainers write: adapter_config.json with r, lora_alpha,
// target_modules, base_model_name_or_path; adapter_model.safetensors or adapter_model.bin, the
// latter read by the data-only unpickler) to a LoRA GGUF in llama.cpp's layout (lora_file.h),
// with the numbers llama.cpp's convert_lora_to_gguf.py writes: lora_A and lora_B as they are
// (no transposition), adapter.lora.alpha = lora_alpha (scale = alpha / r at load).
// Names: base_model.model.<HF module>.lora_A.weight -> blk.N.<tensor>.weight.lora_a, for
// ChatGLM2/3 and GLM-4 (transformer.encoder.layers.N.self_attention.query_key_value, .dense,
// mlp.dense_h_to_4h, mlp.dense_4h_to_h) and GLM-4-0414 (model.layers.N.self_attn.{q,k,v,o}_proj,
// mlp.gate_up_proj, mlp.down_proj). Reentrant.
#pragma once

#include <string>

#include "convert/lora_file.h"
#include "core/status.h"

namespace glm::convert {

// True when `dir` holds an adapter_config.json (a PEFT adapter, not a model checkpoint).
bool is_peft_dir(const std::string& dir);

// Reads a PEFT LoRA directory. Errors name the file and the tensor or key: not_found (no
// adapter_config.json / weights), bad_file (a rank or shape that disagrees with r, a lone A or
// B, a module outside target_modules), unsupported (DoRA, fan_in_fan_out, per-module ranks or
// alphas, embeddings or other modules ChatGLM's LoRA does not target, ChatGLM-6B v1 names).
// use_rslora (scale alpha / sqrt(r)) is written as alpha * sqrt(r), so that alpha / r at load
// gives the same scale.
StatusOr<LoraFile> read_peft(const std::string& dir);

// read_peft, then write_lora_file(type).
Status convert_peft(const std::string& dir, DType type, const std::string& out_path,
                    LoraFile* written = nullptr);

}  // namespace glm::convert
