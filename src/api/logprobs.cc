#include "api/logprobs.h"

#include "core/utf8.h"

namespace glm::api {
namespace {

using json = nlohmann::json;

json bytes_json(const std::string& bytes) {
  json out = json::array();
  for (unsigned char c : bytes) out.push_back(static_cast<int>(c));
  return out;
}

json chat_token_json(const generation::TokenLogprob& t) {
  return {
      {"token", utf8_sanitize(t.bytes)}, {"logprob", t.logprob}, {"bytes", bytes_json(t.bytes)}};
}

}  // namespace

json chat_logprobs_json(const std::vector<generation::GeneratedLogprobs>& entries) {
  json content = json::array();
  for (const generation::GeneratedLogprobs& g : entries) {
    json entry = chat_token_json(g.chosen);
    json top = json::array();
    for (const generation::TokenLogprob& t : g.top) top.push_back(chat_token_json(t));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return {{"content", std::move(content)}, {"refusal", nullptr}};
}

json completion_logprobs_json(const std::vector<generation::GeneratedLogprobs>& entries,
                              size_t text_offset) {
  json tokens = json::array();
  json token_logprobs = json::array();
  json top_logprobs = json::array();
  json offsets = json::array();
  size_t offset = text_offset;
  for (const generation::GeneratedLogprobs& g : entries) {
    tokens.push_back(utf8_sanitize(g.chosen.bytes));
    token_logprobs.push_back(g.chosen.logprob);
    json top = json::object();
    for (const generation::TokenLogprob& t : g.top) {
      top.emplace(utf8_sanitize(t.bytes), t.logprob);  // the first (most probable) of equals
    }
    top_logprobs.push_back(std::move(top));
    offsets.push_back(offset);
    offset += g.chosen.bytes.size();
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(offsets)}};
}

}  // namespace glm::api
