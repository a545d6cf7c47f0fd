#include "hub/checkpoint.h"

#include "hub/digest.h"

namespace glm::hub {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_torch_weights(const std::string& p) {
  return p.rfind("pytorch_model", 0) == 0 && ends_with(p, ".bin");
}

void fingerprint(Checkpoint* ck) {
  Digest d(Digest::Kind::kSha256, 0);
  for (const RemoteFile& f : ck->files) {
    const std::string line =
        f.path + " " + std::to_string(f.size) + " " + f.sha256 + f.git_oid + "\n";
    d.update(line.data(), line.size());
  }
  ck->fingerprint = d.finish_hex();
}

// PEFT's files, in the order they are fetched: the config first (a bad one fails early).
std::optional<Checkpoint> find_peft(const std::vector<RemoteFile>& files) {
  const RemoteFile *config = nullptr, *safetensors = nullptr, *bin = nullptr;
  for (const RemoteFile& f : files) {
    if (f.path == "adapter_config.json") config = &f;
    if (f.path == "adapter_model.safetensors") safetensors = &f;
    if (f.path == "adapter_model.bin") bin = &f;
  }
  if (config == nullptr || (safetensors == nullptr && bin == nullptr)) return std::nullopt;
  Checkpoint ck;
  ck.lora = true;
  ck.files = {*config, safetensors != nullptr ? *safetensors : *bin};
  for (const RemoteFile& f : ck.files) ck.bytes += f.size;
  fingerprint(&ck);
  return ck;
}

}  // namespace

std::optional<Checkpoint> find_checkpoint(const std::vector<RemoteFile>& files) {
  if (std::optional<Checkpoint> peft = find_peft(files)) return peft;
  bool has_config = false, has_safetensors = false, has_torch = false;
  for (const RemoteFile& f : files) {
    if (f.path.find('/') != std::string::npos) continue;
    has_config |= f.path == "config.json";
    has_safetensors |= ends_with(f.path, ".safetensors");
    has_torch |= is_torch_weights(f.path);
  }
  if (!has_config || (!has_safetensors && !has_torch)) return std::nullopt;
  Checkpoint ck;
  for (const RemoteFile& f : files) {
    const std::string& p = f.path;
    if (p.find('/') != std::string::npos) continue;
    const bool weights = has_safetensors ? ends_with(p, ".safetensors") : is_torch_weights(p);
    const bool index =
        has_safetensors ? p == "model.safetensors.index.json" : p == "pytorch_model.bin.index.json";
    const bool other_index = ends_with(p, ".index.json") && !index;
    const bool tokenizer = p.rfind("tokenizer", 0) == 0 || ends_with(p, ".tiktoken");
    if (weights || index || tokenizer || (ends_with(p, ".json") && !other_index)) {
      ck.files.push_back(f);
      ck.bytes += f.size;
    }
  }
  fingerprint(&ck);
  return ck;
}

}  // namespace glm::hub
