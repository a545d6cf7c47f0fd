// `glmserve quantize IN OUT TYPE`: re-encodes every 2-D weight of a GGUF model to TYPE
// (dequantize_row_ref then quantize_row_ref, row chunk by row chunk), keeps norms and biases
// F32, copies the metadata (general.file_type updated). Tensor types follow choose_type() in
// model_spec.h: the output head becomes Q6_K, shapes a block does not divide fall back as in
// llama.cpp (each fallback is reported in QuantizeReport::notes). A tensor already of its target
// type is copied byte for byte. Memory: one chunk plus the input's mapping.
// Reentrant; not cancellable.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/progress.h"
#include "core/status.h"

namespace glm::convert {

struct QuantizeReport {
  size_t n_converted = 0;  // tensors re-encoded
  size_t n_copied = 0;     // tensors copied unchanged
  uint64_t bytes_in = 0;   // tensor data
  uint64_t bytes_out = 0;
  std::vector<std::string> notes;  // "blk.0.ffn_down.weight: row length 13696 is not ..."
};

// Errors: not_found / bad_file for the input, unsupported for a tensor type that cannot be
// decoded, invalid_argument when in and out are the same path.
// `progress`: input tensor bytes done of the total, after each chunk (may be empty).
Status quantize_file(const std::string& in_path, const std::string& out_path, DType target,
                     QuantizeReport* report, const ProgressFn& progress = nullptr);

}  // namespace glm::convert
