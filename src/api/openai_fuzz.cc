// libFuzzer target (GLM_FUZZ=ON): every route's body handling, on the same input: the OpenAI
// chat completions, legacy completions and Responses parsers, Anthropic's Messages parser, the
// page API's typed reader, and the JSON each feeds back, must never crash or throw on any body
// a client can send (scripts/fuzz.sh runs it briefly in CI under ASan).
#include <cstddef>
#include <cstdint>
#include <string>

#include "api/anthropic.h"
#include "api/body.h"
#include "api/completions.h"
#include "api/openai.h"
#include "api/responses.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace glm::api;  // NOLINT(google-build-using-namespace): a fuzz entry point
  const std::string body(reinterpret_cast<const char*>(data), size);
  if (auto r = parse_chat_completion(body); r.ok()) {
    for (const auto& m : r->request.messages)
      completion_chunk_json("id", 0, r->model, &m.content, true, "");
  } else {
    openai_error_json(r.status());
  }
  if (auto r = parse_completion_request(body); r.ok()) {
    text_completion_json("id", 0, r->model, r->request.prompt, "stop", {});
  }
  if (auto r = parse_messages_request(body); !r.ok()) anthropic_error_json(r.status());
  if (auto r = parse_responses_request(body); r.ok()) {
    messages_from_json(messages_to_json(r->request.messages));
  }
  BodyReader reader(body);
  reader.string("title");
  reader.boolean("stream");
  reader.integer("max_tokens");
  reader.object("params");
  return 0;
}
