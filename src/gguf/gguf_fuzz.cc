// libFuzzer target: any byte string must parse to a File or to a one-line error, never crash.
// Build: CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DGLM_FUZZ=ON
//        cmake --build build-fuzz --target gguf_fuzz && build-fuzz/src/gguf/gguf_fuzz -max_len=4096
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "gguf/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = glm::gguf::File::parse(data, size, "fuzz");
  if (!f.ok()) {
    if (f.status().message().find('\n') != std::string::npos) std::abort();
    return 0;
  }
  // Touch everything the parser promised is valid: metadata accessors and tensor bytes.
  const glm::gguf::File& file = **f;
  size_t sum = 0;
  for (const auto& [key, value] : file.metadata()) {
    sum += key.size() + value.array_size();
    if (value.is_number()) sum += static_cast<size_t>(value.as_uint());
    sum += value.ints().size() + value.floats().size();
  }
  for (const glm::gguf::TensorInfo& t : file.tensors()) {
    if (t.data < data || t.data + t.n_bytes > data + size) std::abort();
    if (t.n_bytes > 0) sum += t.data[0] + t.data[t.n_bytes - 1];
  }
  return static_cast<int>(sum & 0);
}
