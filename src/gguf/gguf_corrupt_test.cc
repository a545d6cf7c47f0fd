// Corrupted GGUF files: every one must be rejected with a one-line bad_file Status, never a
// crash, a hang or a huge allocation (this binary also runs under ASan+UBSan in scripts/test.sh).
// The images are built by hand here, independently of gguf::Writer, with every field's position
// recorded so that each count, length, type and offset can be corrupted in turn.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace glm::gguf {
namespace {

// Builds a GGUF image field by field, remembering where each field is.
class Image {
 public:
  struct Field {
    size_t pos;
    size_t size;  // 4 or 8
    std::string what;
  };

  void u32(uint32_t v, const std::string& what = "") { put(v, 4, what); }
  void u64(uint64_t v, const std::string& what = "") { put(v, 8, what); }
  void str(const std::string& s, const std::string& what = "string length") {
    u64(s.size(), what);
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  void raw(const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
  }
  void pad_to(size_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(0);
  }
  void header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    u32(0x46554747);
    u32(version, "version");
    u64(n_tensors, "tensor count");
    u64(n_kv, "metadata count");
  }
  void tensor_info(const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                   uint64_t offset) {
    str(name, "tensor name length");
    u32(static_cast<uint32_t>(dims.size()), "n_dims");
    for (uint64_t d : dims) u64(d, "dimension");
    u32(type, "tensor type");
    u64(offset, "tensor offset");
  }

  std::vector<uint8_t>& bytes() { return bytes_; }
  const std::vector<Field>& fields() const { return fields_; }

 private:
  void put(uint64_t v, size_t n, const std::string& what) {
    if (!what.empty()) fields_.push_back({bytes_.size(), n, what});
    for (size_t i = 0; i < n; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> bytes_;
  std::vector<Field> fields_;
};

// A valid image with metadata of several kinds and three tensors whose data ends the file.
Image valid_image() {
  Image im;
  im.header(3, 3, 5);
  im.str("general.architecture", "key length");
  im.u32(8, "value type");
  im.str("chatglm", "string length");
  im.str("general.alignment", "key length");
  im.u32(4, "value type");
  im.u32(64);
  im.str("tokenizer.ggml.tokens", "key length");
  im.u32(9, "value type");
  im.u32(8, "array element type");
  im.u64(3, "array count");
  im.str("<unk>", "string length");
  im.str("", "string length");
  im.str("abc", "string length");
  im.str("nested", "key length");
  im.u32(9, "value type");
  im.u32(9, "array element type");
  im.u64(2, "array count");
  im.u32(5, "array element type");
  im.u64(2, "array count");
  im.u32(7);
  im.u32(8);
  im.u32(6, "array element type");
  im.u64(0, "array count");
  im.str("scores", "key length");
  im.u32(9, "value type");
  im.u32(6, "array element type");
  im.u64(2, "array count");
  im.u32(0x3f800000);
  im.u32(0x40000000);
  // Tensors: f32 [16, 2] (128 bytes), q8_0 [32, 1] (34 bytes), f16 [32] (64 bytes), 64-aligned.
  im.tensor_info("a.weight", {16, 2}, 0, 0);
  im.tensor_info("b.weight", {32, 1}, 8, 128);
  im.tensor_info("c.weight", {32}, 1, 192);
  im.pad_to(64);
  std::vector<uint8_t> data(256, 0x11);
  im.raw(data.data(), data.size());
  return im;
}

StatusOr<std::unique_ptr<File>> parse(const std::vector<uint8_t>& b) {
  return File::parse(b.data(), b.size(), "corrupt.gguf");
}

// Expects a rejection with a one-line bad_file message naming the file.
void expect_rejected(const std::vector<uint8_t>& b, const std::string& why,
                     const std::string& must_contain = "") {
  auto f = parse(b);
  ASSERT_FALSE(f.ok()) << why << ": accepted";
  EXPECT_EQ(f.status().code(), ErrorCode::kBadFile) << why;
  const std::string& m = f.status().message();
  EXPECT_EQ(m.find('\n'), std::string::npos) << why << ": " << m;
  EXPECT_EQ(m.rfind("corrupt.gguf: ", 0), 0u) << why << ": " << m;
  if (!must_contain.empty()) {
    EXPECT_NE(m.find(must_contain), std::string::npos) << why << ": " << m;
  }
}

TEST(GgufCorrupt, ValidImageParses) {
  Image im = valid_image();
  auto f = parse(im.bytes());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ((*f)->alignment(), 64u);
  ASSERT_EQ((*f)->tensors().size(), 3u);
  EXPECT_EQ((*f)->tensor("b.weight")->n_bytes, 34u);
  EXPECT_EQ((*f)->find("nested")->items()[0].ints(), (std::vector<int64_t>{7, 8}));
  EXPECT_EQ((*f)->find("scores")->floats(), (std::vector<float>{1.0f, 2.0f}));
}

TEST(GgufCorrupt, TruncatedAtEveryByte) {
  Image im = valid_image();
  const std::vector<uint8_t>& full = im.bytes();
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + n);
    expect_rejected(cut, "truncated to " + std::to_string(n) + " bytes");
  }
}

TEST(GgufCorrupt, HugeOrBadValueInEveryField) {
  Image base = valid_image();
  const uint64_t size = base.bytes().size();
  for (const Image::Field& field : base.fields()) {
    std::vector<uint64_t> bad;
    if (field.size == 8) {
      bad = {~0ull, 1ull << 63, 1ull << 40, size + 1};
    } else {
      bad = {~0u, 0x80000000u, 1000};
    }
    for (uint64_t v : bad) {
      std::vector<uint8_t> b = base.bytes();
      for (size_t i = 0; i < field.size; ++i) b[field.pos + i] = static_cast<uint8_t>(v >> (8 * i));
      expect_rejected(
          b, field.what + " at byte " + std::to_string(field.pos) + " set to " + std::to_string(v));
    }
  }
}

TEST(GgufCorrupt, EveryBitFlipIsHandled) {
  // Any outcome is fine except a crash or sanitizer report; many flips still give a valid file.
  Image base = valid_image();
  size_t rejected = 0, total = 0;
  for (size_t i = 0; i < base.bytes().size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<uint8_t> b = base.bytes();
      b[i] ^= static_cast<uint8_t>(1u << bit);
      auto f = parse(b);
      ++total;
      if (!f.ok()) {
        ++rejected;
        EXPECT_EQ(f.status().message().find('\n'), std::string::npos);
      }
    }
  }
  EXPECT_GT(rejected, total / 10);  // the header and counts alone make many flips fatal
}

