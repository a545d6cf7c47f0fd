#include "convert/hf_convert.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/printable.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/torch_zip.h"
#include "core/fp16.h"
#include "core/json.h"
#include "tokenizer/vocab_convert.h"

namespace glm::convert {

namespace fs = std::filesystem;
using checkpoint::printable;
using checkpoint::SafetensorsFile;
using checkpoint::st_dtype_size;
using checkpoint::StTensor;
using checkpoint::TorchZipFile;

namespace {

// GLM-4-0414 / GLM-Z1 (transformers' Glm4ForCausalLM): llama-style names plus the sandwich norms.
std::string hf_tensor_name_0414(const std::string& g) {
  if (g == "token_embd.weight") return "model.embed_tokens.weight";
  if (g == "output_norm.weight") return "model.norm.weight";
  if (g == "output.weight") return "lm_head.weight";
  if (g.rfind("blk.", 0) != 0) return "";
  const size_t dot = g.find('.', 4);
  if (dot == std::string::npos) return "";
  static const std::map<std::string, std::string> kMap = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_q.bias", "self_attn.q_proj.bias"},
      {"attn_k.bias", "self_attn.k_proj.bias"},
      {"attn_v.bias", "self_attn.v_proj.bias"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"post_attention_norm.weight", "post_self_attn_layernorm.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_up.weight", "mlp.gate_up_proj.weight"},  // gate rows, then up rows
      {"ffn_down.weight", "mlp.down_proj.weight"},
      {"post_ffw_norm.weight", "post_mlp_layernorm.weight"},
  };
  auto it = kMap.find(g.substr(dot + 1));
  if (it == kMap.end()) return "";
  return "model.layers." + g.substr(4, dot - 4) + "." + it->second;
}

}  // namespace

std::string hf_tensor_name(const std::string& g, Family family) {
  if (family == Family::kGLM4_0414) return hf_tensor_name_0414(g);
  const bool v1 = family == Family::kChatGLM1;
  if (g == "token_embd.weight") {
    return v1 ? "transformer.word_embeddings.weight"
              : "transformer.embedding.word_embeddings.weight";
  }
  if (v1 && g == "output_norm.weight") return "transformer.final_layernorm.weight";
  if (v1 && g == "output_norm.bias") return "transformer.final_layernorm.bias";
  if (v1 && g == "output.weight") return "lm_head.weight";
  if (g == "output_norm.weight") return "transformer.encoder.final_layernorm.weight";
  if (g == "output.weight") return "transformer.output_layer.weight";
  if (g.rfind("blk.", 0) != 0) return "";
  const size_t dot = g.find('.', 4);
  if (dot == std::string::npos) return "";
  const std::string layer = g.substr(4, dot - 4);
  const std::string rest = g.substr(dot + 1);
  static const std::map<std::string, std::string> kMap = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"attn_qkv.weight", "self_attention.query_key_value.weight"},
      {"attn_qkv.bias", "self_attention.query_key_value.bias"},
      {"attn_output.weight", "self_attention.dense.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_up.weight", "mlp.dense_h_to_4h.weight"},
      {"ffn_down.weight", "mlp.dense_4h_to_h.weight"},
  };
  // ChatGLM-6B: `attention` instead of `self_attention`, LayerNorm and linear biases.
  static const std::map<std::string, std::string> kMapV1 = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"attn_norm.bias", "input_layernorm.bias"},
      {"attn_qkv.weight", "attention.query_key_value.weight"},
      {"attn_qkv.bias", "attention.query_key_value.bias"},
      {"attn_output.weight", "attention.dense.weight"},
      {"attn_output.bias", "attention.dense.bias"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_norm.bias", "post_attention_layernorm.bias"},
      {"ffn_up.weight", "mlp.dense_h_to_4h.weight"},
      {"ffn_up.bias", "mlp.dense_h_to_4h.bias"},
      {"ffn_down.weight", "mlp.dense_4h_to_h.weight"},
      {"ffn_down.bias", "mlp.dense_4h_to_h.bias"},
  };
  const std::map<std::string, std::string>& map = v1 ? kMapV1 : kMap;
  auto it = map.find(rest);
  if (it == map.end()) return "";
  return (v1 ? "transformer.layers." : "transformer.encoder.layers.") + layer + "." + it->second;
}

