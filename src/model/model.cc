#include "model/model.h"

#include "model/chatglm1.h"
#include "model/transformer.h"
#include "model/weights.h"

namespace glm::model {

StatusOr<std::unique_ptr<Model>> load_model(std::shared_ptr<const gguf::File> file,
                                            const LoadOptions& options) {
  if (file == nullptr) return invalid_argument("load_model: no file");
  StatusOr<Config> config = read_config(*file);
  if (!config.ok()) return config.status();
  if (config->n_vocab < 1 || file->tensor("token_embd.weight") == nullptr) {
    return bad_file(file->path() + ": has no weights (token_embd.weight is missing); a " +
                    "vocabulary-only file serves tokenize/template, not inference");
  }
  if (config->arch == Arch::kChatGLM1) {
    return load_chatglm1(std::move(file), std::move(*config), options);
  }
  Weights weights;
  GLM_RETURN_IF_ERROR(load_weights(*file, *config, &weights));
  return std::unique_ptr<Model>(std::make_unique<Transformer>(std::move(file), std::move(*config),
                                                              std::move(weights), options));
}

}  // namespace glm::model
