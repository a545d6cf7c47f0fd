// glmserve template --model M --messages F.json [--template NAME] [--text]
// Prints the ids of the chat prompt, ready for generation, as a JSON array. F.json is a list of
// {"role","content"} messages (optional "metadata"; "tools" on a system message), or an object
// with such a "messages" list; "-" reads standard input. Works on vocab-only GGUF files.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/json.h"
#include "gguf/gguf.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace glm::cli {
namespace {

constexpr char kHelp[] =
    "usage: glmserve template --model M.gguf --messages F.json [flags]\n"
    "\n"
    "Prints the token ids of the chat prompt for the messages as a JSON array, exactly as the\n"
    "model's official tokenizer builds it (ChatGLM3, ChatGLM2, GLM-4, LLaMA-2 or raw).\n"
    "\n"
    "  --model M.gguf      model or vocab-only GGUF file\n"
    "  --messages F.json   [{\"role\": \"user\", \"content\": \"...\"}, ...] ('-' = stdin);\n"
    "                      roles: system, user, assistant, observation; optional \"metadata\";\n"
    "                      \"tools\" (JSON) on a system message (ChatGLM3)\n"
    "  --template NAME     force a template: chatglm3, chatglm2, chatglm1, glm4, glm4-0414,\n"
    "                      glm-z1, glm45, glm47, llama2, raw\n"
    "  --text              also print the prompt as text (special tokens shown) to stderr\n";

StatusOr<std::vector<tok::Message>> read_messages(const std::string& path) {
  std::string data;
  if (path == "-") {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    data = ss.str();
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) return not_found("--messages: cannot read '" + path + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    data = ss.str();
  }
  // Ordered: a system message's tools keep the file's key order, as the server's requests do
  // (the templates write them as json.dumps does, in the client's order).
  auto parsed = parse_ordered_json(data, ("--messages: '" + path + "'").c_str());
  if (!parsed.ok()) return parsed.status();
  nlohmann::ordered_json j = std::move(parsed).value();
  if (j.is_object() && j.contains("messages")) j = j["messages"];
  if (!j.is_array()) {
    return invalid_argument("--messages: expected a JSON array of {\"role\", \"content\"} objects");
  }
  std::vector<tok::Message> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& m = j[i];
    const std::string where = "--messages: message " + std::to_string(i);
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return invalid_argument(where + ": needs a string \"role\"");
    }
    tok::Message msg;
    msg.role = m["role"];
    if (m.contains("content") && !m["content"].is_null()) {
      if (!m["content"].is_string())
        return invalid_argument(where + ": \"content\" must be a string");
      msg.content = m["content"];
    }
    if (m.contains("metadata") && !m["metadata"].is_null()) {
      if (!m["metadata"].is_string()) {
        return invalid_argument(where + ": \"metadata\" must be a string");
      }
      msg.metadata = m["metadata"];
    }
    if (m.contains("tools") && !m["tools"].is_null()) msg.tools = m["tools"];
    out.push_back(std::move(msg));
  }
  if (out.empty()) return invalid_argument("--messages: the list is empty");
  return out;
}

}  // namespace

int cmd_template(int argc, char** argv) {
  if (wants_help(argc, argv)) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  auto args = Args::parse(argc, argv, {"model", "messages", "template"}, {"text"});
  if (!args.ok()) return fail(args.status());
  if (!args->positional().empty()) {
    return fail(
        invalid_argument("unexpected argument '" + args->positional()[0] + "' (see --help)"));
  }
  auto model = args->require("model");
  if (!model.ok()) return fail(model.status());
  auto path = args->require("messages");
  if (!path.ok()) return fail(path.status());
  auto messages = read_messages(*path);
  if (!messages.ok()) return fail(messages.status());
  auto file = gguf::File::open(*model);
  if (!file.ok()) return fail(file.status());
  auto tok = tok::Tokenizer::from_gguf(**file);
  if (!tok.ok()) return fail(tok.status());
  auto tmpl = args->has("template") ? tok::make_chat_template(args->get("template"), **file, **tok)
                                    : tok::ChatTemplate::for_model(**file, **tok);
  if (!tmpl.ok()) return fail(tmpl.status());
  auto ids = (*tmpl)->render(*messages);
  if (!ids.ok()) return fail(ids.status());
  std::string out = "[";
  for (size_t i = 0; i < ids->size(); ++i) {
    if (i) out += ",";
    out += std::to_string((*ids)[i]);
  }
  std::printf("%s]\n", out.c_str());
  if (args->has("text")) {
    std::fprintf(stderr, "%s (%zu tokens, template %s)\n",
                 (*tok)->decode(*ids, /*render_special=*/true).c_str(), ids->size(),
                 (*tmpl)->name());
  }
  return 0;
}

}  // namespace glm::cli
