#include "model/model.h"

#include <cstdlib>

#include "core/log.h"
#include "gpu/device.h"
#include "gpu/ops.h"
#include "model/chatglm1.h"
#include "model/chatglm1_gpu.h"
#include "model/transformer.h"
#include "model/transformer_gpu.h"
#include "model/weights.h"

namespace glm::model {
namespace {

// The Vulkan device the options ask for; null (after one log line) where the model runs on the
// CPU instead; an error only where a named device cannot be used.
StatusOr<std::unique_ptr<gpu::Device>> open_device(const LoadOptions& options) {
  if (options.device == "cpu" || options.gpu_layers == 0) return std::unique_ptr<gpu::Device>();
  const int index = device_index(options.device);
  const bool automatic = options.device == "auto";
  StatusOr<std::unique_ptr<gpu::Device>> dev = gpu::Device::open(index, automatic);
  if (!dev.ok() && automatic) {
    // The usual case without a GPU: said at debug level (the engine's ready line names the
    // device), so that commands whose stderr is read stay quiet.
    GLM_LOG_DEBUG("device auto: %s; running on the CPU", dev.status().message().c_str());
    return std::unique_ptr<gpu::Device>();
  }
  if (!dev.ok()) {
    if (index >= 0) return dev.status();
    GLM_LOG_WARN("device %s: %s; running on the CPU", options.device.c_str(),
                 dev.status().message().c_str());
    return std::unique_ptr<gpu::Device>();
  }
  // The tensor cores' products checked once before the prefill takes them (docs/gpu.md).
  if (Status s = gpu::check_coop_matmul(dev->get()); !s.ok()) {
    GLM_LOG_WARN(
        "vulkan: checking the tensor-core matmul failed (%s); the prefill runs without "
        "tensor cores",
        s.message().c_str());
  }
  return dev;
}

// Merges each --lora of `options` into `weights`, in order (model/lora.h).
Status merge_loras(const Config& config, const LoadOptions& options, Weights* weights) {
  if (options.lora.empty()) return Status::Ok();
  kernels::ThreadPool pool(options.n_threads);
  for (const LoraSpec& spec : options.lora) {
    StatusOr<std::shared_ptr<const Adapter>> adapter =
        load_adapter(spec.path, config, spec.scale, spec.path);
    if (!adapter.ok()) return adapter.status();
    if ((*adapter)->lora.empty()) {
      return invalid_argument("--lora " + spec.path +
                              ": not a LoRA adapter (serve a P-Tuning prefix with --adapter)");
    }
    GLM_RETURN_IF_ERROR(merge_lora(**adapter, weights, &pool));
    GLM_LOG_INFO("--lora %s: merged (scale %g)", spec.path.c_str(), spec.scale);
  }
  return Status::Ok();
}

}  // namespace

int device_index(const std::string& device) {
  if (device.rfind("vulkan:", 0) != 0) return -1;
  return std::atoi(device.c_str() + 7);
}

Status validate_device(const std::string& device) {
  if (device == "cpu" || device == "auto" || device == "vulkan") return Status::Ok();
  if (device.rfind("vulkan:", 0) == 0 && device.size() > 7 && device.size() < 11 &&
      device.find_first_not_of("0123456789", 7) == std::string::npos) {
    return Status::Ok();
  }
  return invalid_argument("--device: expected auto, cpu, vulkan or vulkan:N, got '" + device +
                          "' (`glmserve devices` lists the devices)");
}

StatusOr<std::unique_ptr<Model>> load_model(std::shared_ptr<const gguf::File> file,
                                            const LoadOptions& options) {
  if (file == nullptr) return invalid_argument("load_model: no file");
  GLM_RETURN_IF_ERROR(validate_device(options.device));
  StatusOr<Config> config = read_config(*file);
  if (!config.ok()) return config.status();
  if (config->n_vocab < 1 || file->tensor("token_embd.weight") == nullptr) {
    return bad_file(file->path() + ": has no weights (token_embd.weight is missing); a " +
                    "vocabulary-only file serves tokenize/template, not inference");
  }
  if (options.gpu_layers < -1) {
    return invalid_argument("--gpu-layers: expected -1 (all) or a count of layers");
  }
  if (options.cpu_moe < kCpuMoeAuto) {
    return invalid_argument("--cpu-moe: expected a count of layers, 'all' or 'auto'");
  }
  if (config->arch == Arch::kChatGLM1) {
    if (!options.lora.empty()) {
      return unsupported("--lora: LoRA on ChatGLM-6B (v1) is not supported");
    }
    StatusOr<std::unique_ptr<gpu::Device>> device = open_device(options);
    if (!device.ok()) return device.status();
    if (*device == nullptr) return load_chatglm1(std::move(file), std::move(*config), options);
    StatusOr<float> alpha = chatglm1::residual_scale(*file, *config);
    if (!alpha.ok()) return alpha.status();
    Weights weights;
    GLM_RETURN_IF_ERROR(load_weights(*file, *config, &weights));
    return GpuChatGLM1::create(std::move(file), *config, weights, *alpha, std::move(*device),
                               options);
  }
  if (config->is_mla() && !options.lora.empty()) {
    return unsupported("--lora: LoRA on deepseek2 (GLM-4.7-Flash) is not supported");
  }
  Weights weights;
  GLM_RETURN_IF_ERROR(load_weights(*file, *config, &weights));
  GLM_RETURN_IF_ERROR(merge_loras(*config, options, &weights));
  StatusOr<std::unique_ptr<gpu::Device>> device = open_device(options);
  if (!device.ok()) return device.status();
  if (*device != nullptr) {
    return GpuTransformer::create(std::move(file), std::move(*config), std::move(weights),
                                  std::move(*device), options);
  }
  return std::unique_ptr<Model>(std::make_unique<Transformer>(std::move(file), std::move(*config),
                                                              std::move(weights), options));
}

Status warm_up(Model* m, KvPool* kv, const std::vector<int32_t>& marks) {
  const int bt = kv->block_tokens();
  for (const WarmUpStep& w : m->warm_up_steps()) {
    const int n_blocks = (w.n_past + w.n_tokens + bt - 1) / bt;
    if (n_blocks > kv->n_blocks()) continue;
    std::vector<int32_t> tokens(static_cast<size_t>(w.n_tokens), 0), blocks(n_blocks);
    for (int i = 0; i < w.n_tokens && w.n_past + i < static_cast<int>(marks.size()); ++i) {
      const int at = w.n_past + i;
      tokens[i] = marks[at];
    }
    for (int b = 0; b < n_blocks; ++b) blocks[b] = b;
    SeqInput in;
    in.tokens = tokens.data();
    in.n_tokens = w.n_tokens;
    in.n_past = w.n_past;
    in.blocks = blocks.data();
    in.n_blocks = n_blocks;
    in.prefix_len = w.n_past > 0 ? w.n_past : w.n_tokens;  // a decode step: after its prompt
    std::vector<float> out;
    GLM_RETURN_IF_ERROR(m->forward({in}, kv, &out));
  }
  return Status::Ok();
}

}  // namespace glm::model
