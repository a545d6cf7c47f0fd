// The engine's making from files (load_engine): the memory plan, the model and its tokenizer,
// the draft model or MTP block, the adapters; and the checks of its options.
#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include "core/log.h"
#include "engine/engine.h"
#include "engine/engine_parts.h"
#include "engine/kv_disk.h"
#include "engine/memory_plan.h"
#include "gguf/gguf.h"
#include "model/gpu_adapter_cache.h"
#include "model/kv_pool.h"

namespace glm::engine {

using scheduler::Clock;

Status check_spec_mode(generation::SpecMode mode, const std::string& draft_path) {
  if (mode == generation::SpecMode::kDraft && draft_path.empty()) {
    return invalid_argument(
        "--spec draft needs a draft model: add --draft M.gguf (a smaller model "
        "with the same vocabulary)");
  }
  if (mode != generation::SpecMode::kDraft && !draft_path.empty()) {
    return invalid_argument(std::string("--draft is for --spec draft, not --spec ") +
                            generation::spec_mode_name(mode) + ": drop one of them");
  }
  return Status::Ok();
}

Status check_draft_vocabulary(const tok::Tokenizer& target, int target_n_vocab,
                              const tok::Tokenizer& draft, int draft_n_vocab) {
  auto sizes = [&] {
    return " (the target has " + std::to_string(target_n_vocab) + " tokens, the draft " +
           std::to_string(draft_n_vocab) + "): use a draft model of the target's family";
  };
  if (target_n_vocab != draft_n_vocab || target.n_vocab() != draft.n_vocab()) {
    return invalid_argument("--draft: the draft model's vocabulary differs in size" + sizes());
  }
  if (target.bos_id() != draft.bos_id() || target.eos_id() != draft.eos_id()) {
    return invalid_argument("--draft: the draft model's BOS/EOS ids differ" + sizes());
  }
  for (int32_t id = 0; id < target.n_vocab(); ++id) {
    if (target.is_control(id) != draft.is_control(id) ||
        target.token_bytes(id) != draft.token_bytes(id)) {
      return invalid_argument("--draft: token " + std::to_string(id) + " is '" +
                              target.token_bytes(id) + "' in the target and '" +
                              draft.token_bytes(id) + "' in the draft model" + sizes());
    }
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Engine>> load_engine(const Options& options) {
  const auto t0 = Clock::now();
  GLM_RETURN_IF_ERROR(check_spec_mode(options.spec, options.draft_path));
  auto file = gguf::File::open(options.model_path);
  if (!file.ok()) return file.status();
  std::shared_ptr<const gguf::File> shared(std::move(file.value()));
  Extras extras;
  if (options.spec == generation::SpecMode::kDraft) {
    auto draft_file = gguf::File::open(options.draft_path);
    if (!draft_file.ok()) {
      return Status(draft_file.status().code(), "--draft: " + draft_file.status().message());
    }
    extras.draft_file = std::move(draft_file.value());
  }
  // The memory it needs, said before loading; refused at once when it runs on the CPU for sure.
  std::optional<MemoryPlan> plan;
  size_t mtp_kv_bytes = 0;  // the MTP block's pool, for a GPU's plan
  if (auto config = model::read_config(*shared); config.ok()) {  // else load_model says why
    plan = plan_memory(*shared, *config, options);
    GLM_LOG_INFO("engine: memory: %s", plan->describe(options).c_str());
    if (options.device == "cpu") GLM_RETURN_IF_ERROR(check_memory(*plan, options));
    if (options.spec == generation::SpecMode::kMtp) {
      mtp_kv_bytes =
          model::KvPool::bytes_for(model::mtp_kv_config(*config),
                                   draft_kv_block_count(options, context_size(options, *config)),
                                   std::max(options.block_tokens, 1), options.kv_type);
    }
  }
  model::LoadOptions lo;
  lo.n_threads = options.n_threads;
  lo.progress = options.load_progress;
  lo.device = options.device;
  // The --adapter files, read once before the model: a GPU model plans the copies it will keep.
  std::vector<ReadAdapter> adapters;
  if (!options.adapters.empty()) {
    auto config = model::read_config(*shared);
    if (!config.ok()) return config.status();
    std::vector<const model::Adapter*> all;
    for (const AdapterSpec& a : options.adapters) {
      auto read = read_adapter(a, *config);
      if (!read.ok()) {
        return Status(read.status().code(), "--adapter " + a.name + ": " + read.status().message());
      }
      adapters.push_back(std::move(*read));
      all.push_back(adapters.back().adapter.get());
    }
    if (options.device != "cpu") {
      lo.adapter_bytes = model::adapters_device_bytes(all, options.kv_type);
      GLM_LOG_INFO("engine: %zu adapter(s) served per request: %.1f MiB planned for a GPU",
                   all.size(), static_cast<double>(lo.adapter_bytes) / (1 << 20));
    }
  }
  lo.gpu_layers = options.gpu_layers;
  lo.cpu_moe = options.cpu_moe;
  lo.lora = options.lora;
  lo.step_tokens = scheduler::Scheduler::max_step_tokens(scheduler_options(options, 0));
  if (plan) lo.kv_bytes = plan->kv;
  lo.mtp_kv_bytes = mtp_kv_bytes;
  auto model = model::load_model(shared, lo);
  if (!model.ok()) return model.status();
  if (plan && options.device != "cpu") {
    // Where it runs is known now: on a GPU the device layers' weights and K/V live there
    // (planned by the GPU model); the host keeps the others', and experts left to it (--cpu-moe).
    const model::Model& m = *model.value();
    if (m.device_name() != "cpu") {
      const int n_layer = m.config().n_layer, host = m.kv_host_layers();
      plan->weights = plan->weights / n_layer * host + m.host_expert_bytes();
      plan->kv = plan->kv / n_layer * host;
    }
    GLM_RETURN_IF_ERROR(check_memory(*plan, options));
  }
  if (const std::string why = model::kv_type_unsupported(model.value()->config(), options.kv_type);
      !why.empty()) {
    return invalid_argument(why);
  }
  auto tokenizer = tok::Tokenizer::from_gguf(*shared);
  if (!tokenizer.ok()) return tokenizer.status();
  auto chat_template = tok::ChatTemplate::for_model(*shared, *tokenizer.value());
  if (!chat_template.ok()) return chat_template.status();
  extras.file = shared;
  if (!options.kv_disk.empty()) {
    extras.fingerprint = model_fingerprint(*shared);
    // Merged LoRAs change every K/V: the disk cache of the bare model must not be read back.
    for (const model::LoraSpec& l : options.lora) {
      auto lf = gguf::File::open(l.path);
      if (!lf.ok()) return lf.status();
      extras.fingerprint =
          extras.fingerprint * 0x100000001b3ull ^ adapter_fingerprint(**lf, l.scale);
    }
  }
  auto name = shared->get_string("general.name");
  if (name.ok() && !name->empty()) {
    extras.name = name.value();
  } else {
    const std::string& path = options.model_path;
    extras.name =
        path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  }
  if (const gguf::Value* v = shared->find("tokenizer.ggml.add_bos_token");
      v != nullptr && v->type() == gguf::ValueType::kBool) {
    extras.add_bos = v->as_bool();
  }
  if (options.spec == generation::SpecMode::kMtp && !model.value()->has_mtp()) {
    return invalid_argument(
        "--spec mtp: this model has no multi-token-prediction block (GLM-4.5's files carry one, "
        "blk.N.nextn.*; a trunk-only conversion does not): use --spec ngram");
  }
  if (options.spec == generation::SpecMode::kDraft) {
    // Its own KV, as EngineImpl makes it, beside the target's device share.
    if (auto dc = model::read_config(*extras.draft_file); dc.ok()) {
      lo.kv_bytes = model::KvPool::bytes_for(
          *dc, draft_kv_block_count(options, context_size(options, model.value()->config())),
          std::max(options.block_tokens, 1), options.kv_type);
    }
    if (const model::GpuLayerPlan* p = model.value()->gpu_plan(); p != nullptr) {
      lo.device_reserved = p->need();
      lo.device_reserved_unallocated = p->kv + p->scratch;
    }
    auto draft = model::load_model(extras.draft_file, lo);
    if (!draft.ok()) return Status(draft.status().code(), "--draft: " + draft.status().message());
    auto draft_tok = tok::Tokenizer::from_gguf(*extras.draft_file);
    if (!draft_tok.ok()) {
      return Status(draft_tok.status().code(), "--draft: " + draft_tok.status().message());
    }
    GLM_RETURN_IF_ERROR(check_draft_vocabulary(*tokenizer.value(), model.value()->config().n_vocab,
                                               *draft_tok.value(),
                                               draft.value()->config().n_vocab));
    if (const std::string why =
            model::kv_type_unsupported(draft.value()->config(), options.kv_type);
        !why.empty()) {
      return invalid_argument("--draft: " + why);
    }
    if (draft.value()->capabilities().bidirectional_prompt ||
        model.value()->capabilities().bidirectional_prompt) {
      GLM_LOG_WARN("--spec draft: ChatGLM-6B (v1) prompts are bidirectional: no drafts");
    }
    extras.draft = std::move(draft.value());
  }
  auto e = start_engine(std::move(model.value()), std::move(tokenizer.value()),
                        std::move(chat_template.value()), options, std::move(extras),
                        std::move(adapters));
  if (!e.ok()) return e.status();
  GLM_LOG_INFO("engine: ready in %.0f ms",
               std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  return e;
}

StatusOr<AdapterSpec> parse_adapter_spec(const std::string& arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size()) {
    return invalid_argument("--adapter: expected NAME=PATH[:scale], got '" + arg + "'");
  }
  AdapterSpec spec;
  spec.name = arg.substr(0, eq);
  static const char kNameChars[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-";
  if (spec.name.size() > 64 || spec.name.find_first_not_of(kNameChars) != std::string::npos) {
    return invalid_argument("--adapter: the name '" + spec.name +
                            "' must be 1-64 letters, digits, '.', '_' or '-'");
  }
  StatusOr<model::LoraSpec> file = model::parse_lora_spec(arg.substr(eq + 1));
  if (!file.ok())
    return invalid_argument("--adapter " + spec.name + ": " + file.status().message());
  spec.path = file->path;
  spec.scale = file->scale;
  return spec;
}

}  // namespace glm::engine
