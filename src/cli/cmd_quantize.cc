// glmserve quantize IN OUT TYPE
#include <chrono>
#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "convert/model_spec.h"
#include "convert/quantize.h"
#include "core/progress.h"

namespace glm::cli {

namespace {

constexpr char kHelp[] =
    "usage: glmserve quantize IN.gguf OUT.gguf TYPE\n"
    "\n"
    "Re-encodes every 2-D weight of IN to TYPE (f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k\n"
    "q6_k); norms and biases stay F32; the output head becomes q6_k for quantized types (as\n"
    "llama.cpp does). A row length that TYPE's block does not divide falls back to a type that\n"
    "fits (q4_k -> q5_0, q6_k -> q8_0, ...), and each fallback is printed.\n";

}  // namespace

int cmd_quantize(int argc, char** argv) {
  if (wants_help(argc, argv)) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  StatusOr<Args> args = Args::parse(argc, argv, {});
  if (!args.ok()) return fail(args.status());
  if (args->positional().size() != 3) {
    return fail(invalid_argument("expected IN OUT TYPE (see glmserve quantize --help)"));
  }
  const std::string& in = args->positional()[0];
  const std::string& out = args->positional()[1];
  StatusOr<DType> type = convert::parse_weight_type(args->positional()[2]);
  if (!type.ok()) return fail(type.status());
  const auto t0 = std::chrono::steady_clock::now();
  convert::QuantizeReport rep;
  ProgressLine progress = ProgressLine::on_stderr("quantize");  // a terminal only
  Status s = convert::quantize_file(in, out, *type, &rep, progress.fn());
  progress.finish();
  if (!s.ok()) return fail(s);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const std::string& n : rep.notes) std::fprintf(stderr, "note: %s\n", n.c_str());
  std::fprintf(
      stderr, "wrote %s (%s): %zu tensors re-encoded, %zu copied, %.1f MB -> %.1f MB in %.1f s\n",
      out.c_str(), dtype_name(*type), rep.n_converted, rep.n_copied,
      static_cast<double>(rep.bytes_in) / 1e6, static_cast<double>(rep.bytes_out) / 1e6, secs);
  return 0;
}

}  // namespace glm::cli
