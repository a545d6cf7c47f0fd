// glmserve list [--models-dir DIR] [--json] / glmserve rm NAME [--models-dir DIR]
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/json.h"
#include "hub/store.h"

namespace glm::cli {

namespace {

constexpr char kListHelp[] =
    "usage: glmserve list [--models-dir DIR] [--json]\n"
    "\n"
    "Lists the local model store, one model a line, name first: NAME SIZE TYPE ARCH CONTEXT\n"
    "(read from each GGUF header); an adapter (glmserve pull of a PEFT or P-Tuning v2\n"
    "repository) shows \"lora adapter\" or \"ptuning adapter\" in CONTEXT's place. A name\n"
    "works wherever --model takes a file, an adapter's wherever --lora or --adapter do.\n"
    "  --models-dir DIR  the store (default $GLMSERVE_MODELS, else\n"
    "                    $XDG_DATA_HOME/glmserve/models, else ~/.local/share/glmserve/models)\n"
    "  --json            one JSON object a line instead\n";

constexpr char kRmHelp[] =
    "usage: glmserve rm NAME... [--models-dir DIR]\n"
    "\n"
    "Removes models (BASE:TAG, as glmserve list shows them) from the local store, with their\n"
    "partial downloads.\n";

std::string size_text(uint64_t n) {
  char buf[32];
  if (n >= 1000000000) {
    std::snprintf(buf, sizeof(buf), "%.1f GB", static_cast<double>(n) / 1e9);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f MB", static_cast<double>(n) / 1e6);
  }
  return buf;
}

}  // namespace

int cmd_list(int argc, char** argv) {
  if (wants_help(argc, argv)) {
    std::fputs(kListHelp, stdout);
    return 0;
  }
  StatusOr<Args> args = Args::parse(argc, argv, {"models-dir"}, {"json"});
  if (!args.ok()) return fail(args.status());
  if (!args->positional().empty()) {
    return fail(invalid_argument("list takes no arguments (see glmserve list --help)"));
  }
  StatusOr<std::string> dir = hub::store_dir(args->get("models-dir"));
  if (!dir.ok()) return fail(dir.status());
  const hub::Store store(*dir);
  StatusOr<std::vector<hub::StoreEntry>> entries = store.list();
  if (!entries.ok()) return fail(entries.status());
  if (entries->empty()) {
    std::fprintf(stderr, "no models in %s (glmserve pull REPO [QUANT] fetches one)\n",
                 dir->c_str());
    return 0;
  }
  const bool json = args->has("json");
  if (!json && ::isatty(::fileno(stdout)) == 1) {
    std::printf("%-32s %10s  %-8s %-10s %7s\n", "NAME", "SIZE", "TYPE", "ARCH", "CONTEXT");
  }
  for (const hub::StoreEntry& e : *entries) {
    if (json) {
      nlohmann::json j = {{"name", e.name.str()},
                          {"path", e.path},
                          {"size", e.size_bytes},
                          {"type", e.type},
                          {"architecture", e.architecture},
                          {"context", e.context},
                          {"repo", e.repo}};
      if (!e.error.empty()) j["error"] = e.error;
      if (!e.adapter.empty()) j["adapter"] = e.adapter;
      std::printf("%s\n", dump_json(j).c_str());
    } else if (!e.error.empty()) {
      std::printf("%-32s %10s  unreadable: %s\n", e.name.str().c_str(),
                  size_text(e.size_bytes).c_str(), e.error.c_str());
    } else if (!e.adapter.empty()) {  // no context of its own: it runs on a base model's
      std::printf("%-32s %10s  %-8s %-10s %s adapter\n", e.name.str().c_str(),
                  size_text(e.size_bytes).c_str(), e.type.c_str(), e.architecture.c_str(),
                  e.adapter.c_str());
    } else {
      std::printf("%-32s %10s  %-8s %-10s %7lld\n", e.name.str().c_str(),
                  size_text(e.size_bytes).c_str(), e.type.c_str(), e.architecture.c_str(),
                  static_cast<long long>(e.context));
    }
  }
  return 0;
}

int cmd_rm(int argc, char** argv) {
  if (wants_help(argc, argv)) {
    std::fputs(kRmHelp, stdout);
    return 0;
  }
  StatusOr<Args> args = Args::parse(argc, argv, {"models-dir"});
  if (!args.ok()) return fail(args.status());
  if (args->positional().empty()) {
    return fail(invalid_argument("expected NAME (see glmserve rm --help; glmserve list)"));
  }
  StatusOr<std::string> dir = hub::store_dir(args->get("models-dir"));
  if (!dir.ok()) return fail(dir.status());
  hub::Store store(*dir);
  for (const std::string& n : args->positional()) {
    const std::optional<hub::ModelName> name = hub::parse_model_name(n);
    if (!name) {
      return fail(invalid_argument("'" + n + "' is not a model name (BASE:TAG; glmserve list)"));
    }
    if (Status s = store.remove(*name); !s.ok()) return fail(s);
    std::fprintf(stderr, "removed %s\n", n.c_str());
  }
  return 0;
}

}  // namespace glm::cli
