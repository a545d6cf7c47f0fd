#include "model/weights.h"

#include <cstring>

#include "arch/arch.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/mapped_file.h"
#include "kernels/quant.h"
#include "model/config.h"

namespace glm::model {

std::string WeightLoader::shape_str(const std::vector<int64_t>& shape) const {
  std::string s = "{";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "}";
}

Status WeightLoader::matrix(const std::string& name, int64_t rows, int64_t cols,
                            kernels::WeightView* out) {
  const gguf::TensorInfo* t = file_.tensor(name);
  const std::string expected = shape_str({cols, rows});
  if (t == nullptr) {
    return bad_file(file_.path() + ": tensor " + name + " is missing (expected shape " + expected +
                    "); the file is incomplete or not of this architecture");
  }
  if (t->shape.size() != 2 || t->shape[0] != cols || t->shape[1] != rows) {
    return bad_file(file_.path() + ": tensor " + name + " has shape " + shape_str(t->shape) +
                    ", expected " + expected + " from the metadata");
  }
  const DTypeInfo& info = dtype_info(t->type);
  if (!info.supported || !kernels::can_dequantize(t->type)) {
    return unsupported(file_.path() + ": tensor " + name + " has weight type " + info.name +
                       ", which glmserve cannot compute with (requantize the file, e.g. to "
                       "q8_0 or q4_0)");
  }
  if (cols % info.block_size != 0) {
    return bad_file(file_.path() + ": tensor " + name + " row length " + std::to_string(cols) +
                    " is not a multiple of the " + info.name + " block size");
  }
  if (t->data == nullptr) return bad_file(file_.path() + ": tensor " + name + " has no data");
  out->type = t->type;
  out->data = t->data;
  out->n_rows = rows;
  out->n_cols = cols;
  return Status::Ok();
}

Status WeightLoader::experts(const std::string& name, int64_t n_expert, int64_t rows, int64_t cols,
                             kernels::WeightView* out) {
  const gguf::TensorInfo* t = file_.tensor(name);
  const std::string expected = shape_str({cols, rows, n_expert});
  if (t == nullptr) {
    return bad_file(file_.path() + ": tensor " + name + " is missing (expected shape " + expected +
                    "); the file is incomplete or not of this architecture");
  }
  if (t->shape.size() != 3 || t->shape[0] != cols || t->shape[1] != rows ||
      t->shape[2] != n_expert) {
    return bad_file(file_.path() + ": tensor " + name + " has shape " + shape_str(t->shape) +
                    ", expected " + expected +
                    " from the metadata (expert_count, expert_feed_forward_length)");
  }
  const DTypeInfo& info = dtype_info(t->type);
  if (!info.supported || !kernels::can_dequantize(t->type) || cols % info.block_size != 0) {
    return unsupported(file_.path() + ": tensor " + name + " has weight type " + info.name +
                       ", which glmserve cannot compute with at row length " +
                       std::to_string(cols));
  }
  if (t->data == nullptr) return bad_file(file_.path() + ": tensor " + name + " has no data");
  out->type = t->type;
  out->data = t->data;
  out->n_rows = rows * n_expert;
  out->n_cols = cols;
  return Status::Ok();
}

Status WeightLoader::vector(const std::string& name, int64_t n, const float** out, bool optional) {
  *out = nullptr;
  const gguf::TensorInfo* t = file_.tensor(name);
  if (t == nullptr) {
    if (optional) return Status::Ok();
    return bad_file(file_.path() + ": tensor " + name + " is missing (expected shape {" +
                    std::to_string(n) + "})");
  }
  if (t->n_elements() != n || t->shape.empty() || t->shape[0] != n) {
    return bad_file(file_.path() + ": tensor " + name + " has shape " + shape_str(t->shape) +
                    ", expected {" + std::to_string(n) + "}");
  }
  if (t->data == nullptr) return bad_file(file_.path() + ": tensor " + name + " has no data");
  const bool aligned = reinterpret_cast<uintptr_t>(t->data) % alignof(float) == 0;
  if (t->type == DType::kF32 && aligned) {
    *out = reinterpret_cast<const float*>(t->data);
    return Status::Ok();
  }
  const DTypeInfo& info = dtype_info(t->type);
  if (t->type != DType::kF32 && (!kernels::can_dequantize(t->type) || n % info.block_size != 0)) {
    return unsupported(file_.path() + ": tensor " + name + " has type " + info.name +
                       ", which glmserve cannot read as a vector");
  }
  auto v = std::make_unique<std::vector<float>>(n);
  if (t->type == DType::kF32) {
    std::memcpy(v->data(), t->data, n * sizeof(float));
  } else {
    kernels::dequantize_row_ref(t->type, t->data, v->data(), n);
  }
  *out = v->data();
  weights_->owned.push_back(std::move(v));
  return Status::Ok();
}

size_t repack(Weights* weights, kernels::ThreadPool* pool, const ProgressFn& progress) {
  std::vector<kernels::WeightView*> views;  // empty views are skipped below
  auto add_layer = [&](LayerWeights& l) {
    for (kernels::WeightView* v : {&l.qkv, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_up, &l.ffn_gate,
                                   &l.ffn_down, &l.wq_a, &l.wq_b, &l.wkv_a, &l.wk_b, &l.wv_b}) {
      views.push_back(v);
    }
    // GLM-4.5's experts, stacked: packed as one matrix, each expert's rows are whole groups of
    // 16 (expert_slice points into them), and its shared expert.
    for (kernels::WeightView* v : {&l.moe.gate_exps, &l.moe.up_exps, &l.moe.down_exps,
                                   &l.moe.gate_shexp, &l.moe.up_shexp, &l.moe.down_shexp}) {
      views.push_back(v);
    }
  };
  for (LayerWeights& l : weights->layers) add_layer(l);
  views.push_back(&weights->output);
  add_layer(weights->mtp.layer);  // the MTP block's, where the file has one
  views.push_back(&weights->mtp.eh_proj);
  views.push_back(&weights->mtp.head);
  uint64_t total = 0, done = 0;  // mapped bytes to copy, for `progress`
  for (const kernels::WeightView* v : views) {
    if (v->data != nullptr && v->packed == nullptr)
      total += row_bytes(v->type, v->n_cols) * v->n_rows;
  }
  size_t bytes = 0;
  for (kernels::WeightView* v : views) {
    if (v->data == nullptr || v->packed != nullptr) continue;
    done += row_bytes(v->type, v->n_cols) * v->n_rows;
    kernels::PackedWeight p = kernels::PackedWeight::pack(*v, pool);
    // No packed layout for this type: a plain copy, so that all weights live in owned memory
    // (mapped file pages can be reclaimed under pressure and read back from disk mid-decode).
    if (p.empty()) p = kernels::PackedWeight::copy(*v, pool);
    if (p.empty()) continue;
    const void* mapped = v->data;
    const int64_t copied_rows = p.layout() == kernels::PackedLayout::kNone ? v->n_rows : p.n_rows();
    p.attach(v);
    bytes += p.bytes();
    MappedFile::release(mapped, copied_rows * row_bytes(v->type, v->n_cols));
    weights->packed.push_back(std::move(p));
    if (progress) progress(done, total);
  }
  return bytes;
}

namespace {

// Layer `layer` of w: a trunk layer, or the MTP block's after them.
LayerWeights& layer_of(Weights* w, int layer) {
  return layer < static_cast<int>(w->layers.size()) ? w->layers[layer] : w->mtp.layer;
}

}  // namespace

kernels::WeightView* matrix_slot(Weights* w, arch::Slot slot, int layer) {
  using arch::Slot;
  if (slot == Slot::kTokenEmbd) return &w->token_embd;
  if (slot == Slot::kOutput) return &w->output;
  if (slot == Slot::kNextnEhProj) return &w->mtp.eh_proj;
  if (slot == Slot::kNextnEmbedTokens) return &w->mtp.embed;
  if (slot == Slot::kNextnHead) return &w->mtp.head;
  if (layer < 0) return nullptr;
  LayerWeights& l = layer_of(w, layer);
  switch (slot) {
    case Slot::kAttnQkv:
      return &l.qkv;
    case Slot::kAttnQ:
      return &l.wq;
    case Slot::kAttnK:
      return &l.wk;
    case Slot::kAttnV:
      return &l.wv;
    case Slot::kAttnOut:
      return &l.wo;
    case Slot::kFfnGate:
      return &l.ffn_gate;
    case Slot::kFfnUp:
      return &l.ffn_up;
    case Slot::kFfnDown:
      return &l.ffn_down;
    case Slot::kFfnGateInp:
      return &l.moe.gate_inp;
    case Slot::kFfnGateExps:
      return &l.moe.gate_exps;
    case Slot::kFfnUpExps:
      return &l.moe.up_exps;
    case Slot::kFfnDownExps:
      return &l.moe.down_exps;
    case Slot::kFfnGateShexp:
      return &l.moe.gate_shexp;
    case Slot::kFfnUpShexp:
      return &l.moe.up_shexp;
    case Slot::kFfnDownShexp:
      return &l.moe.down_shexp;
    case Slot::kAttnQA:
      return &l.wq_a;
    case Slot::kAttnQB:
      return &l.wq_b;
    case Slot::kAttnKvAMqa:
      return &l.wkv_a;
    case Slot::kAttnKB:
      return &l.wk_b;
    case Slot::kAttnVB:
      return &l.wv_b;
    default:
      return nullptr;
  }
}

namespace {

const float** vector_slot(Weights* w, arch::Slot slot, int layer) {
  using arch::Slot;
  if (slot == Slot::kOutputNorm) return &w->output_norm;
  if (slot == Slot::kOutputNormBias) return &w->output_norm_b;
  if (slot == Slot::kNextnEnorm) return &w->mtp.enorm;
  if (slot == Slot::kNextnHnorm) return &w->mtp.hnorm;
  if (slot == Slot::kNextnHeadNorm) return &w->mtp.head_norm;
  if (layer < 0) return nullptr;
  LayerWeights& l = layer_of(w, layer);
  switch (slot) {
    case Slot::kAttnNorm:
      return &l.attn_norm;
    case Slot::kAttnNormBias:
      return &l.attn_norm_b;
    case Slot::kAttnQkvBias:
      return &l.qkv_b;
    case Slot::kAttnQBias:
      return &l.bq;
    case Slot::kAttnKBias:
      return &l.bk;
    case Slot::kAttnVBias:
      return &l.bv;
    case Slot::kAttnOutBias:
      return &l.wo_b;
    case Slot::kAttnQNorm:
      return &l.attn_q_norm;
    case Slot::kAttnKNorm:
      return &l.attn_k_norm;
    case Slot::kFfnNorm:
      return &l.ffn_norm;
    case Slot::kFfnNormBias:
      return &l.ffn_norm_b;
    case Slot::kFfnUpBias:
      return &l.ffn_up_b;
    case Slot::kFfnDownBias:
      return &l.ffn_down_b;
    case Slot::kAttnPostNorm:
      return &l.attn_post_norm;
    case Slot::kFfnPostNorm:
      return &l.ffn_post_norm;
    case Slot::kFfnExpProbsB:
      return &l.moe.exp_probs_b;
    case Slot::kAttnQANorm:
      return &l.q_a_norm;
    case Slot::kAttnKvANorm:
      return &l.kv_a_norm;
    default:
      return nullptr;
  }
}

}  // namespace

Status load_weights(const gguf::File& file, const Config& c, Weights* w) {
  // Every layer has tensors of its own: a block_count past the file's tensors is refused before
  // anything is sized by it (a hostile count up to 2^24 would otherwise allocate gigabytes).
  if (static_cast<size_t>(c.n_layer) + c.moe.n_layer_nextn > file.tensors().size()) {
    return bad_file(file.path() + ": " + c.arch_name +
                    ".block_count = " + std::to_string(c.n_layer + c.moe.n_layer_nextn) +
                    " but the file holds " + std::to_string(file.tensors().size()) + " tensors");
  }
  WeightLoader l(file, w);
  w->layers.assign(c.n_layer, LayerWeights());
  w->mtp = MtpWeights();
  arch::Dims dims = c.dims();
  if (dims.n_nextn > 0 && !l.has("blk." + std::to_string(c.n_layer) + ".nextn.eh_proj.weight")) {
    dims.n_nextn = 0;  // announced but not in the file (a trunk-only conversion): no MTP
  }
  for (const arch::TensorSpec& t : arch::tensor_table(c.arch, dims)) {
    const bool optional = t.slot == arch::Slot::kNextnEmbedTokens ||
                          t.slot == arch::Slot::kNextnHead || t.slot == arch::Slot::kNextnHeadNorm;
    if (optional && !l.has(t.name)) continue;  // the trunk's serve (forward_mtp)
    if (t.shape.size() == 3) {
      kernels::WeightView* view = matrix_slot(w, t.slot, t.layer);
      GLM_CHECK(view != nullptr);
      GLM_RETURN_IF_ERROR(l.experts(t.name, t.shape[2], t.shape[1], t.shape[0], view));
    } else if (t.shape.size() == 2) {
      kernels::WeightView* view = matrix_slot(w, t.slot, t.layer);
      GLM_CHECK(view != nullptr);
      GLM_RETURN_IF_ERROR(l.matrix(t.name, t.shape[1], t.shape[0], view));
    } else {
      const float** v = vector_slot(w, t.slot, t.layer);
      GLM_CHECK(v != nullptr);
      GLM_RETURN_IF_ERROR(l.vector(t.name, t.shape[0], v));
    }
  }
  if (c.tied_output) w->output = w->token_embd;
  return Status::Ok();
}

}  // namespace glm::model