TEST(GgufCorrupt, WrongMagicAndVersions) {
  Image base = valid_image();
  std::vector<uint8_t> b = base.bytes();
  b[0] = 'X';
  expect_rejected(b, "magic", "not a GGUF file");
  expect_rejected({'G', 'G', 'U'}, "3 bytes", "too small");
  expect_rejected({}, "empty", "too small");
  for (uint32_t version : {0u, 1u, 4u, 0x03000000u}) {
    b = base.bytes();
    for (int i = 0; i < 4; ++i) b[4 + i] = static_cast<uint8_t>(version >> (8 * i));
    expect_rejected(b, "version " + std::to_string(version), "version");
  }
  b = base.bytes();
  b[4] = 2;  // v2 has the same layout as v3 and is accepted
  EXPECT_TRUE(parse(b).ok());
}

TEST(GgufCorrupt, TensorLayoutErrors) {
  struct Case {
    const char* why;
    std::vector<uint64_t> dims;
    uint32_t type;
    uint64_t offset;
    const char* expect;
  };
  const Case cases[] = {
      {"overlap", {16}, 0, 32, "overlap"},
      {"unaligned", {16}, 0, 68, "multiple of the alignment"},
      {"out of range", {16}, 0, 256, "outside"},
      {"ends past data", {64}, 0, 192, "outside"},
      {"unknown type", {16}, 39, 128, "unknown tensor type"},
      {"removed type 4", {32}, 4, 128, "unknown tensor type"},
      {"zero dim", {16, 0}, 0, 128, "must be positive"},
      {"negative dim", {16, ~0ull}, 0, 128, "must be positive"},
      {"overflow", {1ull << 32, 1ull << 32}, 0, 128, "overflow"},
      {"five dims", {1, 1, 1, 1, 16}, 0, 128, "dimensions"},
      {"zero dims", {}, 0, 128, "dimensions"},
      {"partial block", {48}, 8, 128, "block size"},
  };
  for (const Case& c : cases) {
    Image im;
    im.header(3, 2, 1);
    im.str("general.alignment");
    im.u32(4);
    im.u32(32);
    im.tensor_info("first", {16}, 0, 0);  // f32, 64 bytes at [0, 64)
    im.tensor_info("second", c.dims, c.type, c.offset);
    im.pad_to(32);
    std::vector<uint8_t> data(256, 0);
    im.raw(data.data(), data.size());
    expect_rejected(im.bytes(), c.why, c.expect);
  }
}

