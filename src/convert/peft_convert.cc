#include "convert/peft_convert.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "checkpoint/printable.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/torch_zip.h"
#include "convert/hf_convert.h"
#include "convert/model_writer.h"
#include "core/json.h"

namespace glm::convert {

namespace fs = std::filesystem;
using checkpoint::printable;
using checkpoint::StTensor;

namespace {

// The layer matrices a LoRA may target, as glmserve's tensor names.
constexpr const char* kMatrices[] = {"attn_qkv",    "attn_q", "attn_k",   "attn_v",
                                     "attn_output", "ffn_up", "ffn_gate", "ffn_down"};

// The tensors of the adapter's weight file, kept open.
struct AdapterWeights {
  std::unique_ptr<checkpoint::SafetensorsFile> st;
  std::unique_ptr<checkpoint::TorchZipFile> pt;
  const std::vector<StTensor>& tensors() const { return st ? st->tensors() : pt->tensors(); }
};

Status open_weights(const fs::path& dir, AdapterWeights* w) {
  std::error_code ec;
  if (const fs::path p = dir / "adapter_model.safetensors"; fs::exists(p, ec)) {
    auto f = checkpoint::SafetensorsFile::open(p.string());
    if (!f.ok()) return f.status();
    w->st = std::move(*f);
    return Status::Ok();
  }
  if (const fs::path p = dir / "adapter_model.bin"; fs::exists(p, ec)) {
    auto f = checkpoint::TorchZipFile::open(p.string());
    if (!f.ok()) return f.status();
    w->pt = std::move(*f);
    return Status::Ok();
  }
  return not_found(
      dir.string() +
      ": no adapter_model.safetensors or adapter_model.bin beside adapter_config.json");
}

// A 2-D tensor as floats ([rows, cols] as stored).
Status to_floats(const StTensor& t, const std::string& where, std::vector<float>* out) {
  if (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16") {
    return unsupported(where + ": tensor " + printable(t.name) + " is " + t.dtype +
                       " (only F32, F16 and BF16 adapters are read)");
  }
  const DType type = t.dtype == "F32" ? DType::kF32 : t.dtype == "F16" ? DType::kF16 : DType::kBF16;
  out->resize(static_cast<size_t>(t.n_elements()));
  decode_rows(type, t.data, 1, t.n_elements(), out->data());
  return Status::Ok();
}

StatusOr<std::string> read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return not_found(p.string() + ": cannot open it");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

bool is_peft_dir(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / "adapter_config.json", ec);
}

StatusOr<LoraFile> read_peft(const std::string& dir_name) {
  const fs::path dir(dir_name);
  const std::string cfg_path = (dir / "adapter_config.json").string();
  StatusOr<std::string> text = read_text(cfg_path);
  if (!text.ok()) return text.status();
  auto parsed = parse_json(*text, cfg_path.c_str());
  if (!parsed.ok()) return bad_file(parsed.status().message());
  const nlohmann::json& c = *parsed;
  if (!c.is_object()) return bad_file(cfg_path + ": not a JSON object");
  if (c.contains("peft_type") && c["peft_type"] != "LORA") {
    return unsupported(cfg_path + ": peft_type " + c["peft_type"].dump() +
                       " (only LORA adapters convert to a LoRA GGUF)");
  }
  if (!c.contains("r") || !c["r"].is_number_integer() || c["r"].get<int64_t>() < 1) {
    return bad_file(cfg_path + ": \"r\" (the rank) must be a positive integer");
  }
  const int64_t r = c["r"].get<int64_t>();
  if (!c.contains("lora_alpha") || !c["lora_alpha"].is_number()) {
    return bad_file(cfg_path + ": \"lora_alpha\" must be a number");
  }
  double alpha = c["lora_alpha"].get<double>();
  if (!std::isfinite(alpha)) return bad_file(cfg_path + ": lora_alpha is not finite");
  auto flag = [&](const char* key) { return c.contains(key) && c[key].is_boolean() && c[key]; };
  if (flag("use_dora"))
    return unsupported(cfg_path + ": DoRA adapters (use_dora) are not supported");
  if (flag("fan_in_fan_out")) {
    return unsupported(cfg_path + ": fan_in_fan_out adapters (Conv1D layers) are not supported");
  }
  for (const char* key : {"rank_pattern", "alpha_pattern"}) {
    if (c.contains(key) && c[key].is_object() && !c[key].empty()) {
      return unsupported(cfg_path + ": per-module ranks or alphas (" + key + ") are not supported");
    }
  }
  if (c.contains("modules_to_save") && c["modules_to_save"].is_array() &&
      !c["modules_to_save"].empty()) {
    return unsupported(cfg_path + ": modules_to_save (fully trained modules) cannot be a LoRA");
  }
  if (flag("use_rslora"))
    alpha *= std::sqrt(static_cast<double>(r));  // alpha / sqrt(r) = alpha' / r
  std::vector<std::string> targets;  // empty = not given as a list: every module is accepted
  if (c.contains("target_modules") && c["target_modules"].is_array()) {
    for (const auto& t : c["target_modules"]) {
      if (t.is_string()) targets.push_back(t.get<std::string>());
    }
  }

  AdapterWeights w;
  GLM_RETURN_IF_ERROR(open_weights(dir, &w));
  static const std::regex kName(
      R"(base_model\.model\.(.+)\.lora_([AB])(\.[A-Za-z0-9_]+)?\.weight)");
  static const std::regex kLayer(R"((?:transformer\.encoder\.layers|model\.layers)\.(\d+)\..*)");
  struct Halves {
    const StTensor* a = nullptr;
    const StTensor* b = nullptr;
  };
  std::map<std::string, Halves> modules;  // HF module path -> its A and B
  std::string arch;
  Family family = Family::kChatGLM3;
  int64_t n_layer = 0;
  for (const StTensor& t : w.tensors()) {
    std::smatch m;
    if (!std::regex_match(t.name, m, kName)) {
      return unsupported(dir_name + ": tensor " + printable(t.name) +
                         " is not a LoRA A or B of a linear layer (embeddings and fully trained "
                         "modules are not supported)");
    }
    const std::string module = m[1];
    std::smatch lm;
    if (!std::regex_match(module, lm, kLayer)) {
      return unsupported(dir_name + ": tensor " + printable(t.name) +
                         ": only the layers' linear modules of ChatGLM2/3, GLM-4 and GLM-4-0414 "
                         "are supported");
    }
    const std::string this_arch = module.rfind("transformer.", 0) == 0 ? "chatglm" : "glm4";
    if (!arch.empty() && arch != this_arch) {
      return bad_file(dir_name + ": tensor " + printable(t.name) + " mixes two model layouts");
    }
    arch = this_arch;
    family = arch == "chatglm" ? Family::kChatGLM3 : Family::kGLM4_0414;
    n_layer = std::max<int64_t>(n_layer, std::stoll(lm[1]) + 1);
    Halves& h = modules[module];
    (m[2] == "A" ? h.a : h.b) = &t;
  }
  if (modules.empty()) return bad_file(dir_name + ": the adapter has no LoRA tensors");

  std::map<std::string, std::string> gguf_of;  // HF tensor name -> glmserve's
  for (int64_t l = 0; l < n_layer; ++l) {
    for (const char* mat : kMatrices) {
      const std::string g = "blk." + std::to_string(l) + "." + mat + ".weight";
      const std::string hf = hf_tensor_name(g, family);
      if (!hf.empty()) gguf_of[hf] = g;
    }
  }
  LoraFile lora;
  lora.arch = arch;
  lora.alpha = static_cast<float>(alpha);
  for (const auto& [module, h] : modules) {
    auto it = gguf_of.find(module + ".weight");
    if (it == gguf_of.end()) {
      return unsupported(dir_name + ": a LoRA on " + module +
                         " (not one of the modules ChatGLM's LoRA can target: query_key_value, "
                         "dense, dense_h_to_4h, dense_4h_to_h)");
    }
    const std::string leaf = module.substr(module.rfind('.') + 1);
    if (!targets.empty() && std::find(targets.begin(), targets.end(), leaf) == targets.end()) {
      return bad_file(dir_name + ": a LoRA on " + module + ", which target_modules does not list");
    }
    if (h.a == nullptr || h.b == nullptr) {
      return bad_file(dir_name + ": the LoRA of " + module + " has no " +
                      (h.a == nullptr ? "lora_A" : "lora_B"));
    }
    const std::vector<int64_t>& as = h.a->shape;
    const std::vector<int64_t>& bs = h.b->shape;
    if (as.size() != 2 || as[0] != r) {
      return bad_file(dir_name + ": tensor " + h.a->name + " is not [r = " + std::to_string(r) +
                      ", n_in]");
    }
    if (bs.size() != 2 || bs[1] != r) {
      return bad_file(dir_name + ": tensor " + h.b->name +
                      " is not [n_out, r = " + std::to_string(r) + "]");
    }
    LoraTensor t;
    t.base = it->second;
    t.rank = r;
    t.n_in = as[1];
    t.n_out = bs[0];
    GLM_RETURN_IF_ERROR(to_floats(*h.a, dir_name, &t.a));  // [r, n_in]
    GLM_RETURN_IF_ERROR(to_floats(*h.b, dir_name, &t.b));  // [n_out, r]
    lora.tensors.push_back(std::move(t));
  }
  // File order: by layer, then matrix (as the base model's table).
  auto order = [](const LoraTensor& t) {
    const size_t dot = t.base.find('.', 4);
    const int layer = std::stoi(t.base.substr(4, dot - 4));
    const std::string mat = t.base.substr(dot + 1, t.base.size() - dot - 8);
    int k = 0;
    while (k < 8 && mat != kMatrices[k]) ++k;
    return layer * 8 + k;
  };
  std::sort(lora.tensors.begin(), lora.tensors.end(),
            [&](const LoraTensor& x, const LoraTensor& y) { return order(x) < order(y); });
  return lora;
}

Status convert_peft(const std::string& dir, DType type, const std::string& out_path,
                    LoraFile* written) {
  StatusOr<LoraFile> lora = read_peft(dir);
  if (!lora.ok()) return lora.status();
  GLM_RETURN_IF_ERROR(write_lora_file(*lora, type, out_path));
  if (written != nullptr) *written = std::move(*lora);
  return Status::Ok();
}

}  // namespace glm::convert