namespace {

StatusOr<std::string> read_text(const fs::path& p, const std::string& what) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return not_found(p.string() + ": cannot open " + what);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

namespace {

// GLM-4-0414 / GLM-Z1: transformers' Glm4Config (model_type "glm4").
StatusOr<Hparams> hparams_0414(const nlohmann::json& c, const std::string& label) {
  auto get_int = [&](const char* key, int64_t* out) -> Status {
    if (!c.contains(key)) return bad_file(label + ": missing \"" + key + "\"");
    if (!c[key].is_number_integer() || c[key].get<int64_t>() <= 0) {
      return bad_file(label + ": \"" + key + "\" must be a positive integer");
    }
    *out = c[key].get<int64_t>();
    return Status::Ok();
  };
  auto get_float = [&](const nlohmann::json& o, const char* key, float* out) -> Status {
    if (!o.contains(key)) return Status::Ok();
    if (!o[key].is_number() || o[key].get<double>() <= 0) {
      return bad_file(label + ": \"" + key + "\" must be a positive number");
    }
    *out = o[key].get<float>();
    return Status::Ok();
  };
  Hparams h;
  h.family = Family::kGLM4_0414;
  GLM_RETURN_IF_ERROR(get_int("hidden_size", &h.n_embd));
  GLM_RETURN_IF_ERROR(get_int("intermediate_size", &h.n_ff));
  GLM_RETURN_IF_ERROR(get_int("num_hidden_layers", &h.n_layer));
  GLM_RETURN_IF_ERROR(get_int("num_attention_heads", &h.n_head));
  GLM_RETURN_IF_ERROR(get_int("num_key_value_heads", &h.n_head_kv));
  GLM_RETURN_IF_ERROR(get_int("max_position_embeddings", &h.n_ctx));
  GLM_RETURN_IF_ERROR(get_int("vocab_size", &h.n_vocab));
  h.norm_eps = 1e-5f;
  GLM_RETURN_IF_ERROR(get_float(c, "rms_norm_eps", &h.norm_eps));
  // transformers 4.x: rope_theta, partial_rotary_factor at the top; 5.x: in rope_parameters.
  const nlohmann::json& rope =
      c.contains("rope_parameters") && c["rope_parameters"].is_object() ? c["rope_parameters"] : c;
  GLM_RETURN_IF_ERROR(get_float(c, "rope_theta", &h.rope_base));
  GLM_RETURN_IF_ERROR(get_float(rope, "rope_theta", &h.rope_base));
  float partial = 0.5f;
  GLM_RETURN_IF_ERROR(get_float(c, "partial_rotary_factor", &partial));
  GLM_RETURN_IF_ERROR(get_float(rope, "partial_rotary_factor", &partial));
  if (partial != 0.5f) {
    return unsupported(label + ": partial_rotary_factor " + std::to_string(partial) +
                       " (glmserve's glm4 layout rotates half of each head, 0.5)");
  }
  const std::string rope_type = rope.value("rope_type", std::string("default"));
  if ((c.contains("rope_scaling") && !c["rope_scaling"].is_null()) || rope_type != "default") {
    return unsupported(label + ": RoPE scaling is not supported for GLM-4-0414 checkpoints");
  }
  if (c.contains("head_dim") && h.n_head > 0 &&
      (!c["head_dim"].is_number_integer() || c["head_dim"].get<int64_t>() * h.n_head != h.n_embd)) {
    return unsupported(label + ": head_dim x num_attention_heads != hidden_size");
  }
  if (!c.value("attention_bias", true)) {
    return unsupported(label + ": checkpoints without Q/K/V biases (attention_bias: false)");
  }
  if (c.contains("_name_or_path") && c["_name_or_path"].is_string()) {
    h.name = c["_name_or_path"].get<std::string>();
  }
  if (Status s = h.validate(); !s.ok()) return bad_file(label + ": " + s.message());
  return h;
}

}  // namespace

StatusOr<Hparams> hparams_from_hf_config(const std::string& text, const std::string& label) {
  auto parsed = parse_json(text, label.c_str());
  if (!parsed.ok()) return bad_file(parsed.status().message());
  const nlohmann::json& c = *parsed;
  if (!c.is_object()) return bad_file(label + ": not a JSON object");
  if (c.contains("model_type") && c["model_type"] == "glm4") return hparams_0414(c, label);
  if (c.contains("model_type") && c["model_type"] != "chatglm") {
    return unsupported(
        label + ": model_type " + c["model_type"].dump() +
        " is not a ChatGLM checkpoint (ChatGLM-6B, ChatGLM2/3, GLM-4: model_type \"chatglm\"; "
        "GLM-4-0414, GLM-Z1: \"glm4\")");
  }
  auto get_int = [&](const char* key, int64_t* out, bool required) -> Status {
    if (!c.contains(key)) {
      if (required) return bad_file(label + ": missing \"" + key + "\"");
      return Status::Ok();
    }
    if (!c[key].is_number_integer() || c[key].get<int64_t>() <= 0) {
      return bad_file(label + ": \"" + key + "\" must be a positive integer");
    }
    *out = c[key].get<int64_t>();
    return Status::Ok();
  };
  Hparams h;
  GLM_RETURN_IF_ERROR(get_int("hidden_size", &h.n_embd, true));
  GLM_RETURN_IF_ERROR(get_int("num_layers", &h.n_layer, true));
  GLM_RETURN_IF_ERROR(get_int("num_attention_heads", &h.n_head, true));
  h.n_head_kv = h.n_head;
  if (c.contains("layernorm_epsilon")) {
    if (!c["layernorm_epsilon"].is_number()) return bad_file(label + ": bad layernorm_epsilon");
    h.norm_eps = c["layernorm_epsilon"].get<float>();
  }
  if (c.contains("_name_or_path") && c["_name_or_path"].is_string()) {
    h.name = c["_name_or_path"].get<std::string>();
  }
  if (c.contains("position_encoding_2d") || c.contains("inner_hidden_size")) {
    // ChatGLM-6B (THUDM/chatglm-6b): LayerNorm, plain multi-head attention, 2D RoPE.
    if (!c.value("position_encoding_2d", true)) {
      return unsupported(label + ": ChatGLM-6B without 2D positions (position_encoding_2d: false)");
    }
    h.family = Family::kChatGLM1;
    GLM_RETURN_IF_ERROR(get_int("inner_hidden_size", &h.n_ff, true));
    GLM_RETURN_IF_ERROR(get_int("max_sequence_length", &h.n_ctx, true));
    GLM_RETURN_IF_ERROR(get_int("vocab_size", &h.n_vocab, true));
    if (c.value("quantization_bit", 0) != 0) {
      return unsupported(label +
                         ": an int4/int8 checkpoint (quantization_bit); convert the "
                         "float16 one (THUDM/chatglm-6b) and quantize with glmserve");
    }
  } else {
    // ChatGLM2/3, GLM-4.
    h.family = Family::kChatGLM3;
    GLM_RETURN_IF_ERROR(get_int("ffn_hidden_size", &h.n_ff, true));
    GLM_RETURN_IF_ERROR(get_int("seq_length", &h.n_ctx, true));
    if (c.contains("padded_vocab_size")) {
      GLM_RETURN_IF_ERROR(get_int("padded_vocab_size", &h.n_vocab, true));
    } else {
      GLM_RETURN_IF_ERROR(get_int("vocab_size", &h.n_vocab, true));
    }
    if (c.value("multi_query_attention", false)) {
      GLM_RETURN_IF_ERROR(get_int("multi_query_group_num", &h.n_head_kv, true));
    }
    double rope_ratio = 1.0;
    if (c.contains("rope_ratio")) {
      if (!c["rope_ratio"].is_number() || c["rope_ratio"].get<double>() <= 0) {
        return bad_file(label + ": rope_ratio must be a positive number");
      }
      rope_ratio = c["rope_ratio"].get<double>();
    }
    h.rope_base = static_cast<float>(10000.0 * rope_ratio);
    if (c.contains("kv_channels") && c["kv_channels"].is_number_integer() && h.n_head > 0 &&
        c["kv_channels"].get<int64_t>() * h.n_head != h.n_embd) {
      return unsupported(label + ": kv_channels x num_attention_heads != hidden_size");
    }
    if (!c.value("rmsnorm", true))
      return unsupported(label + ": only RMSNorm checkpoints (rmsnorm: true)");
    if (!c.value("add_qkv_bias", true)) {
      return unsupported(label + ": checkpoints without a qkv bias (add_qkv_bias: false)");
    }
  }
  if (Status s = h.validate(); !s.ok()) return bad_file(label + ": " + s.message());
  return h;
}

namespace {

// The tensors of a checkpoint: its safetensors or PyTorch .bin files, mapped.
struct Checkpoint {
  std::vector<std::unique_ptr<SafetensorsFile>> st_files;
  std::vector<std::unique_ptr<TorchZipFile>> pt_files;
  std::map<std::string, const StTensor*> by_name;
};

// The shard files an HF index (`weight_map`: tensor -> file) names, in first-use order.
StatusOr<std::vector<fs::path>> shards_of_index(const fs::path& dir, const fs::path& index) {
  StatusOr<std::string> text = read_text(index, "the weights index");
  if (!text.ok()) return text.status();
  auto parsed = parse_json(*text, index.string().c_str());
  if (!parsed.ok()) return bad_file(parsed.status().message());
  const nlohmann::json& j = *parsed;
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
    return bad_file(index.string() + ": no \"weight_map\" object");
  }
  std::vector<fs::path> files;
  for (auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string()) return bad_file(index.string() + ": bad entry for " + name);
    const std::string f = file.get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..") {
      return bad_file(index.string() + ": shard names must be plain file names");
    }
    const fs::path p = dir / f;
    if (std::find(files.begin(), files.end(), p) == files.end()) files.push_back(p);
  }
  return files;
}

