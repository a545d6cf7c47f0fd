#include "convert/model_writer.h"

#include <algorithm>
#include <cstring>

#include "core/fp16.h"
#include "kernels/quant.h"
#include "kernels/thread_pool.h"

namespace glm::convert {

namespace {
constexpr int64_t kChunkFloats = int64_t{1} << 20;
}  // namespace

int64_t chunk_rows(int64_t row_len) {
  const int64_t r = kChunkFloats / (row_len > 0 ? row_len : 1);
  return r > 0 ? r : 1;
}

bool can_encode(DType t) { return is_float_type(t) || kernels::can_quantize(t); }
bool can_decode(DType t) { return is_float_type(t) || kernels::can_dequantize(t); }

void encode_rows(DType t, const float* x, int64_t n_rows, int64_t row_len, uint8_t* out) {
  const int64_t n = n_rows * row_len;
  switch (t) {
    case DType::kF32:
      std::memcpy(out, x, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_fp16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_bf16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    default: {
      const size_t rb = row_bytes(t, row_len);
      for (int64_t r = 0; r < n_rows; ++r) {
        kernels::quantize_row_ref(t, x + r * row_len, out + r * rb, row_len);
      }
    }
  }
}

void decode_rows(DType t, const uint8_t* x, int64_t n_rows, int64_t row_len, float* out) {
  const int64_t n = n_rows * row_len;
  switch (t) {
    case DType::kF32:
      std::memcpy(out, x, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, x + 2 * i, 2);
        out[i] = fp16_to_fp32(h);
      }
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, x + 2 * i, 2);
        out[i] = bf16_to_fp32(h);
      }
      return;
    default: {
      const size_t rb = row_bytes(t, row_len);
      for (int64_t r = 0; r < n_rows; ++r) {
        kernels::dequantize_row_ref(t, x + r * rb, out + r * row_len, row_len);
      }
    }
  }
}

Status write_model_file(const std::string& path, const Hparams& hp, const tok::VocabSpec& vocab,
                        DType target, const RowSource& source, WriteReport* report,
                        const ProgressFn& progress, int threads) {
  GLM_RETURN_IF_ERROR(hp.validate());
  if (static_cast<int64_t>(vocab.tokens.size()) != hp.n_vocab) {
    return invalid_argument("vocabulary has " + std::to_string(vocab.tokens.size()) +
                            " tokens but the model has " + std::to_string(hp.n_vocab) +
                            " embedding rows");
  }
  WriteReport local;
  WriteReport& rep = report != nullptr ? *report : local;
  const std::vector<TensorPlan> plan = tensor_plan(hp, target, &rep.notes);
  for (const TensorPlan& t : plan) {
    if (!can_encode(t.type)) {
      return unsupported(std::string("weight type ") + dtype_name(t.type) +
                         " cannot be written yet (use f16, q8_0 or q4_0)");
    }
  }

  gguf::Writer w;
  write_arch_metadata(hp, target, &w);
  tok::write_vocab(vocab, &w);
  for (const TensorPlan& t : plan) w.add_tensor(t.name, t.type, t.shape);
  GLM_RETURN_IF_ERROR(w.begin(path));

  uint64_t total_bytes = 0, done_bytes = 0;
  for (const TensorPlan& t : plan) total_bytes += t.n_bytes();
  // A group of chunks is filled and encoded at once (one a thread), then written in order.
  const int n_slots = std::max(1, threads);
  kernels::ThreadPool pool(n_slots);  // one thread: the caller alone
  std::vector<std::vector<float>> rows(static_cast<size_t>(n_slots));
  std::vector<std::vector<uint8_t>> bytes(static_cast<size_t>(n_slots));
  std::vector<Status> status(static_cast<size_t>(n_slots));
  for (const TensorPlan& t : plan) {
    const int64_t len = t.row_len();
    const int64_t total = t.n_rows();
    const int64_t step = chunk_rows(len);
    const int64_t n_chunks = (total + step - 1) / step;
    for (int64_t c0 = 0; c0 < n_chunks; c0 += n_slots) {
      const int64_t n_group = std::min<int64_t>(n_slots, n_chunks - c0);
      auto fill = [&](int64_t i) {
        const int64_t r0 = (c0 + i) * step;
        const int64_t n = std::min(step, total - r0);
        std::vector<float>& f = rows[static_cast<size_t>(i)];
        f.resize(static_cast<size_t>(n * len));
        status[static_cast<size_t>(i)] = source(t, r0, n, f.data());
        if (!status[static_cast<size_t>(i)].ok()) return;
        std::vector<uint8_t>& b = bytes[static_cast<size_t>(i)];
        b.resize(static_cast<size_t>(n) * row_bytes(t.type, len));
        encode_rows(t.type, f.data(), n, len, b.data());
      };
      pool.parallel_for(n_group, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) fill(i);
      });
      for (int64_t i = 0; i < n_group; ++i) {
        GLM_RETURN_IF_ERROR(status[static_cast<size_t>(i)]);
        const std::vector<uint8_t>& b = bytes[static_cast<size_t>(i)];
        GLM_RETURN_IF_ERROR(w.write_tensor_data(b.data(), b.size()));
        done_bytes += b.size();
        if (progress) progress(done_bytes, total_bytes);
      }
    }
    rep.n_bytes += t.n_bytes();
    rep.n_parameters += static_cast<uint64_t>(t.n_elements());
    ++rep.n_tensors;
  }
  return w.finish();
}

}  // namespace glm::convert
