// Edited copies of a GGUF file for tests: its metadata changed, a tensor dropped, tensors'
// bytes rewritten. Test use only; header-only.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/test_util.h"

namespace glm::testing {

// Changes a tensor's bytes before they are written: (name, data).
using DataEdit = std::function<void(const std::string&, std::vector<uint8_t>*)>;

// A copy of `src` (in the test's temp directory as `name`) with `edit` applied to its
// metadata, without the tensor or metadata key `drop`, and `data_edit` applied to each tensor's
// bytes.
inline std::string edited_copy(const std::string& src, const std::string& name,
                               const std::function<void(gguf::Writer*)>& edit,
                               const std::string& drop = "", const DataEdit& data_edit = nullptr) {
  auto f = gguf::File::open(src);
  EXPECT_TRUE(f.ok());
  gguf::Writer w;
  for (const auto& [key, value] : (*f)->metadata()) {
    if (key != "general.alignment" && key != drop) w.set(key, value);
  }
  if (edit) edit(&w);
  for (const gguf::TensorInfo& t : (*f)->tensors()) {
    if (t.name != drop) w.add_tensor(t.name, t.type, t.shape);
  }
  const std::string path = model::testing::temp_path(name);
  EXPECT_TRUE(w.begin(path).ok());
  for (const gguf::TensorInfo& t : (*f)->tensors()) {
    if (t.name == drop) continue;
    std::vector<uint8_t> bytes(t.data, t.data + t.n_bytes);
    if (data_edit) data_edit(t.name, &bytes);
    EXPECT_TRUE(w.write_tensor_data(bytes.data(), bytes.size()).ok());
  }
  EXPECT_TRUE(w.finish().ok());
  return path;
}

}  // namespace glm::testing
