// What engine.cc (the engine's loop) and load.cc (its making from files) share. Internal to the
// engine module.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "model/adapter.h"
#include "model/model.h"
#include "scheduler/scheduler.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace glm::engine {

// An adapter file read for serving: the adapter, and its identity for the prefix cache and the
// KV disk cache (its file and scale: kv::AdmitInput::salt).
struct ReadAdapter {
  std::shared_ptr<const model::Adapter> adapter;
  uint64_t salt = 0;
};
StatusOr<ReadAdapter> read_adapter(const AdapterSpec& spec, const model::Config& config);

// The scheduler of an engine of `options` serving a context of n_ctx.
scheduler::Options scheduler_options(const Options& options, int n_ctx);

// Everything the engine needs besides the model, tokenizer and template (start_engine's; none
// for create_engine's).
struct Extras {
  std::shared_ptr<const gguf::File> file;  // kept alive for the model's mapping
  uint64_t fingerprint = 0;                // model_fingerprint(*file); 0 without a file
  std::string name;
  bool add_bos = true;
  // --spec draft: the draft model (its file kept alive for its mapping), checked against the
  // target's vocabulary by check_draft_vocabulary.
  std::shared_ptr<const gguf::File> draft_file;
  std::unique_ptr<model::Model> draft;
};

// The engine of the loaded parts: serves `adapters` (options.adapters' files, read, in their
// order), runs the warm-up passes and starts its loop. Errors: an adapter the model cannot take.
StatusOr<std::unique_ptr<Engine>> start_engine(std::unique_ptr<model::Model> model,
                                               std::unique_ptr<tok::Tokenizer> tokenizer,
                                               std::unique_ptr<tok::ChatTemplate> chat_template,
                                               const Options& options, Extras extras,
                                               std::vector<ReadAdapter> adapters);

}  // namespace glm::engine
