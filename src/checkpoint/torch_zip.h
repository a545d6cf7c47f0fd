// Reading PyTorch checkpoints (`pytorch_model.bin`) as torch.save (torch >= 1.6) writes them: a
// zip archive whose entries all sit under one folder named after the file (`archive/` when
// saved to a buffer):
//   <archive>/data.pkl     the pickled state dict, read by the restricted unpickler (unpickle.h)
//   <archive>/byteorder    "little" or "big" (absent before torch 2.1: little)
//   <archive>/data/<key>   each storage's raw bytes, stored uncompressed and 64-byte aligned
//   <archive>/version, <archive>/.data/...   (not needed)
// Tensors come out as StTensor (safetensors.h), so the converter reads both formats alike.
// Contiguous views of stored storages point into the mapped file (no copy; two tensors on one
// storage share it); strided views and deflated storages are materialised into owned memory at
// open. Little-endian only. The legacy non-zip format of torch 0.4 - 1.5 (pickles back to back,
// then the storages) is read too; the older tar layout is refused with what to do. Immutable
// after open: thread-safe for readers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "checkpoint/unpickle.h"
#include "core/mapped_file.h"
#include "core/status.h"

namespace glm::checkpoint {

class TorchZipFile {
 public:
  // Cost: maps the file; reads data.pkl and the zip directory; copies only what is strided or
  // compressed. Errors: not_found, bad_file (corrupt, truncated), unsupported (refused pickle
  // content, legacy format, big-endian).
  static StatusOr<std::unique_ptr<TorchZipFile>> open(const std::string& path);
  // Parses an image held in memory (not owned; must outlive the object).
  static StatusOr<std::unique_ptr<TorchZipFile>> parse(const uint8_t* data, size_t size,
                                                       const std::string& label);

  const std::vector<StTensor>& tensors() const { return tensors_; }
  const StTensor* find(const std::string& name) const;  // nullptr if absent
  const std::string& path() const { return label_; }
  // Bytes copied at open (strided views, inflated storages); 0 for a plain torch.save file.
  size_t n_copied_bytes() const;

 private:
  using StorageFn = std::function<Status(const PickledTensor& first_user, const uint8_t** bytes)>;
  static StatusOr<std::unique_ptr<TorchZipFile>> parse_legacy(const uint8_t* data, size_t size,
                                                              const std::string& label);
  // Views -> tensors_: storage_of(v) gives the bytes of v's storage (numel checked), once a key.
  Status add_tensors(const std::vector<PickledTensor>& views, const StorageFn& storage_of);

  MappedFile map_;
  std::string label_;
  std::vector<StTensor> tensors_;
  std::vector<std::vector<uint8_t>> owned_;  // buffers tensors_ may point into
};

// True if the first bytes of a file are those of torch.save's legacy (torch < 1.6) formats.
bool is_legacy_torch_file(const uint8_t* data, size_t size);

}  // namespace glm::checkpoint
