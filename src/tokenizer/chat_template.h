// Chat prompts as token ids, exactly as each model's official tokenizer builds them
// (ChatGLM3 build_chat_input, ChatGLM2 "[Round N]", GLM-4, LLaMA-2 plain), plus stop tokens.
// Immutable; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace glm::tok {

struct Message {
  std::string role;     // system, user, assistant, observation
  std::string content;
  std::string metadata;  // ChatGLM3 tool-call metadata line (optional)
};

class ChatTemplate {
 public:
  virtual ~ChatTemplate() = default;
  // Chooses the template from the file's architecture and vocabulary (ChatGLM2 vs 3 vs GLM-4...).
  // `tokenizer` must outlive the template.
  static StatusOr<std::unique_ptr<ChatTemplate>> for_model(const gguf::File& file,
                                                           const Tokenizer& tokenizer);
  virtual const char* name() const = 0;  // "chatglm3", "chatglm2", "glm4", "llama2", "raw"
  // Prompt ids ready for generation (ends with the assistant role marker). invalid_argument for
  // an unknown role.
  virtual StatusOr<std::vector<int32_t>> render(const std::vector<Message>& messages) const = 0;
  // Ids that end generation (eos, <|user|>, <|observation|>...).
  virtual std::vector<int32_t> stop_ids() const = 0;
};

}  // namespace glm::tok
