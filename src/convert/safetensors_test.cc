// Tests of src/checkpoint, kept in convert_test: the ASan step of scripts/test.sh builds
// convert_test and runs these (Unpickle*, TorchZip*) under AddressSanitizer.
#include "checkpoint/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

#include "checkpoint/test_util.h"

namespace glm::checkpoint {
namespace {

using testing::read_bytes;
using testing::TempDir;

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(Safetensors, WriteThenRead) {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  std::vector<StTensorOut> ts = {
      {"a.weight", "F32", {2, 3}, f32_bytes({1, 2, 3, 4, 5, 6})},
      {"b.bias", "F16", {4}, std::vector<uint8_t>(8, 0x3c)},
      {"c", "BF16", {1, 1, 1}, {0x80, 0x3f}},
  };
  ASSERT_TRUE(write_safetensors(path, ts).ok());
  const std::string raw = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(raw[8], '{');

  StatusOr<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  ASSERT_EQ((*f)->tensors().size(), 3u);
  const StTensor* a = (*f)->find("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, "F32");
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(a->n_bytes, 24u);
  float v[6];
  std::memcpy(v, a->data, 24);
  EXPECT_EQ(v[5], 6.0f);
  EXPECT_EQ((*f)->find("c")->n_bytes, 2u);
  EXPECT_EQ((*f)->find("missing"), nullptr);
}

// Builds an image from a header text and a data section.
std::string image(const std::string& header, size_t data_bytes) {
  std::string s(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(s.data(), &n, 8);
  return s + header + std::string(data_bytes, '\0');
}

TEST(Safetensors, CorruptFilesAreRejected) {
  const std::string good = R"({"t":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  const std::string ok_image = image(good, 16);
  ASSERT_TRUE(SafetensorsFile::parse(reinterpret_cast<const uint8_t*>(ok_image.data()),
                                     ok_image.size(), "ok")
                  .ok());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"truncated length", std::string("\x10\x00\x00", 3)},
      {"huge header", std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) + "{}"},
      {"not json", image("{nope", 0)},
      {"not an object", image("[1,2]", 0)},
      {"missing offsets", image(R"({"t":{"dtype":"F32","shape":[1]}})", 4)},
      {"unknown dtype", image(R"({"t":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", 4)},
      {"out of range", image(R"({"t":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", 8)},
      {"size mismatch", image(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", 16)},
      {"reversed", image(R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 16)},
      {"negative dim", image(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4)},
      {"huge shape",
       image(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4)},
  };
  for (const auto& [what, img] : bad) {
    StatusOr<std::unique_ptr<SafetensorsFile>> f =
        SafetensorsFile::parse(reinterpret_cast<const uint8_t*>(img.data()), img.size(), what);
    ASSERT_FALSE(f.ok()) << what;
    EXPECT_EQ(f.status().code(), ErrorCode::kBadFile) << what;
    EXPECT_EQ(f.status().message().find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace glm::checkpoint