// The files of the directory whose name passes `keep`, sorted.
std::vector<fs::path> files_where(const fs::path& dir, bool (*keep)(const std::string&)) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (keep(e.path().filename().string())) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Safetensors when the directory has them (model.safetensors.index.json, or every
// *.safetensors); else PyTorch .bin (pytorch_model.bin.index.json, or pytorch_model*.bin).
Status open_checkpoint(const fs::path& dir, Checkpoint* ck) {
  std::error_code ec;
  std::vector<fs::path> st;
  std::vector<fs::path> pt;
  if (const fs::path index = dir / "model.safetensors.index.json"; fs::exists(index, ec)) {
    StatusOr<std::vector<fs::path>> f = shards_of_index(dir, index);
    if (!f.ok()) return f.status();
    st = std::move(*f);
  } else {
    st = files_where(dir, [](const std::string& n) { return ends_with(n, ".safetensors"); });
  }
  if (st.empty()) {
    if (const fs::path index = dir / "pytorch_model.bin.index.json"; fs::exists(index, ec)) {
      StatusOr<std::vector<fs::path>> f = shards_of_index(dir, index);
      if (!f.ok()) return f.status();
      pt = std::move(*f);
    } else {
      pt = files_where(dir, [](const std::string& n) {
        return n.rfind("pytorch_model", 0) == 0 && ends_with(n, ".bin");
      });
    }
  }
  if (st.empty() && pt.empty()) {
    return not_found(dir.string() +
                     ": no weights (expected *.safetensors or pytorch_model*.bin, single or "
                     "with their .index.json)");
  }
  for (const fs::path& p : st) {
    StatusOr<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::open(p.string());
    if (!f.ok()) return f.status();
    ck->st_files.push_back(std::move(*f));
  }
  for (const fs::path& p : pt) {
    StatusOr<std::unique_ptr<TorchZipFile>> f = TorchZipFile::open(p.string());
    if (!f.ok()) return f.status();
    ck->pt_files.push_back(std::move(*f));
  }
  auto add = [ck](const auto& f) -> Status {
    for (const StTensor& t : f->tensors()) {
      if (!ck->by_name.emplace(t.name, &t).second) {
        return bad_file(f->path() + ": tensor " + printable(t.name) + " appears in two files");
      }
    }
    return Status::Ok();
  };
  for (const auto& f : ck->st_files) GLM_RETURN_IF_ERROR(add(f));
  for (const auto& f : ck->pt_files) GLM_RETURN_IF_ERROR(add(f));
  return Status::Ok();
}

}  // namespace

