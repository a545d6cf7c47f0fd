// glmserve gen-model --arch A --preset P [--type T] [--seed N] [--vocab FILE] -o M.gguf
#include <chrono>
#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "convert/gen_model.h"
#include "convert/lora_file.h"
#include "core/progress.h"

namespace glm::cli {

namespace {

constexpr char kHelp[] =
    "usage: glmserve gen-model --arch A --preset P [--type T] [--seed N] [--vocab FILE] -o M.gguf\n"
    "\n"
    "Writes a model with RANDOM weights (for tests and benchmarks: it produces gibberish) in\n"
    "llama.cpp's GGUF layout, so llama.cpp runs it too.\n"
    "  --arch A      chatglm1 | chatglm2 | chatglm3 | glm4 | llama | glm4-0414 (GLM-4-0414 and\n"
    "                GLM-Z1: llama.cpp's glm4 layout) | glm4moe (GLM-4.5 mixture of experts:\n"
    "                tiny 8 experts top-2 + 1 shared; small 32 top-4; air: GLM-4.5-Air's\n"
    "                128 experts of 1408, top-8, at hidden 4096 in 3 layers; tiny-air,\n"
    "                tiny-355b: GLM-4.5-Air's and GLM-4.5's heads at hidden 256; no 6b) |\n"
    "                glm47-flash (GLM-4.7-Flash: latent attention and glm4moe's experts;\n"
    "                tiny; tiny-wide: its attention's widths on the tiny trunk; flash:\n"
    "                its widths in 3 layers), each with one MTP block as\n"
    "                their real files carry (nextn)\n"
    "  --no-mtp      glm4moe, glm47-flash: leave the MTP block out (a trunk-only file)\n"
    "  --preset P    tiny (hidden 64, 2 layers) | small (hidden 1024, 12 layers, ~270M params)\n"
    "                | 6b (the real ChatGLM3-6B shape; GLM-4-9B for glm4; GLM-4-9B-0414 for\n"
    "                glm4-0414; LLaMA-2-7B for llama)\n"
    "  --type T      f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k (default f16)\n"
    "  --seed N      random seed (default 0); the same seed writes the same bytes\n"
    "  --vocab FILE  embed a real tokenizer.model (ChatGLM2/3 sentencepiece or GLM-4 tiktoken);\n"
    "                default: a small synthetic vocabulary with the family's special tokens\n"
    "  -o, --output  the GGUF file to write\n"
    "\n"
    "usage: glmserve gen-model --lora-of BASE.gguf [--rank R] [--alpha A] [--seed N]\n"
    "                          [--type f32|f16|bf16] [--targets M1,M2] -o A.gguf\n"
    "Writes a RANDOM LoRA adapter for BASE (every weight matrix of its layers) in llama.cpp's\n"
    "LoRA GGUF layout (docs/adapters.md): --rank default 8, --alpha default 16 (scale = alpha /\n"
    "rank), A and B ~ N(0, 0.05), --type default f32; --targets: only those matrices\n"
    "(attn_qkv attn_q attn_k attn_v attn_output ffn_up ffn_gate ffn_down; default all).\n";

// gen-model --lora-of: the random LoRA writer.
int gen_lora(const Args& args) {
  StatusOr<std::string> out = args.require("output");
  if (!out.ok()) return fail(out.status());
  StatusOr<std::unique_ptr<gguf::File>> base = gguf::File::open(args.get("lora-of"));
  if (!base.ok()) return fail(base.status());
  StatusOr<int64_t> rank = args.get_int("rank", 8);
  if (!rank.ok()) return fail(rank.status());
  StatusOr<double> alpha = args.get_float("alpha", 16.0);
  if (!alpha.ok()) return fail(alpha.status());
  StatusOr<int64_t> seed = args.get_int("seed", 0);
  if (!seed.ok()) return fail(seed.status());
  if (*seed < 0) return fail(invalid_argument("--seed must be >= 0"));
  StatusOr<DType> type = convert::parse_weight_type(args.get("type", "f32"));
  if (!type.ok()) return fail(type.status());
  std::vector<std::string> targets;
  for (std::string rest = args.get("targets"); !rest.empty();) {
    const size_t comma = rest.find(',');
    targets.push_back(rest.substr(0, comma));
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
  }
  StatusOr<convert::LoraFile> lora = convert::random_lora(**base, *rank, static_cast<float>(*alpha),
                                                          static_cast<uint64_t>(*seed), targets);
  if (!lora.ok()) return fail(lora.status());
  if (Status s = convert::write_lora_file(*lora, *type, *out); !s.ok()) return fail(s);
  std::fprintf(stderr, "wrote %s: random LoRA of %s, rank %lld, alpha %g, seed %lld: %zu pairs\n",
               out->c_str(), (*base)->path().c_str(), static_cast<long long>(*rank), *alpha,
               static_cast<long long>(*seed), lora->tensors.size());
  return 0;
}

}  // namespace

int cmd_gen_model(int argc, char** argv) {
  if (wants_help(argc, argv)) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  StatusOr<Args> args = Args::parse(
      argc, argv,
      {"arch", "preset", "type", "seed", "vocab", "output", "lora-of", "rank", "alpha", "targets"},
      {"no-mtp"}, {{"o", "output"}});
  if (!args.ok()) return fail(args.status());
  if (!args->positional().empty()) {
    return fail(invalid_argument("unexpected argument '" + args->positional()[0] +
                                 "' (see glmserve gen-model --help)"));
  }
  if (args->has("lora-of")) return gen_lora(*args);
  StatusOr<std::string> arch = args->require("arch");
  if (!arch.ok()) return fail(arch.status());
  StatusOr<std::string> out = args->require("output");
  if (!out.ok()) return fail(out.status());
  convert::GenOptions opts;
  StatusOr<convert::Family> a = convert::parse_family(*arch);
  if (!a.ok()) return fail(a.status());
  opts.family = *a;
  opts.preset = args->get("preset", "tiny");
  StatusOr<DType> type = convert::parse_weight_type(args->get("type", "f16"));
  if (!type.ok()) return fail(type.status());
  opts.type = *type;
  StatusOr<int64_t> seed = args->get_int("seed", 0);
  if (!seed.ok()) return fail(seed.status());
  if (*seed < 0) return fail(invalid_argument("--seed must be >= 0"));
  opts.seed = static_cast<uint64_t>(*seed);
  opts.vocab_path = args->get("vocab");
  opts.mtp = !args->has("no-mtp");
  if (!opts.mtp && opts.family != convert::Family::kGLM4MoE &&
      opts.family != convert::Family::kGLM47Flash) {
    return fail(invalid_argument(
        "--no-mtp is for --arch glm4moe and glm47-flash (the layouts with an MTP block)"));
  }

  const auto t0 = std::chrono::steady_clock::now();
  convert::WriteReport rep;
  ProgressLine progress = ProgressLine::on_stderr("gen-model");  // a terminal only
  opts.progress = progress.fn();
  Status s = convert::generate_model(opts, *out, &rep);
  progress.finish();
  if (!s.ok()) return fail(s);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const std::string& n : rep.notes) std::fprintf(stderr, "note: %s\n", n.c_str());
  std::fprintf(stderr,
               "wrote %s: %s %s, %s, seed %llu: %zu tensors, %.1f M parameters, %.1f MB of "
               "weights in %.1f s (random weights)\n",
               out->c_str(), arch->c_str(), opts.preset.c_str(), dtype_name(opts.type),
               static_cast<unsigned long long>(opts.seed), rep.n_tensors,
               static_cast<double>(rep.n_parameters) / 1e6, static_cast<double>(rep.n_bytes) / 1e6,
               secs);
  return 0;
}

}  // namespace glm::cli
