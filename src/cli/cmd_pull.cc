// glmserve pull REPO [FILE|QUANT] [--revision R] [--endpoint URL] [--models-dir DIR] [--name N]
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "convert/dir_kind.h"
#include "convert/hf_convert.h"
#include "convert/peft_convert.h"
#include "convert/ptuning_convert.h"
#include "core/progress.h"
#include "hub/pull.h"
#include "hub/store.h"

namespace glm::cli {

namespace {

constexpr char kHelp[] =
    "usage: glmserve pull REPO [FILE|QUANT] [--revision R] [--endpoint URL] [--models-dir DIR]\n"
    "                     [--name NAME] [--type T] [--keep-checkpoint] [--connections N]\n"
    "\n"
    "Downloads a GGUF file of a Hugging Face-compatible hub repository into the local model\n"
    "store and prints its path as the last line. FILE is a path as the repository lists it;\n"
    "QUANT picks by quantization (Q4_0, q4_k_m: case-insensitive); without either, the\n"
    "repository must hold exactly one GGUF. Interrupted downloads (Ctrl-C, a crash, a dropped\n"
    "connection) resume where they stopped; every file is checked against the hub's sha256\n"
    "before it is used. The model is then addressed as BASE:TAG (glmserve list; docs/hub.md).\n"
    "  --revision R      branch, tag or commit (default main)\n"
    "  --endpoint URL    the hub (default $HF_ENDPOINT, else https://huggingface.co)\n"
    "  --models-dir DIR  the store (default $GLMSERVE_MODELS, else\n"
    "                    $XDG_DATA_HOME/glmserve/models, else ~/.local/share/glmserve/models)\n"
    "  --name NAME       store it as NAME (BASE or BASE:TAG) instead of the derived name\n"
    "  --connections N   a large file comes over up to N connections at once, each range\n"
    "                    resumable (default 4; 1 = one connection; ranges of 16 MB at least)\n"
    "A repository holding an HF checkpoint (config.json, safetensors or .bin, tokenizer)\n"
    "instead of GGUF files is downloaded, converted (glmserve convert) and stored as BASE:TYPE;\n"
    "a PEFT LoRA adapter (adapter_config.json) as BASE:lora, a P-Tuning v2 checkpoint\n"
    "(config.json with pre_seq_len) as BASE:ptuning, for --adapter and --lora:\n"
    "  --type T          its weight type: f32 f16 bf16 q8_0 q4_0 ... (default q4_0; a LoRA\n"
    "                    adapter's f32, or f16 / bf16)\n"
    "  --keep-checkpoint keep the downloaded checkpoint (DIR/.staging/...) after converting\n"
    "Environment: HF_TOKEN (sent as a bearer token, for private and gated repositories).\n";

std::atomic<bool> g_interrupted{false};

void on_signal(int) { g_interrupted.store(true); }

std::string mb(uint64_t n) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MB", static_cast<double>(n) / 1e6);
  return buf;
}

// The names of the directories in `dir` (none if it does not exist).
std::set<std::string> subdirs(const std::string& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.is_directory(ec)) out.insert(e.path().filename().string());
  }
  return out;
}

}  // namespace

