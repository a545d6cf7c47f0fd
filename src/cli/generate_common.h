// Shared by `glmserve run` and `glmserve chat`: the engine and sampling flags, loading the
// engine in-process (the same code path as the server), and waiting for one request's events.
#pragma once

#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "cli/args.h"
#include "engine/engine.h"

namespace glm::cli {

// Flag names understood by engine_options() and sampling_params().
extern const std::set<std::string> kGenerateFlags;
extern const std::map<std::string, std::string> kGenerateAliases;  // -n, -t
extern const char* kGenerateFlagsHelp;

StatusOr<engine::Options> engine_options(const Args& args);
// --kv f16|f32|q8_0 (the KV cache's element type) into *out; absent: `default_name`. An unknown
// name is an invalid_argument that lists the known ones.
Status kv_type_flag(const Args& args, const char* default_name, DType* out);
// --spec ngram|draft|off (default off) and --draft M.gguf into *o (--draft alone implies
// --spec draft); a mode and draft that do not go together are refused
// (engine::check_spec_mode) with the one-line error that says what to use instead.
Status spec_flags(const Args& args, engine::Options* o);
// --reasoning-format auto|think|none (engine::Options::reasoning).
Status reasoning_flag(const Args& args, tok::ReasoningFormat* out);
// --device, --gpu-layers and --cpu-moe N|all|auto (model::LoadOptions), checked; defaults
// auto, -1 and auto.
Status device_flags(const Args& args, std::string* device, int* gpu_layers, int* cpu_moe);
extern const char* kDeviceFlagsHelp;
// --lora A.gguf[:scale], repeatable (model::LoadOptions::lora: merged at load).
Status lora_flags(const Args& args, std::vector<model::LoraSpec>* out);
extern const char* kSpecFlagsHelp;
// Defaults: the engine's (temperature 0.8, top_p 0.8); max_tokens `default_max_tokens`.
StatusOr<engine::SamplingParams> sampling_params(const Args& args, int default_max_tokens);

// Streams one request's text to `out` and waits for its end. Thread-safe (the sink runs on the
// engine thread).
class Generation {
 public:
  explicit Generation(std::FILE* out) : out_(out) {}
  engine::EventSink sink();
  // Blocks until kDone or kError; returns the final event.
  engine::Event wait();
  // Waits at most `ms` for the end; true if it came (then wait() returns at once).
  bool wait_for(int ms);
  const std::string& text() const { return text_; }
  const engine::Event& start() const { return start_; }
  const std::string& notice() const { return notice_; }

 private:
  std::FILE* out_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool thinking_ = false;  // reasoning was printed and the answer has not started
  engine::Event final_;
  engine::Event start_;
  std::string text_;
  std::string notice_;
};

// "prompt 12 tokens (5 cached), 64 tokens, ttft 35.2 ms, 12.5 ms/token (80.0 tokens/s)"
std::string summary_line(const engine::Event& done);

}  // namespace glm::cli
