// glmserve convert HF_DIR -o M.gguf [--type T]; a P-Tuning v2 checkpoint directory gives an
// adapter file (convert/ptuning_convert.h), a PEFT LoRA directory a LoRA GGUF (peft_convert.h).
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "convert/dir_kind.h"
#include "convert/hf_convert.h"
#include "convert/peft_convert.h"
#include "convert/ptuning_convert.h"
#include "core/progress.h"

namespace glm::cli {

namespace {

constexpr char kHelp[] =
    "usage: glmserve convert HF_DIR -o M.gguf [--type T]\n"
    "\n"
    "Converts a HuggingFace ChatGLM2-6B / ChatGLM3-6B / GLM-4-9B checkpoint directory\n"
    "(config.json, tokenizer.model and weights: *.safetensors or PyTorch pytorch_model*.bin,\n"
    "single or sharded with their .index.json) to GGUF in llama.cpp's chatglm layout. .bin\n"
    "files are read by a data-only unpickler: a checkpoint can never run code.\n"
    "A P-Tuning v2 checkpoint (config.json with pre_seq_len, weights holding\n"
    "transformer.prefix_encoder.*) becomes a P-Tuning adapter file instead (--type is ignored;\n"
    "docs/adapters.md).\n"
    "  --type T      f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k (default f16)\n"
    "  -o, --output  the GGUF file to write\n"
    "\n"
    "usage: glmserve convert PEFT_DIR -o A.gguf [--type f32|f16|bf16]\n"
    "A directory with adapter_config.json is a PEFT LoRA adapter (ChatGLM3's finetune_demo,\n"
    "GLM-4's LoRA fine-tuning): it converts to a LoRA GGUF as llama.cpp's\n"
    "convert_lora_to_gguf.py writes them (default f32), for --lora and serve --adapter\n"
    "(docs/adapters.md).\n";

int convert_adapter(const std::string& dir, const Args& args, const std::string& out) {
  StatusOr<DType> type = convert::parse_weight_type(args.get("type", "f32"));
  if (!type.ok()) return fail(type.status());
  convert::LoraFile lora;
  if (Status s = convert::convert_peft(dir, *type, out, &lora); !s.ok()) return fail(s);
  std::fprintf(stderr, "wrote %s (%s): LoRA for %s, %zu pairs, rank %lld, alpha %g\n", out.c_str(),
               dtype_name(*type), lora.arch.c_str(), lora.tensors.size(),
               static_cast<long long>(lora.tensors.empty() ? 0 : lora.tensors[0].rank),
               static_cast<double>(lora.alpha));
  return 0;
}

}  // namespace

int cmd_convert(int argc, char** argv) {
  if (wants_help(argc, argv)) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  StatusOr<Args> args = Args::parse(argc, argv, {"output", "type"}, {}, {{"o", "output"}});
  if (!args.ok()) return fail(args.status());
  if (args->positional().size() != 1) {
    return fail(invalid_argument("expected one HF_DIR (see glmserve convert --help)"));
  }
  StatusOr<std::string> out = args->require("output");
  if (!out.ok()) return fail(out.status());
  const convert::DirKind kind = convert::dir_kind(args->positional()[0]);
  if (kind == convert::DirKind::kLora) return convert_adapter(args->positional()[0], *args, *out);
  convert::ConvertOptions opts;
  opts.hf_dir = args->positional()[0];
  StatusOr<DType> type = convert::parse_weight_type(args->get("type", "f16"));
  if (!type.ok()) return fail(type.status());
  opts.type = *type;
  const auto t0 = std::chrono::steady_clock::now();
  if (kind == convert::DirKind::kPtuning) {
    convert::WriteReport rep;
    if (Status s = convert::convert_ptuning(opts.hf_dir, *out, &rep); !s.ok()) return fail(s);
    for (const std::string& n : rep.notes) std::fprintf(stderr, "note: %s\n", n.c_str());
    std::fprintf(stderr, "wrote %s (P-Tuning v2 adapter): %zu tensors, %.3f M parameters\n",
                 out->c_str(), rep.n_tensors, static_cast<double>(rep.n_parameters) / 1e6);
    return 0;
  }
  // Checkpoint bytes read of the total, on a terminal only.
  ProgressLine progress = ProgressLine::on_stderr("convert");
  opts.progress = [&progress](const convert::ConvertProgress& p) {
    progress.update(p.bytes_read, p.bytes_total);
  };
  convert::WriteReport rep;
  Status s = convert::convert_hf(opts, *out, &rep);
  progress.finish();
  if (!s.ok()) return fail(s);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const std::string& n : rep.notes) std::fprintf(stderr, "note: %s\n", n.c_str());
  std::fprintf(stderr, "wrote %s (%s): %zu tensors, %.1f M parameters, %.1f MB in %.1f s\n",
               out->c_str(), dtype_name(opts.type), rep.n_tensors,
               static_cast<double>(rep.n_parameters) / 1e6, static_cast<double>(rep.n_bytes) / 1e6,
               secs);
  return 0;
}

}  // namespace glm::cli
