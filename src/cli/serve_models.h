// What a several-model `glmserve serve` serves (docs/operations.md "Several models"): the models,
// by the names requests use, and the adapters each model's engine serves per request
// (docs/adapters.md). Read once at serve's start; single-threaded.
#pragma once

#include <string>
#include <vector>

#include "cli/args.h"
#include "core/status.h"
#include "serve/model_manager.h"

namespace glm::cli {

// The name a served model answers to, one rule for one model and several: a store name as given
// ("chatglm3-6b:q4_0"), else the file's stem ("chatglm3-6b.q4_0" for .../chatglm3-6b.q4_0.gguf).
// `value` is the --model as typed, `path` the file it resolved to.
std::string served_name(const std::string& value, const std::string& path);

// The models of a several-model serve: each --model (a path, named by its file's stem, or a store
// name, named by it), or every model of the store (its adapters left out).
StatusOr<std::vector<serve::ManagedModel>> served_models(const Args& args);

// Each --adapter NAME=PATH[:S] onto every served model it fits (its architecture, layers and
// shapes checked as its engine will load it: model::load_adapter against the model's header), its
// name added to those models' ManagedModel::adapters and its flag to `engine_flags` (one list per
// model, for the engine's command line). An adapter fitting none stops serve with the reason for
// each model; a name that is a model's own is refused. Cost: each model's GGUF header and each
// adapter file read once per model.
Status attach_adapters(const Args& args, std::vector<serve::ManagedModel>* models,
                       std::vector<std::vector<std::string>>* engine_flags);

}  // namespace glm::cli