int cmd_pull(int argc, char** argv) {
  if (wants_help(argc, argv)) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  StatusOr<Args> args =
      Args::parse(argc, argv, {"revision", "endpoint", "models-dir", "name", "type", "connections"},
                  {"keep-checkpoint"}, {});
  if (!args.ok()) return fail(args.status());
  const std::vector<std::string>& pos = args->positional();
  if (pos.empty() || pos.size() > 2) {
    return fail(invalid_argument("expected REPO [FILE|QUANT] (see glmserve pull --help)"));
  }
  hub::PullOptions o;
  o.repo = pos[0];
  o.want = pos.size() > 1 ? pos[1] : "";
  o.revision = args->get("revision");
  o.endpoint = args->get("endpoint");
  o.models_dir = args->get("models-dir");
  o.name = args->get("name");
  if (const char* t = std::getenv("HF_TOKEN"); t != nullptr) o.token = t;
  StatusOr<DType> type = convert::parse_weight_type(args->get("type", "q4_0"));
  if (!type.ok()) return fail(type.status());
  o.convert_tag = dtype_name(*type);
  o.keep_checkpoint = args->has("keep-checkpoint");
  // What `glmserve convert` does with the same directory; a LoRA adapter's type is f32 unless
  // --type says otherwise (as convert_lora_to_gguf.py's default).
  o.convert = [&](const std::string& hf_dir, const std::string& out) -> Status {
    convert::WriteReport rep;
    switch (convert::dir_kind(hf_dir)) {
      case convert::DirKind::kLora: {
        convert::LoraFile lora;
        return convert::convert_peft(hf_dir, args->has("type") ? *type : DType::kF32, out, &lora);
      }
      case convert::DirKind::kPtuning:
        return convert::convert_ptuning(hf_dir, out, &rep);
      case convert::DirKind::kModel:
        break;
    }
    convert::ConvertOptions c;
    c.hf_dir = hf_dir;
    c.type = *type;
    return convert::convert_hf(c, out, &rep);
  };
  // The first retry's wait; tests shorten it.
  if (const char* b = std::getenv("GLMSERVE_PULL_BACKOFF_MS"); b != nullptr && b[0] != '\0') {
    o.download.backoff_ms = std::max(1L, std::atol(b));
  }
  StatusOr<int64_t> connections = args->get_int("connections", o.download.connections);
  if (!connections.ok()) return fail(connections.status());
  if (*connections < 1 || *connections > 16) {
    return fail(invalid_argument("--connections must be in [1, 16]"));
  }
  o.download.connections = static_cast<int>(*connections);
  // The smallest range given its own connection; tests make it small.
  if (const char* m = std::getenv("GLMSERVE_PULL_MIN_SEGMENT_BYTES");
      m != nullptr && m[0] != '\0') {
    o.download.min_segment_bytes = std::max(1LL, std::atoll(m));
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  o.download.cancel = &g_interrupted;

  ProgressLine progress("pull", ::isatty(::fileno(stderr)) == 1);
  o.download.progress = [&](uint64_t done, uint64_t total) { progress.update(done, total); };
  o.download.note = [&](const std::string& s) { progress.note(s); };
  o.note = o.download.note;
  auto store = hub::store_dir(o.models_dir);
  const std::set<std::string> dirs_before = store.ok() ? subdirs(*store) : std::set<std::string>{};
  StatusOr<hub::PullResult> r = hub::pull(o);
  progress.finish();
  if (!r.ok()) {
    // A pull that failed before it wrote anything leaves no empty store/NAME/ behind (one
    // holding a .part stays: the next pull resumes it).
    if (store.ok()) {
      for (const std::string& d : subdirs(*store)) {
        if (dirs_before.count(d) == 0) ::rmdir((*store + "/" + d).c_str());  // only when empty
      }
    }
    return fail(r.status());
  }
  if (r->already_present) {
    std::fprintf(stderr, "%s is up to date (%s from %s)\n", r->name.str().c_str(),
                 r->file.path.c_str(), o.repo.c_str());
  } else {
    std::string how = r->download.resumed_from > 0 ? ", resumed at " + mb(r->download.resumed_from)
                                                   : std::string();
    if (r->converted) {
      std::fprintf(stderr, "converted %s from %s (%s of checkpoint files, verified)%s\n",
                   r->name.str().c_str(), o.repo.c_str(), mb(r->file.size).c_str(),
                   o.keep_checkpoint ? (" kept in " + r->checkpoint_dir).c_str() : "");
    } else {
      std::fprintf(stderr, "pulled %s: %s from %s (%s, %s verified%s)\n", r->name.str().c_str(),
                   r->file.path.c_str(), o.repo.c_str(), mb(r->file.size).c_str(),
                   r->file.sha256.empty() ? "size" : "sha256", how.c_str());
    }
  }
  if (!r->adapter.empty()) {
    std::fprintf(stderr,
                 "%s is a %s adapter: serve it with --adapter NAME=%s on its base model, or "
                 "merge a LoRA with --lora %s (docs/adapters.md)\n",
                 r->name.str().c_str(), r->adapter == "lora" ? "LoRA" : "P-Tuning v2",
                 r->name.str().c_str(), r->name.str().c_str());
  }
  std::printf("%s\n", r->path.c_str());
  return 0;
}

}  // namespace glm::cli
