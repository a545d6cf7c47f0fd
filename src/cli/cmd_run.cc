// glmserve run: one generation streamed to stdout, through the engine in-process (the same
// scheduler, KV cache and sampler as the server). Timings go to stderr.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/generate_common.h"
#include "core/progress.h"
#include "engine/engine.h"

namespace glm::cli {
namespace {

constexpr const char* kHelp =
    "usage: glmserve run --model M.gguf --prompt TEXT [flags]\n"
    "Generates a reply to TEXT (as one user message in the model's chat template) and streams\n"
    "it to stdout, then a newline; a summary line with timings goes to stderr. llama-cli's\n"
    "-m, -p, -c, -ngl, -n and -t are --model, --prompt, --ctx-size, --gpu-layers, --max-tokens\n"
    "and --threads.\n"
    "  -p, --prompt TEXT    the prompt\n"
    "  --system TEXT        a system message before it (chat template only)\n"
    "  --raw                no chat template: continue TEXT as plain text (on a terminal\n"
    "                       the prompt is shown before its continuation)\n"
    "  --grammar-file F     the answer is a sentence of the GBNF grammar in F (rule root)\n"
    "  --json-schema-file F the answer is JSON valid against the JSON Schema in F\n"
    "  --quiet              no summary line on stderr\n";

}  // namespace

int cmd_run(int argc, char** argv) {
  if (wants_help(argc, argv)) {
    std::fputs(kHelp, stdout);
    std::fputs(kGenerateFlagsHelp, stdout);
    return 0;
  }
  std::set<std::string> flags = kGenerateFlags;
  flags.insert({"prompt", "system", "grammar-file", "json-schema-file"});
  // llama-cli's -m and -p, which its users type first.
  std::map<std::string, std::string> aliases = kGenerateAliases;
  aliases.emplace("p", "prompt");
  StatusOr<Args> args = Args::parse(argc, argv, flags, {"raw", "quiet"}, aliases);
  if (!args.ok()) return fail(args.status());
  if (!args->positional().empty()) {
    return fail(invalid_argument("unexpected argument '" + args->positional()[0] +
                                 "' (give the text with --prompt)"));
  }
  StatusOr<std::string> prompt = args->require("prompt");
  if (!prompt.ok()) return fail(prompt.status());
  StatusOr<engine::Options> options = engine_options(*args);
  if (!options.ok()) return fail(options.status());
  StatusOr<engine::SamplingParams> params = sampling_params(*args, 256);
  if (!params.ok()) return fail(params.status());

  engine::Request request;
  request.id = "run";
  request.params = *params;
  // Constrained output (docs/grammar.md): the engine compiles it and refuses a bad one.
  for (const char* flag : {"grammar-file", "json-schema-file"}) {
    if (!args->has(flag)) continue;
    if (request.constraint.active()) {
      return fail(invalid_argument("give --grammar-file or --json-schema-file, not both"));
    }
    std::ifstream f(args->get(flag), std::ios::binary);
    if (!f)
      return fail(
          invalid_argument(std::string("--") + flag + ": cannot read '" + args->get(flag) + "'"));
    request.constraint.text.assign(std::istreambuf_iterator<char>(f), {});
    request.constraint.kind = std::string(flag) == "grammar-file"
                                  ? generation::Constraint::Kind::kGbnf
                                  : generation::Constraint::Kind::kJsonSchema;
  }
  request.raw = args->has("raw");
  if (request.raw) {
    if (args->has("system"))
      return fail(
          invalid_argument("--system needs the chat template "
                           "(drop --raw)"));
    request.prompt = *prompt;
  } else {
    if (args->has("system")) request.messages.push_back({"system", args->get("system")});
    request.messages.push_back({"user", *prompt});
  }

  ProgressLine loading = ProgressLine::on_stderr("loading");  // a terminal only
  options->load_progress = loading.fn();
  auto engine = engine::load_engine(*options);
  loading.finish();
  if (!engine.ok()) return fail(engine.status());
  // On a terminal a continued text is shown whole, prompt first (as llama-cli does); a pipe
  // gets the continuation only.
  if (request.raw && isatty(STDOUT_FILENO)) {
    std::fputs(request.prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  Generation gen(stdout);
  const Status st = (*engine)->submit(std::move(request), gen.sink());
  if (!st.ok()) return fail(st);
  const engine::Event done = gen.wait();
  std::fputc('\n', stdout);
  std::fflush(stdout);
  (*engine)->drain(std::chrono::milliseconds(0));
  if (done.type == engine::EventType::kError) return fail(done.error);
  if (!gen.notice().empty()) std::fprintf(stderr, "glmserve: %s\n", gen.notice().c_str());
  if (!args->has("quiet")) std::fprintf(stderr, "%s\n", summary_line(done).c_str());
  return 0;
}

}  // namespace glm::cli
