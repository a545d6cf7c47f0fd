// Cross-module: tensors of every weight type quantized with kernels::quantize_row_ref, streamed
// row by row through gguf::Writer, read back through gguf::File (mmap) and dequantized. What
// comes back must be bit-identical to what was written, for row lengths of several blocks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/quant.h"

namespace glm {
namespace {

TEST(GgufQuant, EveryWeightTypeSurvivesAFile) {
  const DType types[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0,
                         DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0,
                         DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
  const int64_t n_cols = 512, n_rows = 3;
  std::mt19937 rng(99);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> weights(n_cols * n_rows);
  for (float& w : weights) w = normal(rng);

  char dir_template[] = "/tmp/glm_gguf_quant.XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string path = std::string(dir_template) + "/all-types.gguf";
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::string("test"));
  for (DType t : types) w.add_tensor(std::string("w.") + dtype_name(t), t, {n_cols, n_rows});
  ASSERT_TRUE(w.begin(path).ok());
  std::vector<std::vector<uint8_t>> written;
  for (DType t : types) {
    std::vector<uint8_t> all;
    for (int64_t r = 0; r < n_rows; ++r) {  // one row at a time, as gen-model streams
      std::vector<uint8_t> row(row_bytes(t, n_cols));
      kernels::quantize_row_ref(t, weights.data() + r * n_cols, row.data(), n_cols);
      ASSERT_TRUE(w.write_tensor_data(row.data(), row.size()).ok());
      all.insert(all.end(), row.begin(), row.end());
    }
    written.push_back(std::move(all));
  }
  ASSERT_TRUE(w.finish().ok());

  auto f = gguf::File::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  for (size_t i = 0; i < std::size(types); ++i) {
    const DType t = types[i];
    const gguf::TensorInfo* ti = (*f)->tensor(std::string("w.") + dtype_name(t));
    ASSERT_NE(ti, nullptr) << dtype_name(t);
    EXPECT_EQ(ti->type, t);
    EXPECT_EQ(ti->n_rows(), n_rows);
    ASSERT_EQ(ti->n_bytes, written[i].size());
    ASSERT_EQ(std::memcmp(ti->data, written[i].data(), ti->n_bytes), 0) << dtype_name(t);
    std::vector<float> from_file(n_cols * n_rows), from_memory(n_cols * n_rows);
    const size_t rb = row_bytes(t, n_cols);
    for (int64_t r = 0; r < n_rows; ++r) {
      kernels::dequantize_row_ref(t, ti->data + r * rb, from_file.data() + r * n_cols, n_cols);
      kernels::dequantize_row_ref(t, written[i].data() + r * rb, from_memory.data() + r * n_cols,
                                  n_cols);
    }
    EXPECT_EQ(from_file, from_memory) << dtype_name(t);
    double err = 0.0;
    for (size_t k = 0; k < weights.size(); ++k) {
      err = std::max(err, static_cast<double>(std::fabs(from_file[k] - weights[k])));
    }
    EXPECT_LT(err, 0.02) << dtype_name(t);  // 4-bit of N(0, 0.02): far below one sigma
  }
  unlink(path.c_str());
  rmdir(dir_template);
}

}  // namespace
}  // namespace glm
