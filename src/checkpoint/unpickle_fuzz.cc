// libFuzzer target: any byte string, as a data.pkl or as a whole .bin checkpoint, must give
// tensors that lie inside their storages or a one-line error; never a crash, a leak or a hang.
// Build: CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DGLM_FUZZ=ON
//        cmake --build build-fuzz --target unpickle_fuzz
//        build-fuzz/src/checkpoint/unpickle_fuzz -max_len=4096
// (glm_checkpoint links only core, minizip and zlib, not the kernels that clang 14 rejects.)
// Seeds: any pytorch_model.bin, or the files torch_test_writer.h writes.
// Inputs that start with "PK" or with the legacy format's magic number go through the file reader
// (torch_zip.h), the rest through the unpickler alone (unpickle.h).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "checkpoint/torch_zip.h"
#include "checkpoint/unpickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t sum = 0;
  if ((size >= 2 && data[0] == 'P' && data[1] == 'K') ||
      glm::checkpoint::is_legacy_torch_file(data, size)) {
    auto f = glm::checkpoint::TorchZipFile::parse(data, size, "fuzz.bin");
    if (!f.ok()) {
      if (f.status().message().find('\n') != std::string::npos) std::abort();
      return 0;
    }
    for (const glm::checkpoint::StTensor& t : (*f)->tensors()) {
      if (t.n_bytes > 0) sum += t.data[0] + t.data[t.n_bytes - 1];
    }
    return static_cast<int>(sum & 0);
  }
  auto r = glm::checkpoint::unpickle_state_dict(data, size, "fuzz.pkl");
  if (!r.ok()) {
    if (r.status().message().find('\n') != std::string::npos) std::abort();
    return 0;
  }
  for (const glm::checkpoint::PickledTensor& t : *r) {
    // The promise: every element of the view lies inside the storage.
    int64_t last = t.offset;
    bool empty = false;
    for (size_t k = 0; k < t.shape.size(); ++k) {
      if (t.shape[k] == 0) empty = true;
      if (t.shape[k] > 0) last += (t.shape[k] - 1) * t.stride[k];
    }
    if (!empty && (last < 0 || last >= t.storage_numel)) std::abort();
    sum += t.name.size();
  }
  return static_cast<int>(sum & 0);
}
