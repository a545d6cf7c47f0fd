#include "cli/generate_common.h"

#include "model/kv_pool.h"
#include "model/model.h"

namespace glm::cli {

const std::set<std::string> kGenerateFlags = {"model",
                                              "max-tokens",
                                              "temp",
                                              "top-p",
                                              "top-k",
                                              "repeat-penalty",
                                              "seed",
                                              "threads",
                                              "ctx-size",
                                              "kv",
                                              "stop",
                                              "spec",
                                              "draft",
                                              "device",
                                              "gpu-layers",
                                              "cpu-moe",
                                              "reasoning-format",
                                              "lora"};
const std::map<std::string, std::string> kGenerateAliases =
    llama_cpp_aliases({{"n", "max-tokens"}, {"kv-type", "kv"}});
const char* kGenerateFlagsHelp =
    "  -n, --max-tokens N   tokens to generate at most\n"
    "  --temp T             temperature (0 = greedy; default 0.8)\n"
    "  --top-p P            nucleus sampling (1 = off; default 0.8)\n"
    "  --top-k K            keep the K most likely tokens (0 = off)\n"
    "  --repeat-penalty R   repetition penalty (1 = off)\n"
    "  --seed S             random seed (0 = random)\n"
    "  --stop TEXT          stop when TEXT is generated (not printed)\n"
    "  -t, --threads N      worker threads (default: physical cores)\n"
    "  --ctx-size N         context length (default: the model's, at most 8192)\n"
    "  --kv f16|f32|q8_0    KV cache element type (default f16; q8_0: about half the memory\n"
    "                       of f16; --kv-type is an alias)\n"
    "  --spec ngram|draft|mtp|off  speculative decoding: ngram drafts from the conversation's\n"
    "                       own tokens (same output; faster on answers that repeat it; default\n"
    "                       off); mtp from the model's own MTP block (GLM-4.5's files)\n"
    "  --draft M.gguf       drafts from a smaller model of the same vocabulary (--spec draft)\n"
    "  --device D           auto, cpu, vulkan or vulkan:N (default auto: a discrete GPU if\n"
    "                       there is one, else the CPU; `glmserve devices` lists them)\n"
    "  --gpu-layers N       layers on the GPU (-1, the default: as many as fit; 0 = the CPU)\n"
    "  --cpu-moe N|all|auto GLM-4.5 on a GPU: the router and routed experts of the first N\n"
    "                       layers (all: every layer) stay in host memory, run by the CPU;\n"
    "                       auto (default): as few as let every layer fit (docs/gpu.md#memory)\n"
    "  --reasoning-format auto|think|none  a reasoning model's <think>...</think> printed to\n"
    "                       stderr, apart from the answer (auto: GLM-Z1, GLM-4.5; think: any\n"
    "                       answer that starts with <think>; none: kept in the answer)\n"
    "  --lora A.gguf[:S]    merge a LoRA adapter into the weights at load, scale S (default 1;\n"
    "                       repeatable; docs/adapters.md)\n";
const char* kDeviceFlagsHelp =
    "  --device D           auto, cpu, vulkan or vulkan:N (default auto: a discrete GPU if\n"
    "                       there is one, else the CPU; `glmserve devices` lists them)\n"
    "  --gpu-layers N       layers on the GPU (-1, the default: as many as fit; 0 = the CPU)\n"
    "  --cpu-moe N|all|auto GLM-4.5 on a GPU: the router and routed experts of the first N\n"
    "                       layers (all: every layer) stay in host memory, run by the CPU;\n"
    "                       auto (default): as few as let every layer fit (docs/gpu.md#memory)\n";
const char* kSpecFlagsHelp =
    "  --spec ngram|draft|mtp|off  speculative decoding with drafts from each answer's own\n"
    "                       context, a draft model or the model's own MTP block (GLM-4.5;\n"
    "                       greedy output unchanged; docs/engine.md; default off)\n"
    "  --draft M.gguf       the draft model: smaller, same vocabulary (implies --spec draft)\n";

Status kv_type_flag(const Args& args, const char* default_name, DType* out) {
  const std::string name = args.get("kv", default_name);
  if (!model::kv_type_from_name(name, out)) {
    return invalid_argument("--kv: expected " + std::string(model::kKvTypeNames) + ", got '" +
                            name + "'");
  }
  return Status::Ok();
}

Status device_flags(const Args& args, std::string* device, int* gpu_layers, int* cpu_moe) {
  *device = args.get("device", "auto");
  GLM_RETURN_IF_ERROR(model::validate_device(*device));
  auto n = args.get_int("gpu-layers", -1);
  if (!n.ok()) return n.status();
  if (*n < -1 || *n > 100000) return invalid_argument("--gpu-layers: expected -1 (all) to 100000");
  *gpu_layers = static_cast<int>(*n);
  const std::string moe = args.get("cpu-moe", "auto");
  if (moe == "auto") {
    *cpu_moe = model::kCpuMoeAuto;
  } else if (moe == "all") {
    *cpu_moe = model::kAllLayers;
  } else {
    auto m = args.get_int("cpu-moe", 0);
    if (!m.ok() || *m < 0 || *m > 100000) {
      return invalid_argument(
          "--cpu-moe: expected a count of layers (0 to 100000), 'all' or 'auto'");
    }
    *cpu_moe = static_cast<int>(*m);
  }
  return Status::Ok();
}

Status lora_flags(const Args& args, std::vector<model::LoraSpec>* out) {
  out->clear();
  for (const std::string& v : args.get_all("lora")) {
    StatusOr<model::LoraSpec> spec = model::parse_lora_spec(v);
    if (!spec.ok()) return spec.status();
    out->push_back(*spec);
  }
  return Status::Ok();
}

Status spec_flags(const Args& args, engine::Options* o) {
  // --draft alone implies --spec draft.
  const std::string mode = args.get("spec", args.has("draft") ? "draft" : "off");
  const auto parsed = generation::parse_spec_mode(mode);
  if (!parsed) {
    return invalid_argument("--spec: expected ngram, draft, mtp or off, got '" + mode + "'");
  }
  o->spec = *parsed;
  o->draft_path = args.get("draft", "");
  return engine::check_spec_mode(o->spec, o->draft_path);
}

Status reasoning_flag(const Args& args, tok::ReasoningFormat* out) {
  const std::string name = args.get("reasoning-format", "auto");
  const auto parsed = tok::parse_reasoning_format(name);
  if (!parsed) {
    return invalid_argument("--reasoning-format: expected auto, think or none, got '" + name + "'");
  }
  *out = *parsed;
  return Status::Ok();
}

StatusOr<engine::Options> engine_options(const Args& args) {
  engine::Options o;
  auto model = args.require("model");
  if (!model.ok()) return model.status();
  o.model_path = *model;
  auto threads = args.get_int("threads", 0);
  if (!threads.ok()) return threads.status();
  if (*threads < 0 || *threads > 1024) return invalid_argument("--threads: expected 0 to 1024");
  o.n_threads = static_cast<int>(*threads);
  auto ctx = args.get_int("ctx-size", 0);
  if (!ctx.ok()) return ctx.status();
  if (*ctx < 0 || *ctx > (1 << 20)) return invalid_argument("--ctx-size: expected 0 to 1048576");
  o.n_ctx = static_cast<int>(*ctx);
  GLM_RETURN_IF_ERROR(kv_type_flag(args, "f16", &o.kv_type));
  GLM_RETURN_IF_ERROR(device_flags(args, &o.device, &o.gpu_layers, &o.cpu_moe));
  GLM_RETURN_IF_ERROR(lora_flags(args, &o.lora));
  o.max_batch = 1;  // one user: the KV cache holds one full context
  GLM_RETURN_IF_ERROR(spec_flags(args, &o));
  GLM_RETURN_IF_ERROR(reasoning_flag(args, &o.reasoning));
  return o;
}

StatusOr<engine::SamplingParams> sampling_params(const Args& args, int default_max_tokens) {
  engine::SamplingParams p;
  auto n = args.get_int("max-tokens", default_max_tokens);
  if (!n.ok()) return n.status();
  if (*n < 1 || *n > generation::kMaxTokensLimit) {
    return invalid_argument("--max-tokens: expected 1 to " +
                            std::to_string(generation::kMaxTokensLimit));
  }
  p.max_tokens = static_cast<int>(*n);
  auto temp = args.get_float("temp", p.temperature);
  if (!temp.ok()) return temp.status();
  p.temperature = static_cast<float>(*temp);
  auto top_p = args.get_float("top-p", p.top_p);
  if (!top_p.ok()) return top_p.status();
  p.top_p = static_cast<float>(*top_p);
  auto top_k = args.get_int("top-k", 0);
  if (!top_k.ok()) return top_k.status();
  p.top_k = static_cast<int>(*top_k);
  auto rp = args.get_float("repeat-penalty", 1.0);
  if (!rp.ok()) return rp.status();
  p.repetition_penalty = static_cast<float>(*rp);
  auto seed = args.get_int("seed", 0);
  if (!seed.ok()) return seed.status();
  if (*seed < 0) return invalid_argument("--seed: expected a non-negative integer");
  p.seed = static_cast<uint64_t>(*seed);
  if (args.has("stop")) p.stop.push_back(args.get("stop"));
  // The limits every edge shares (--temp is temperature, --top-p top_p, ...).
  if (Status st = generation::validate(p); !st.ok()) {
    return invalid_argument("sampling flags: " + st.message());
  }
  return p;
}

engine::EventSink Generation::sink() {
  return [this](const engine::Event& e) {
    std::lock_guard<std::mutex> lock(mu_);
    switch (e.type) {
      case engine::EventType::kToken:
        // A reasoning model's thinking goes to stderr: stdout holds the answer alone.
        if (!e.reasoning.empty()) {
          std::fwrite(e.reasoning.data(), 1, e.reasoning.size(), stderr);
          thinking_ = true;
        }
        if (thinking_ && !e.text.empty()) {
          std::fputc('\n', stderr);
          thinking_ = false;
        }
        text_ += e.text;
        std::fwrite(e.text.data(), 1, e.text.size(), out_);
        std::fflush(out_);
        break;
      case engine::EventType::kStart:
        start_ = e;
        break;
      case engine::EventType::kNotice:
        notice_ = e.message;
        break;
      case engine::EventType::kDone:
      case engine::EventType::kError:
        final_ = e;
        done_ = true;
        cv_.notify_all();
        break;
      default:
        break;
    }
  };
}

engine::Event Generation::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_; });
  return final_;
}

bool Generation::wait_for(int ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return done_; });
}

std::string summary_line(const engine::Event& d) {
  char buf[256];
  const double tps = d.timings.tpot_ms > 0 ? 1000.0 / d.timings.tpot_ms : 0.0;
  std::snprintf(buf, sizeof(buf),
                "prompt %d tokens (%d cached), %d tokens generated, ttft %.1f ms, "
                "%.1f ms/token (%.1f tokens/s), %s",
                d.usage.prompt_tokens, d.usage.cached_tokens, d.usage.completion_tokens,
                d.timings.ttft_ms, d.timings.tpot_ms, tps,
                generation::finish_reason_name(d.finish_reason));
  std::string line = buf;
  if (d.speculation.drafted > 0) {
    line += ", speculative: " + std::to_string(d.speculation.accepted) + " of " +
            std::to_string(d.speculation.drafted) + " drafted tokens accepted";
  }
  return line;
}

}  // namespace glm::cli
