#include "model/eval.h"

#include <numeric>

namespace glm::model {

StatusOr<std::vector<EvalRow>> evaluate(Model& model, const std::vector<int32_t>& prompt,
                                        const std::vector<int32_t>& decode,
                                        const EvalOptions& options) {
  if (prompt.empty()) return invalid_argument("evaluate: the prompt has no tokens");
  const Config& c = model.config();
  if (const std::string why = kv_type_unsupported(c, options.kv_type); !why.empty()) {
    return invalid_argument("evaluate: " + why);
  }
  const int n_pos = static_cast<int>(prompt.size() + decode.size());
  const int bt = options.block_tokens;
  const int n_blocks = (n_pos + bt - 1) / bt;
  KvPool kv(c, n_blocks, bt, options.kv_type, model.kv_host_layers());
  std::vector<int32_t> blocks(n_blocks);
  std::iota(blocks.begin(), blocks.end(), 0);
  const size_t width = options.output == OutputKind::kHidden ? c.n_embd : c.n_vocab;

  std::vector<EvalRow> rows;
  std::vector<float> out;
  SeqInput in;
  in.tokens = prompt.data();
  in.n_tokens = static_cast<int>(prompt.size());
  in.blocks = blocks.data();
  in.n_blocks = n_blocks;
  in.all_logits = true;
  in.prefix_len = static_cast<int>(prompt.size());
  in.adapter = options.adapter;
  GLM_RETURN_IF_ERROR(model.forward({in}, &kv, &out, options.output));
  for (size_t i = 0; i < prompt.size(); ++i) {
    rows.push_back({static_cast<int>(i), prompt[i],
                    std::vector<float>(out.begin() + i * width, out.begin() + (i + 1) * width)});
  }
  for (size_t i = 0; i < decode.size(); ++i) {
    out.clear();
    in.tokens = &decode[i];
    in.n_tokens = 1;
    in.n_past = static_cast<int>(prompt.size() + i);
    GLM_RETURN_IF_ERROR(model.forward({in}, &kv, &out, options.output));
    rows.push_back({in.n_past, decode[i], out});
  }
  return rows;
}

}  // namespace glm::model
