// libFuzzer target: any answer text through the tool-call readers (GLM-4's name line, ChatGLM3's
// block, GLM-4.5's XML). No crash or exception; the streamed reading (the text cut where the
// first byte says) joins to the whole one; a call's arguments are a JSON object.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/chat_template.h"
#include "tokenizer/tool_call_stream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace glm::tok;  // NOLINT(google-build-using-namespace): a fuzz entry point
  if (size == 0) return 0;
  const size_t step = 1 + data[0] % 7;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::vector<std::string> names = {"get_weather", "get", "f"};
  ToolCallStream s(names);
  std::vector<ToolDelta> d;
  for (size_t i = 0; i < text.size(); i += step) {
    for (ToolDelta& x : s.feed(text.substr(i, step))) d.push_back(std::move(x));
  }
  for (ToolDelta& x : s.finish()) d.push_back(std::move(x));
  const ToolAnswer streamed = join_tool_deltas(d);
  const ToolAnswer whole = read_tool_answer(names, text);
  if (streamed.content != whole.content || streamed.calls.size() != whole.calls.size()) {
    std::abort();
  }
  for (size_t i = 0; i < whole.calls.size(); ++i) {
    if (streamed.calls[i].name != whole.calls[i].name ||
        streamed.calls[i].arguments != whole.calls[i].arguments) {
      std::abort();
    }
  }
  const Glm45Calls calls = parse_glm45_tool_calls(text);
  for (const ToolCall& c : calls.calls) {
    if (!nlohmann::json::parse(c.arguments, nullptr, false).is_object()) std::abort();
  }
  parse_assistant_output(text);
  return 0;
}