TEST(GgufCorrupt, MetadataErrors) {
  auto one_kv = [](const std::string& key, uint32_t type, auto&& write_value) {
    Image im;
    im.header(3, 0, 1);
    im.str(key);
    im.u32(type);
    write_value(im);
    return im.bytes();
  };
  expect_rejected(one_kv("k", 13, [](Image&) {}), "value type 13", "unknown metadata value type");
  expect_rejected(one_kv("general.alignment", 4, [](Image& im) { im.u32(48); }), "alignment 48",
                  "power of two");
  expect_rejected(one_kv("general.alignment", 4, [](Image& im) { im.u32(0); }), "alignment 0",
                  "power of two");
  expect_rejected(one_kv("general.alignment", 8, [](Image& im) { im.str("32"); }),
                  "string alignment", "expected an integer");
  // Arrays nested deeper than any real file, in few bytes: rejected, no stack overflow.
  expect_rejected(one_kv("deep", 9,
                         [](Image& im) {
                           for (int i = 0; i < 100000; ++i) {
                             im.u32(9);
                             im.u64(1);
                           }
                         }),
                  "deep nesting", "nested");
  // An array count that claims more elements than bytes remain.
  expect_rejected(one_kv("a", 9,
                         [](Image& im) {
                           im.u32(8);
                           im.u64(1ull << 30);
                         }),
                  "string array count", "cannot fit");
  // Duplicate keys and tensor names.
  Image im;
  im.header(3, 0, 2);
  for (int i = 0; i < 2; ++i) {
    im.str("dup");
    im.u32(4);
    im.u32(1);
  }
  expect_rejected(im.bytes(), "duplicate key", "duplicate metadata key 'dup'");
  Image it;
  it.header(3, 2, 0);
  it.tensor_info("t", {8}, 0, 0);
  it.tensor_info("t", {8}, 0, 32);
  it.pad_to(32);
  std::vector<uint8_t> data(64, 0);
  it.raw(data.data(), data.size());
  expect_rejected(it.bytes(), "duplicate tensor", "duplicate tensor name 't'");
  // Names from the file are escaped in messages, which stay on one line (found by the fuzzer).
  Image nl;
  nl.header(3, 0, 2);
  for (int i = 0; i < 2; ++i) {
    nl.str("bad\nkey\r");
    nl.u32(4);
    nl.u32(1);
  }
  expect_rejected(nl.bytes(), "newline in key", "bad\\x0akey\\x0d");
  Image nl_tensor;
  nl_tensor.header(3, 1, 0);
  nl_tensor.tensor_info(std::string(200, '\n'), {8}, 0, 0);  // no data section follows
  expect_rejected(nl_tensor.bytes(), "newline in tensor name", "...");
  // Counts that cannot fit in the file are rejected before anything is allocated.
  Image huge;
  huge.header(3, 1ull << 60, 0);
  expect_rejected(huge.bytes(), "huge tensor count", "tensor count");
  Image huge_kv;
  huge_kv.header(3, 0, ~0ull);
  expect_rejected(huge_kv.bytes(), "huge metadata count", "metadata count");
}

TEST(GgufCorrupt, OutOfRangeFloatsConvertWithoutUndefinedBehaviour) {
  // Found by the fuzzer under UBSan: a huge float read through as_uint()/ints().
  Image im;
  im.header(3, 0, 2);
  im.str("big");
  im.u32(6);
  im.u32(0xfeffffff);  // -1.7e38f
  im.str("arr");
  im.u32(9);
  im.u32(12);  // float64
  im.u64(3);
  for (uint64_t bits : {0x47efffffe0000000ull + (1ull << 52), 0x7ff8000000000000ull,
                        0xc3e0000000000001ull}) {  // 2e38 > FLT_MAX, NaN, < INT64_MIN
    im.u64(bits);
  }
  auto f = parse(im.bytes());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ((*f)->find("big")->as_uint(), 0u);
  EXPECT_EQ((*f)->find("big")->as_int(), INT64_MIN);
  const std::vector<int64_t> ints = (*f)->find("arr")->ints();
  EXPECT_EQ(ints, (std::vector<int64_t>{INT64_MAX, 0, INT64_MIN}));
  const std::vector<float> floats = (*f)->find("arr")->floats();
  EXPECT_TRUE(std::isinf(floats[0]));
  EXPECT_TRUE(std::isnan(floats[1]));
}

TEST(GgufCorrupt, VocabOnlyFileNeedsNoDataSection) {
  Image im;
  im.header(3, 0, 1);
  im.str("general.architecture");
  im.u32(8);
  im.str("chatglm");
  EXPECT_TRUE(parse(im.bytes()).ok());
}

}  // namespace
}  // namespace glm::gguf
