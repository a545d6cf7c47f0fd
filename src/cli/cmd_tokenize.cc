// glmserve tokenize --model M --text T [--special]    -> JSON array of ids (no prefix tokens)
// glmserve tokenize --model M --decode 1,2,3 [--render-special]  -> the text
// Works on any GGUF with a vocabulary, including vocab-only files (no tensors).
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace glm::cli {
namespace {

constexpr char kHelp[] =
    "usage: glmserve tokenize --model M.gguf (--text T | --file F | --decode 1,2,3) [flags]\n"
    "\n"
    "Prints the token ids of the text as a JSON array (no [gMASK]/BOS prefix), or with\n"
    "--decode the text of the given ids.\n"
    "\n"
    "  --model M.gguf      model or vocab-only GGUF file\n"
    "  --text T            text to tokenize\n"
    "  --file F            read the text to tokenize from a file instead\n"
    "  --special           recognise special-token text such as <|user|> (off: plain text)\n"
    "  --decode IDS        comma-separated ids to turn back into text\n"
    "  --render-special    with --decode, print control tokens as their text\n";

std::string ids_json(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(ids[i]);
  }
  return out + "]";
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  if (wants_help(argc, argv)) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  auto args =
      Args::parse(argc, argv, {"model", "text", "file", "decode"}, {"special", "render-special"});
  if (!args.ok()) return fail(args.status());
  if (!args->positional().empty()) {
    return fail(invalid_argument("unexpected argument '" + args->positional()[0] +
                                 "' (pass the text with --text)"));
  }
  auto model = args->require("model");
  if (!model.ok()) return fail(model.status());
  const int n_modes = args->has("text") + args->has("file") + args->has("decode");
  if (n_modes != 1) {
    return fail(invalid_argument("give exactly one of --text, --file or --decode (see --help)"));
  }
  auto file = gguf::File::open(*model);
  if (!file.ok()) return fail(file.status());
  auto tok = tok::Tokenizer::from_gguf(**file);
  if (!tok.ok()) return fail(tok.status());

  if (args->has("decode")) {
    auto ids = args->get_int_list("decode");
    if (!ids.ok()) return fail(ids.status());
    for (int32_t id : *ids) {
      if (id < 0 || id >= (*tok)->n_vocab()) {
        return fail(invalid_argument("--decode: token id " + std::to_string(id) +
                                     " is out of range (the vocabulary has " +
                                     std::to_string((*tok)->n_vocab()) + " tokens)"));
      }
    }
    const std::string text = (*tok)->decode(*ids, args->has("render-special"));
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
    return 0;
  }
  std::string text;
  if (args->has("file")) {
    std::ifstream in(args->get("file"), std::ios::binary);
    if (!in) return fail(not_found("--file: cannot read '" + args->get("file") + "'"));
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  } else {
    text = args->get("text");
  }
  const std::vector<int32_t> ids = (*tok)->encode(text, args->has("special"));
  std::printf("%s\n", ids_json(ids).c_str());
  return 0;
}

}  // namespace glm::cli
