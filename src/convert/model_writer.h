// Streaming writer of a whole model file: metadata (architecture keys + vocabulary), then the
// tensors of tensor_plan() filled row chunk by row chunk from a RowSource and encoded to their
// planned types. Memory stays at one chunk (~4 MB of floats) whatever the model size, so a
// 12 GB file never sits in memory. Shared by gen-model (random rows) and convert (HF rows).
// Functions are reentrant; a RowSource is called from the calling thread only, unless
// write_model_file is given threads > 1 (then it must be thread-safe).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "convert/model_spec.h"
#include "core/progress.h"
#include "core/status.h"
#include "tokenizer/vocab_convert.h"

namespace glm::convert {

// Fills rows [row0, row0 + n_rows) of tensor `t` as floats: out is [n_rows, t.row_len()].
using RowSource =
    std::function<Status(const TensorPlan& t, int64_t row0, int64_t n_rows, float* out)>;

struct WriteReport {
  uint64_t n_bytes = 0;  // tensor data written
  uint64_t n_parameters = 0;
  size_t n_tensors = 0;
  std::vector<std::string> notes;  // type fallbacks, one line each
};

// Writes `path` (atomically: gguf::Writer renames a finished .tmp). vocab.tokens.size() must
// equal hp.n_vocab (invalid_argument otherwise). `progress`: tensor bytes written of the
// file's total, after each chunk (may be empty). threads > 1: that many chunks are filled and
// encoded at once (the file is the same, byte for byte); the source is called concurrently.
Status write_model_file(const std::string& path, const Hparams& hp, const tok::VocabSpec& vocab,
                        DType target, const RowSource& source, WriteReport* report,
                        const ProgressFn& progress = nullptr, int threads = 1);

// Encodes n_rows rows of row_len floats to type t (F32/F16/BF16 by conversion, quantized types
// by kernels::quantize_row_ref): out holds n_rows * row_bytes(t, row_len) bytes.
void encode_rows(DType t, const float* x, int64_t n_rows, int64_t row_len, uint8_t* out);
// The inverse: rows of type t to floats (exact for float types).
void decode_rows(DType t, const uint8_t* x, int64_t n_rows, int64_t row_len, float* out);
// True if encode_rows / decode_rows handle t.
bool can_encode(DType t);
bool can_decode(DType t);

// Rows per chunk so that a chunk holds about 1M floats (at least one row).
int64_t chunk_rows(int64_t row_len);

}  // namespace glm::convert
