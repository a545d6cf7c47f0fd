// The one JSON mapping of generation::SamplingParams, shared by the engine socket protocol and
// the HTTP gateway (OpenAI API, page API): field names, types and ranges come from
// generation::for_each_field, so a new sampling field needs no code here.
//
// Wire names are the fields' names, plus the aliases max_length (legacy ChatGLM),
// max_completion_tokens (OpenAI chat) and max_output_tokens (OpenAI Responses) for max_tokens;
// an error names the field as the client sent it. JSON null means "absent". Pure; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "generation/sampling.h"

namespace glm::protocol {

// If `key` names a sampling field, reads `value` into *p (after checking its type and range)
// and sets *known; otherwise leaves *p alone and clears *known. Errors name the field as
// `field_prefix + key`: "field 'params.top_p': must be in (0, 1] (1 = off), got 0".
template <class Json>
Status read_sampling_field(const std::string& key, const Json& value,
                           const std::string& field_prefix, generation::SamplingParams* p,
                           bool* known);

// Reads every sampling field of `obj` (a JSON object); other keys are ignored.
template <class Json>
Status read_sampling(const Json& obj, const std::string& field_prefix,
                     generation::SamplingParams* p);

// True if `key` names a sampling field or an alias of one.
bool is_sampling_field(const std::string& key);
// "temperature, top_p, ..., stop": for error messages.
std::string sampling_field_names();

// Writes the fields of `p` that differ from the defaults (SamplingParams{}) into `obj`.
void write_sampling(const generation::SamplingParams& p, nlohmann::ordered_json* obj);

}  // namespace glm::protocol
