// A restricted, data-only unpickler for the `data.pkl` of a torch.save checkpoint: it reads a
// state dict (a dict or collections.OrderedDict of name -> tensor) and nothing else.
//
// It interprets the pickle opcodes torch.save (protocol 2) writes for a state dict, plus the
// protocol-4 framing opcodes, and knows exactly these globals:
//   collections.OrderedDict                      (called with no arguments)
//   torch._utils._rebuild_tensor_v2 / _rebuild_tensor / _rebuild_parameter(_with_state)
//   torch.{Half,BFloat16,Float,Double,Long,Int,Short,Char,Byte,Bool}Storage
//                                                (only inside a storage persistent id)
// Every other global (os.system, builtins.eval, ...) and every other opcode (INST, OBJ, NEWOBJ,
// EXT*, ...) is refused with an error that names it. Nothing is ever called or imported: the
// globals above are recognized by name and their effect is computed here, so a checkpoint can
// never run code. Hostile input (truncated, garbage, huge lengths, deep nesting) gets a
// bad_file Status; memo size, stack depth and string lengths are bounded.
// Reentrant; cost O(size of the pickle).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace glm::checkpoint {

// One tensor of the state dict: a strided view of a storage (PyTorch's layout: element
// [i0, i1, ...] is storage[offset + sum_k i_k * stride[k]]).
struct PickledTensor {
  std::string name;
  std::string storage_key;      // the storage's record: <archive>/data/<storage_key>
  std::string dtype;            // safetensors spelling: "F16", "BF16", "F32", "I64", ...
  int64_t storage_numel = 0;    // elements in the storage
  int64_t offset = 0;           // storage_offset, in elements
  std::vector<int64_t> shape;   // PyTorch order
  std::vector<int64_t> stride;  // in elements, one per dimension
  int64_t n_elements() const;
  // True when the view is the row-major run storage[offset, offset + n_elements()).
  bool contiguous() const;
};

// The tensors of the state dict pickled in data[0, size), in the dict's order; entries whose
// value is not a tensor are skipped. Each view is checked to lie inside its storage's numel,
// and tensors sharing a storage key must agree on its type and numel. `label` names the file in
// errors. bad_file for malformed input, unsupported for a refused global or opcode.
// `legacy`: the persistent ids of torch < 1.6 files, ('storage', class, key, location, numel,
// view_metadata), with view_metadata None. `end` (optional) receives the bytes consumed.
StatusOr<std::vector<PickledTensor>> unpickle_state_dict(const uint8_t* data, size_t size,
                                                         const std::string& label,
                                                         bool legacy = false,
                                                         size_t* end = nullptr);

// A pickle of plain data only (None, bool, int, float, str, tuple, list, dict with str keys),
// under the same rules, as JSON (tuples become arrays); `end` as above. For the small header
// pickles of the legacy format.
StatusOr<nlohmann::json> unpickle_plain(const uint8_t* data, size_t size, const std::string& label,
                                        size_t* end = nullptr);

// The torch storage class name for a safetensors dtype ("F16" -> "HalfStorage"), "" if none.
std::string torch_storage_name(const std::string& dtype);

}  // namespace glm::checkpoint
