#include "hub/file_type.h"

#include <map>

namespace glm::hub {

namespace {

// llama.cpp's llama_ftype values (llama.h), the ones files in the wild carry.
struct FileType {
  int64_t id;
  const char* name;
};
constexpr FileType kFileTypes[] = {
    {0, "F32"},      {1, "F16"},      {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},
    {8, "Q5_0"},     {9, "Q5_1"},     {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"},
    {13, "Q3_K_L"},  {14, "Q4_K_S"},  {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"},
    {18, "Q6_K"},    {19, "IQ2_XXS"}, {20, "IQ2_XS"}, {21, "Q2_K_S"}, {22, "IQ3_XS"},
    {23, "IQ3_XXS"}, {24, "IQ1_S"},   {25, "IQ4_NL"}, {26, "IQ3_S"},  {27, "IQ3_M"},
    {28, "IQ2_S"},   {29, "IQ2_M"},   {30, "IQ4_XS"}, {31, "IQ1_M"},  {32, "BF16"},
};

std::string upper(std::string s) {
  for (char& c : s) c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  return s;
}

}  // namespace

std::string weight_type_name(const gguf::File& file) {
  StatusOr<int64_t> ft = file.get_int_or("general.file_type", -1);
  if (ft.ok() && *ft >= 0) {
    for (const FileType& t : kFileTypes) {
      if (t.id == *ft) return t.name;
    }
  }
  std::map<DType, size_t> bytes;
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (t.shape.size() >= 2) bytes[t.type] += t.n_bytes;
  }
  const std::pair<const DType, size_t>* best = nullptr;
  for (const auto& kv : bytes) {
    if (best == nullptr || kv.second > best->second) best = &kv;
  }
  return best == nullptr ? "?" : upper(dtype_name(best->first));
}

std::string adapter_kind(const gguf::File& file) {
  StatusOr<std::string> type = file.get_string("general.type");
  if (!type.ok() || *type != "adapter") return "";
  StatusOr<std::string> kind = file.get_string("adapter.type");
  return kind.ok() && !kind->empty() ? *kind : "?";
}

}  // namespace glm::hub
