// P-Tuning v2 prefixes (docs/adapters.md): an adapter file with adapter.type = "ptuning" holds
// the prefix encoder of a ChatGLM P-Tuning v2 checkpoint; reading it computes, once, each
// layer's keys and values of its pre_seq_len virtual tokens (model/adapter.h PrefixKv).
#pragma once

#include "core/status.h"
#include "gguf/gguf.h"
#include "model/adapter.h"
#include "model/config.h"

namespace glm::model {

// Reads the prefix of `file` (general.type = adapter, adapter.type = "ptuning") for a base model
// of `config` into *out. Errors name the tensor or key that does not fit the base; *out is
// untouched on error.
Status load_ptuning(const gguf::File& file, const Config& config, PrefixKv* out);

}  // namespace glm::model