Status convert_hf(const ConvertOptions& opts, const std::string& out_path, WriteReport* report) {
  const fs::path dir(opts.hf_dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return not_found(opts.hf_dir + ": not a directory (give the HuggingFace checkpoint folder)");
  }
  StatusOr<std::string> cfg = read_text(dir / "config.json", "config.json");
  if (!cfg.ok()) return cfg.status();
  StatusOr<Hparams> hp = hparams_from_hf_config(*cfg, (dir / "config.json").string());
  if (!hp.ok()) return hp.status();

  const bool v1 = hp->family == Family::kChatGLM1;
  const bool is_0414 = hp->family == Family::kGLM4_0414;
  // GLM-4-0414 / GLM-Z1 ship only tokenizer.json; a tokenizer.model beside it wins.
  const char* tok_file = v1 ? "ice_text.model" : "tokenizer.model";
  if (is_0414 && !fs::exists(dir / tok_file, ec)) tok_file = "tokenizer.json";
  const fs::path tok_path = dir / tok_file;
  if (!fs::exists(tok_path, ec)) {
    return not_found(tok_path.string() + ": missing (copy " + tok_file +
                     " from the model's HuggingFace repository)");
  }
  StatusOr<tok::VocabSpec> vocab = [&]() -> StatusOr<tok::VocabSpec> {
    if (std::string(tok_file) != "tokenizer.json") {
      return tok::read_tokenizer_model(tok_path.string());
    }
    StatusOr<std::string> text = read_text(tok_path, "tokenizer.json");
    if (!text.ok()) return text.status();
    return tok::parse_hf_tokenizer_json(*text, tok_path.string());
  }();
  if (!vocab.ok()) return vocab.status();
  if (v1 && vocab->pre != "chatglm1") {
    return bad_file(tok_path.string() +
                    ": not ChatGLM-6B's unigram vocabulary (no <n>, <|blank_N|>, [gMASK], <sop>)");
  }
  if (is_0414 && vocab->model != "gpt2") {
    return bad_file(tok_path.string() + ": GLM-4-0414 needs GLM-4's byte-level BPE vocabulary");
  }
  if (!v1 && !is_0414 && vocab->model == "gpt2") hp->family = Family::kGLM4;
  if (hp->name.empty()) hp->name = dir.filename().string();
  // ChatGLM2 and ChatGLM3 share config.json's keys and tokenizer.model; the checkpoint's name
  // (THUDM/chatglm2-6b, or the folder's) is the cue. ChatGLM2 has only 5 special tokens.
  std::string lower = hp->name;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (!v1 && vocab->model == "llama" && lower.find("chatglm2") != std::string::npos) {
    hp->family = Family::kChatGLM2;
    GLM_RETURN_IF_ERROR(tok::to_chatglm2_vocab(&*vocab));
    // ChatGLM2-6B-32K's rope_ratio divides the positions (its RotaryEmbedding: seq_idx /
    // rope_ratio), where ChatGLM3 and GLM-4 multiply the base by it.
    hp->rope_scale_linear = hp->rope_base / 10000.0f;
    hp->rope_base = 10000.0f;
  }
  const int64_t n_tok = static_cast<int64_t>(vocab->tokens.size());
  if (n_tok > hp->n_vocab) {
    return bad_file(tok_path.string() + ": " + std::to_string(n_tok) +
                    " tokens, more than the model's padded_vocab_size " +
                    std::to_string(hp->n_vocab));
  }
  while (static_cast<int64_t>(vocab->tokens.size()) < hp->n_vocab) {
    vocab->tokens.push_back("[PAD" + std::to_string(vocab->tokens.size()) + "]");
    if (!vocab->scores.empty()) vocab->scores.push_back(0.0f);
    vocab->types.push_back(tok::kTokenUnused);
  }

  Checkpoint ck;
  GLM_RETURN_IF_ERROR(open_checkpoint(dir, &ck));
  const Family family = hp->family;
  auto hf_name = [family](const std::string& g) { return hf_tensor_name(g, family); };
  hp->tied_output = ck.by_name.count(hf_name("output.weight")) == 0;
  // Check every tensor before writing anything.
  const std::vector<TensorPlan> plan = tensor_plan(*hp, opts.type);
  ConvertProgress progress;
  progress.n_tensors = plan.size();
  for (const TensorPlan& t : plan) {
    const std::string hf = hf_name(t.name);
    auto it = ck.by_name.find(hf);
    if (it == ck.by_name.end()) {
      return bad_file(opts.hf_dir + ": tensor " + hf + " (for " + t.name + ") not found");
    }
    const StTensor& s = *it->second;
    std::vector<int64_t> reversed(s.shape.rbegin(), s.shape.rend());
    if (reversed != t.shape) {
      return bad_file(opts.hf_dir + ": tensor " + hf +
                      " has a shape that does not match "
                      "config.json");
    }
    if (s.dtype != "F32" && s.dtype != "F16" && s.dtype != "BF16") {
      return unsupported(opts.hf_dir + ": tensor " + hf + " is " + s.dtype +
                         " (only F32, F16 and BF16 checkpoints are read)");
    }
    progress.bytes_total += s.n_bytes;
  }

  // ChatGLM-6B's fused QKV: HF row (or bias element) of glmserve's index i.
  const int64_t head_dim = hp->n_embd / hp->n_head;
  auto v1_qkv_index = [&](int64_t i) {
    const int64_t part = i / hp->n_embd, head = (i % hp->n_embd) / head_dim, d = i % head_dim;
    return (head * 3 + part) * head_dim + d;
  };
  RowSource source = [&](const TensorPlan& t, int64_t row0, int64_t n_rows, float* out) {
    const StTensor& s = *ck.by_name.at(hf_name(t.name));
    const DType type = s.dtype == "F32"   ? DType::kF32
                       : s.dtype == "F16" ? DType::kF16
                                          : DType::kBF16;
    const int64_t len = t.row_len();
    const size_t row = st_dtype_size(s.dtype) * static_cast<size_t>(len);
    const bool qkv = v1 && (t.name.find(".attn_qkv.") != std::string::npos);
    if (qkv && t.shape.size() == 2) {
      for (int64_t r = 0; r < n_rows; ++r) {  // [3 x n_embd rows, n_embd]: one row at a time
        const size_t src = static_cast<size_t>(v1_qkv_index(row0 + r)) * row;
        decode_rows(type, s.data + src, 1, len, out + r * len);
      }
    } else if (qkv) {  // the bias, [3 x n_embd]: one row, permuted element by element
      std::vector<float> hf(static_cast<size_t>(len));
      decode_rows(type, s.data, 1, len, hf.data());
      for (int64_t i = 0; i < len; ++i) out[i] = hf[static_cast<size_t>(v1_qkv_index(i))];
    } else {
      decode_rows(type, s.data + static_cast<size_t>(row0) * row, n_rows, len, out);
    }
    if (opts.progress) {
      if (progress.name == nullptr || *progress.name != t.name) {
        ++progress.tensor;
        progress.name = &t.name;
      }
      progress.bytes_read += static_cast<uint64_t>(n_rows) * row;
      opts.progress(progress);
    }
    return Status::Ok();
  };
  return write_model_file(out_path, *hp, *vocab, opts.type, source, report);
}

}  // namespace glm::convert
