#include "convert/ptuning_convert.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <vector>

#include "arch/ptuning_names.h"
#include "checkpoint/printable.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/torch_zip.h"
#include "convert/hf_convert.h"
#include "core/fp16.h"
#include "core/json.h"
#include "gguf/gguf.h"

namespace glm::convert {

namespace fs = std::filesystem;
namespace pt = arch::ptuning;
using checkpoint::printable;
using checkpoint::SafetensorsFile;
using checkpoint::StTensor;
using checkpoint::TorchZipFile;

namespace {

StatusOr<std::string> read_config(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return not_found(p.string() + ": cannot open config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The weight files of the directory: every *.safetensors, else every pytorch_model*.bin
// (a P-Tuning save is one file; a whole model's shards are all read for the prefix encoder).
std::vector<fs::path> weight_files(const fs::path& dir) {
  std::vector<fs::path> st, pt;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (ends_with(n, ".safetensors")) st.push_back(e.path());
    if (n.rfind("pytorch_model", 0) == 0 && ends_with(n, ".bin")) pt.push_back(e.path());
  }
  std::vector<fs::path>& files = st.empty() ? pt : st;
  std::sort(files.begin(), files.end());
  return files;
}

// The part of a checkpoint name after "prefix_encoder." ("transformer.prefix_encoder.trans.0.
// weight" -> "trans.0.weight"), or "" for the base model's tensors.
std::string encoder_part(const std::string& name) {
  static const std::string kKey = "prefix_encoder.";
  const size_t at = name.find(kKey);
  if (at == std::string::npos || (at > 0 && name[at - 1] != '.')) return "";
  return name.substr(at + kKey.size());
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// A tensor's values as f32 (F32, F16 or BF16).
StatusOr<std::vector<float>> to_f32(const StTensor& t, const std::string& where) {
  const int64_t n = t.n_elements();
  std::vector<float> v(static_cast<size_t>(n));
  if (t.dtype == "F32") {
    std::memcpy(v.data(), t.data, v.size() * sizeof(float));
  } else if (t.dtype == "F16" || t.dtype == "BF16") {
    const bool bf = t.dtype == "BF16";
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      v[i] = bf ? bf16_to_fp32(h) : fp16_to_fp32(h);
    }
  } else {
    return bad_file(where + ": " + printable(t.name) + " is " + t.dtype +
                    " (a prefix encoder is F32, F16 or BF16)");
  }
  return v;
}

}  // namespace

bool is_ptuning_dir(const std::string& dir) {
  StatusOr<std::string> text = read_config(fs::path(dir) / "config.json");
  if (!text.ok()) return false;
  StatusOr<nlohmann::json> j = parse_json(*text, "config.json");
  return j.ok() && j->is_object() && j->contains("pre_seq_len") &&
         (*j)["pre_seq_len"].is_number_integer();
}

Status convert_ptuning(const std::string& dir_str, const std::string& out_path,
                       WriteReport* report) {
  const fs::path dir(dir_str);
  const std::string cfg_path = (dir / "config.json").string();
  StatusOr<std::string> text = read_config(cfg_path);
  if (!text.ok()) return text.status();
  StatusOr<nlohmann::json> cfg = parse_json(*text, cfg_path.c_str());
  if (!cfg.ok()) return bad_file(cfg.status().message());
  if (!cfg->contains("pre_seq_len") || !(*cfg)["pre_seq_len"].is_number_integer() ||
      (*cfg)["pre_seq_len"].get<int64_t>() < 1 || (*cfg)["pre_seq_len"].get<int64_t>() > 65536) {
    return bad_file(cfg_path + ": \"pre_seq_len\" must be an integer from 1 to 65536");
  }
  const int64_t n_pre = (*cfg)["pre_seq_len"].get<int64_t>();
  const nlohmann::json& pj = cfg->value("prefix_projection", nlohmann::json(false));
  if (!pj.is_boolean()) return bad_file(cfg_path + ": \"prefix_projection\" must be true or false");
  const bool projection = pj.get<bool>();
  StatusOr<Hparams> hp = hparams_from_hf_config(*text, cfg_path);
  if (!hp.ok()) return hp.status();
  // ChatGLM-6B (v1, its config has no kv_channels: K/V rows are hidden_size wide, n_head_kv =
  // n_head) writes the same encoder; the file names its layout, so it loads onto chatglm1 only.
  if (hp->layout() != arch::Arch::kChatGLM && hp->layout() != arch::Arch::kChatGLM1) {
    return unsupported(cfg_path +
                       ": P-Tuning v2 prefixes are ChatGLM-6B's and ChatGLM2/3 and GLM-4's");
  }
  if (cfg->contains("kv_channels") && (*cfg)["kv_channels"] != hp->head_dim()) {
    return bad_file(cfg_path + ": \"kv_channels\" is not hidden_size / num_attention_heads");
  }
  const int64_t kd = hp->n_embd_kv();
  const int64_t w_out = hp->n_layer * 2 * kd;  // W = num_layers * 2 * kv_channels * groups

  const std::vector<fs::path> files = weight_files(dir);
  if (files.empty()) {
    return not_found(dir_str +
                     ": no weights (expected the P-Tuning save: pytorch_model.bin or "
                     "*.safetensors holding transformer.prefix_encoder.*)");
  }
  std::vector<std::unique_ptr<SafetensorsFile>> st_files;
  std::vector<std::unique_ptr<TorchZipFile>> pt_files;
  std::map<std::string, std::pair<const StTensor*, std::string>> parts;  // part -> tensor, file
  size_t skipped = 0;
  auto collect = [&](const std::vector<StTensor>& ts, const std::string& file) -> Status {
    for (const StTensor& t : ts) {
      const std::string part = encoder_part(t.name);
      if (part.empty()) {
        ++skipped;
        continue;
      }
      if (part != "embedding.weight" && part != "trans.0.weight" && part != "trans.0.bias" &&
          part != "trans.2.weight" && part != "trans.2.bias") {
        return bad_file(file + ": unexpected prefix encoder tensor " + printable(t.name));
      }
      if (!parts.emplace(part, std::make_pair(&t, file)).second) {
        return bad_file(file + ": prefix_encoder." + part + " appears twice");
      }
    }
    return Status::Ok();
  };
  for (const fs::path& p : files) {
    if (ends_with(p.string(), ".safetensors")) {
      StatusOr<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::open(p.string());
      if (!f.ok()) return f.status();
      st_files.push_back(std::move(*f));
      GLM_RETURN_IF_ERROR(collect(st_files.back()->tensors(), p.string()));
    } else {
      StatusOr<std::unique_ptr<TorchZipFile>> f = TorchZipFile::open(p.string());
      if (!f.ok()) return f.status();
      pt_files.push_back(std::move(*f));
      GLM_RETURN_IF_ERROR(collect(pt_files.back()->tensors(), p.string()));
    }
  }

  // The tensors, their expected PyTorch shapes ([out, in] for Linear weights), checked by name.
  struct Part {
    const char* part;
    const char* gguf_name;
    std::vector<int64_t> shape;  // -1: any (read from the file)
  };
  std::vector<Part> want = {{"embedding.weight", pt::kEmbedding, {n_pre, projection ? -1 : w_out}}};
  if (projection) {
    want.push_back({"trans.0.weight", pt::kTrans0Weight, {-1, -1}});
    want.push_back({"trans.0.bias", pt::kTrans0Bias, {-1}});
    want.push_back({"trans.2.weight", pt::kTrans2Weight, {w_out, -1}});
    want.push_back({"trans.2.bias", pt::kTrans2Bias, {w_out}});
  } else if (parts.count("trans.0.weight") || parts.count("trans.2.weight")) {
    return bad_file(cfg_path +
                    ": prefix_projection is false but the checkpoint has prefix_encoder.trans.* "
                    "(set it as in training)");
  }
  const std::string base = "for " + std::to_string(hp->n_layer) + " layers of K/V rows of " +
                           std::to_string(kd) + " values and pre_seq_len " + std::to_string(n_pre);
  int64_t e_dim = -1, h_dim = -1;  // E, H: fixed by the first tensor that has them
  std::vector<std::vector<float>> values;
  for (Part& p : want) {
    auto it = parts.find(p.part);
    if (it == parts.end()) {
      return not_found(dir_str + ": no prefix_encoder." + p.part + " in the weights" +
                       (p.part == std::string("embedding.weight")
                            ? " (is this a P-Tuning v2 save? it holds transformer.prefix_encoder.*)"
                            : " (prefix_projection is true)"));
    }
    const StTensor& t = *it->second.first;
    const std::string& file = it->second.second;
    const std::string what = std::string("prefix_encoder.") + p.part;
    if (p.part == std::string("embedding.weight") && !t.shape.empty() && t.shape[0] != n_pre) {
      return bad_file(file + ": " + what + " has " + std::to_string(t.shape[0]) +
                      " rows but config.json's pre_seq_len is " + std::to_string(n_pre));
    }
    if (p.part == std::string("trans.0.weight")) p.shape = {h_dim, e_dim};
    if (p.part == std::string("trans.0.bias")) p.shape = {h_dim};
    if (p.part == std::string("trans.2.weight")) p.shape = {w_out, h_dim};
    bool fits = t.shape.size() == p.shape.size();
    for (size_t i = 0; fits && i < p.shape.size(); ++i) {
      fits = p.shape[i] < 0 ? t.shape[i] > 0 : t.shape[i] == p.shape[i];
    }
    if (!fits) {
      return bad_file(file + ": " + what + " is " + shape_str(t.shape) + "; " + base +
                      " it must be " + shape_str(p.shape) + " (-1: any)");
    }
    if (p.part == std::string("embedding.weight")) e_dim = t.shape[1];
    if (p.part == std::string("trans.0.weight")) h_dim = t.shape[0];
    StatusOr<std::vector<float>> v = to_f32(t, file);
    if (!v.ok()) return v.status();
    values.push_back(std::move(*v));
    p.shape = t.shape;
  }

  gguf::Writer w;
  w.set("general.architecture", gguf::Value::string(arch::arch_name(hp->layout())));
  w.set("general.type", gguf::Value::string("adapter"));
  w.set("general.name", gguf::Value::string(fs::absolute(dir).filename().string()));
  w.set(pt::kKeyType, gguf::Value::string(pt::kAdapterType));
  w.set(pt::kKeyPreSeqLen, gguf::Value::u32(static_cast<uint32_t>(n_pre)));
  w.set(pt::kKeyProjection, gguf::Value::boolean(projection));
  w.set(pt::kKeyBlockCount, gguf::Value::u32(static_cast<uint32_t>(hp->n_layer)));
  w.set(pt::kKeyKvDim, gguf::Value::u32(static_cast<uint32_t>(kd)));
  WriteReport rep;
  for (const Part& p : want) {
    std::vector<int64_t> ggml(p.shape.rbegin(), p.shape.rend());  // row length first
    w.add_tensor(p.gguf_name, DType::kF32, ggml);
  }
  GLM_RETURN_IF_ERROR(w.begin(out_path));
  for (const std::vector<float>& v : values) {
    GLM_RETURN_IF_ERROR(w.write_tensor_data(v.data(), v.size() * sizeof(float)));
    rep.n_bytes += v.size() * sizeof(float);
    rep.n_parameters += v.size();
    ++rep.n_tensors;
  }
  GLM_RETURN_IF_ERROR(w.finish());
  if (skipped > 0) {
    rep.notes.push_back("skipped " + std::to_string(skipped) +
                        " tensors of the base model (only the prefix encoder is an adapter)");
  }
  if (report != nullptr) *report = std::move(rep);
  return Status::Ok();
}

}  // namespace glm::convert
