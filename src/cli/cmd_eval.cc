// glmserve eval: logits or final-norm hidden states for given tokens, one JSON line per position
// (docs/cli.md): {"pos":P,"token":T,"values":[...]} with 9 significant digits (exact for float32).
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/generate_common.h"
#include "gguf/gguf.h"
#include "model/eval.h"
#include "model/model.h"
#include "model/ptuning.h"

namespace glm::cli {
namespace {

constexpr const char* kHelp =
    "usage: glmserve eval --model M.gguf --tokens 0,1,2 [--decode 3,4] [--output logits|hidden]\n"
    "                     [--kv f32|f16|q8_0] [--threads N] [--device D] [--gpu-layers N]\n"
    "                     [--cpu-moe N|all|auto]\n"
    "                     [--ptuning A.gguf] [--lora A.gguf[:scale]]...\n"
    "Prefills --tokens in one batch (a row for every position), then feeds each --decode token\n"
    "as its own step through the KV cache. Prints one JSON object per line per position:\n"
    "  {\"pos\":P,\"token\":T,\"values\":[...]}\n"
    "  --output  logits (LM head, default) or hidden (final-norm output)\n"
    "  --kv      KV cache element type: f32 (default, exact), f16 (the server's default) or\n"
    "            q8_0 (GGUF Q8_0 rows: about half the memory of f16)\n"
    "  --threads worker threads (default: physical cores)\n"
    "  --device  auto, cpu, vulkan or vulkan:N (default auto: a discrete GPU, else the CPU)\n"
    "  --gpu-layers N  layers on the GPU (-1, the default: as many as fit)\n"
    "  --cpu-moe N|all|auto  GLM-4.5 on a GPU: the routed experts of the first N layers on\n"
    "            the CPU (auto, the default: as few as let every layer fit)\n"
    "  --ptuning A.gguf  run with a P-Tuning v2 prefix (an adapter file of glmserve convert;\n"
    "            its K/V are computed once at load and attended ahead of the tokens)\n"
    "  --lora A.gguf[:S]  merge a LoRA adapter into the weights at load, scale S (default 1;\n"
    "            repeatable; docs/adapters.md)\n";

void print_row(const model::EvalRow& row, std::string* buf) {
  buf->clear();
  buf->append("{\"pos\":" + std::to_string(row.pos) + ",\"token\":" + std::to_string(row.token) +
              ",\"values\":[");
  char num[32];
  for (size_t i = 0; i < row.values.size(); ++i) {
    if (i) buf->push_back(',');
    const float v = row.values[i];
    if (std::isfinite(v)) {
      const int len = std::snprintf(num, sizeof(num), "%.9g", v);
      buf->append(num, len);
    } else {
      buf->append("null");  // JSON has no NaN/inf
    }
  }
  buf->append("]}\n");
  std::fwrite(buf->data(), 1, buf->size(), stdout);
}

}  // namespace

int cmd_eval(int argc, char** argv) {
  if (wants_help(argc, argv)) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  StatusOr<Args> args = Args::parse(argc, argv,
                                    {"model", "tokens", "decode", "output", "kv", "threads",
                                     "device", "gpu-layers", "cpu-moe", "ptuning", "lora"});
  if (!args.ok()) return fail(args.status());
  StatusOr<std::string> path = args->require("model");
  if (!path.ok()) return fail(path.status());
  StatusOr<std::vector<int32_t>> tokens = args->get_int_list("tokens");
  if (!tokens.ok()) return fail(tokens.status());
  if (tokens->empty()) {
    return fail(invalid_argument("missing --tokens: give the prompt ids, e.g. --tokens 0,1,2"));
  }
  StatusOr<std::vector<int32_t>> decode = args->get_int_list("decode");
  if (!decode.ok()) return fail(decode.status());
  model::EvalOptions options;
  const std::string output = args->get("output", "logits");
  if (output == "hidden") {
    options.output = model::OutputKind::kHidden;
  } else if (output != "logits") {
    return fail(invalid_argument("--output: expected logits or hidden, got '" + output + "'"));
  }
  if (Status st = kv_type_flag(*args, "f32", &options.kv_type); !st.ok()) return fail(st);
  StatusOr<int64_t> threads = args->get_int("threads", 0);
  if (!threads.ok()) return fail(threads.status());
  if (*threads < 0 || *threads > 1024) {
    return fail(invalid_argument("--threads: expected 0 (all cores) to 1024"));
  }

  StatusOr<std::unique_ptr<gguf::File>> file = gguf::File::open(*path);
  if (!file.ok()) return fail(file.status());
  model::LoadOptions load;
  load.n_threads = static_cast<int>(*threads);
  if (Status st = device_flags(*args, &load.device, &load.gpu_layers, &load.cpu_moe); !st.ok())
    return fail(st);
  if (Status st = lora_flags(*args, &load.lora); !st.ok()) return fail(st);
  StatusOr<std::unique_ptr<model::Model>> m =
      model::load_model(std::shared_ptr<const gguf::File>(std::move(*file)), load);
  if (!m.ok()) return fail(m.status());
  model::Adapter adapter;
  if (const std::string ap = args->get("ptuning", ""); !ap.empty()) {
    StatusOr<std::unique_ptr<gguf::File>> af = gguf::File::open(ap);
    if (!af.ok()) return fail(af.status());
    if (Status st = model::load_ptuning(**af, (*m)->config(), &adapter.prefix); !st.ok()) {
      return fail(st);
    }
    adapter.name = ap;
    options.adapter = &adapter;
  }
  StatusOr<std::vector<model::EvalRow>> rows = model::evaluate(**m, *tokens, *decode, options);
  if (!rows.ok()) return fail(rows.status());
  std::string buf;
  for (const model::EvalRow& row : *rows) print_row(row, &buf);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace glm::cli
