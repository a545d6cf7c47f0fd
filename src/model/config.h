// Hyperparameters of a loaded model, read from GGUF metadata.
#pragma once

#include <string>

namespace glm::model {

enum class Arch {
  kChatGLM,   // ChatGLM2-6B, ChatGLM3-6B, GLM-4-9B (llama.cpp "chatglm")
  kLlama,     // LLaMA family (stories260K)
  kChatGLM1,  // ChatGLM-6B v1 (glmserve's own layout, docs/models.md)
};

struct Config {
  Arch arch = Arch::kChatGLM;
  std::string arch_name;  // general.architecture as in the file
  int n_vocab = 0;
  int n_embd = 0;
  int n_ff = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;       // n_embd / n_head
  int n_ctx_train = 0;    // context_length
  int n_rot = 0;          // rotary dimensions per head (chatglm: head_dim / 2)
  float rope_base = 10000.0f;
  float norm_eps = 1e-5f;
  bool qkv_bias = false;
  bool tied_output = false;  // LM head shares token_embd.weight
};

}  // namespace glm::model
