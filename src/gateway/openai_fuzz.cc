// libFuzzer target (GLM_FUZZ=ON): the OpenAI request parser and the JSON it feeds back must never
// crash or throw on any body a client can send.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gateway/openai.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  auto r = glm::gateway::parse_chat_completion(body);
  if (!r.ok()) {
    glm::gateway::openai_error_json(r.status());
    return 0;
  }
  for (const auto& m : r->request.messages) {
    glm::gateway::completion_chunk_json("id", 0, r->model, &m.content, true, "");
  }
  return 0;
}
