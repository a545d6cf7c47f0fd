// Tests of src/checkpoint, kept in convert_test: the ASan step of scripts/test.sh builds
// convert_test and runs these (Unpickle*, TorchZip*) under AddressSanitizer.
#include "checkpoint/torch_zip.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "checkpoint/test_util.h"
#include "checkpoint/torch_test_writer.h"
#include "checkpoint/zip_archive.h"
#include "core/fp16.h"

namespace glm::checkpoint {
namespace {

using testing::TempDir;
using testing::torch_checkpoint_bytes;
using testing::TorchStorageOut;
using testing::TorchViewOut;
using testing::TorchZipOptions;

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<float> as_f32(const StTensor& t) {
  std::vector<float> v(t.n_bytes / 4);
  std::memcpy(v.data(), t.data, t.n_bytes);
  return v;
}

// The image must outlive the returned file (parse() maps, it does not copy).
StatusOr<std::unique_ptr<TorchZipFile>> parse(const std::string& image) {
  return TorchZipFile::parse(reinterpret_cast<const uint8_t*>(image.data()), image.size(),
                             "pytorch_model.bin");
}

// F16, BF16 and F32 tensors come back with their bytes, shapes and dtypes, read in place.
TEST(TorchZip, ReadsTensorsInPlace) {
  std::vector<uint8_t> h(2 * 6);
  std::vector<uint8_t> b(2 * 4);
  for (size_t i = 0; i < 6; ++i) {
    const uint16_t x = fp32_to_fp16(0.5f * static_cast<float>(i));
    std::memcpy(h.data() + 2 * i, &x, 2);
  }
  for (size_t i = 0; i < 4; ++i) {
    const uint16_t x = fp32_to_bf16(-1.0f * static_cast<float>(i));
    std::memcpy(b.data() + 2 * i, &x, 2);
  }
  const std::vector<TorchStorageOut> storages = {
      {"F16", h}, {"BF16", b}, {"F32", f32_bytes({1, 2, 3})}};
  const std::vector<TorchViewOut> views = {
      {"h", 0, 0, {2, 3}, {}}, {"b", 1, 0, {4}, {}}, {"f", 2, 0, {3}, {}}};
  for (const char* archive : {"archive", "pytorch_model"}) {
    TorchZipOptions o;
    o.archive = archive;
    const std::string image = torch_checkpoint_bytes(storages, views, o);
    StatusOr<std::unique_ptr<TorchZipFile>> f = parse(image);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    ASSERT_EQ((*f)->tensors().size(), 3u);
    const StTensor* th = (*f)->find("h");
    ASSERT_NE(th, nullptr);
    EXPECT_EQ(th->dtype, "F16");
    EXPECT_EQ(th->shape, (std::vector<int64_t>{2, 3}));
    ASSERT_EQ(th->n_bytes, h.size());
    EXPECT_EQ(std::memcmp(th->data, h.data(), h.size()), 0);
    // In place: inside the image, 64-byte aligned as PyTorchStreamWriter writes it.
    const auto* base = reinterpret_cast<const uint8_t*>(image.data());
    EXPECT_GE(th->data, base);
    EXPECT_LT(th->data, base + image.size());
    EXPECT_EQ((th->data - base) % 64, 0);
    EXPECT_EQ((*f)->find("b")->dtype, "BF16");
    EXPECT_EQ(std::memcmp((*f)->find("b")->data, b.data(), b.size()), 0);
    EXPECT_EQ(as_f32(*(*f)->find("f")), (std::vector<float>{1, 2, 3}));
    EXPECT_EQ((*f)->n_copied_bytes(), 0u);
  }
}

// Strided views are materialised row-major; views sharing a storage share its bytes.
TEST(TorchZip, StridedAndSharedStorages) {
  std::vector<float> s(12);
  for (int i = 0; i < 12; ++i) s[i] = static_cast<float>(i);
  const std::vector<TorchStorageOut> storages = {{"F32", f32_bytes(s)}};
  const std::vector<TorchViewOut> views = {
      {"transposed", 0, 0, {4, 3}, {1, 4}},  // the [3, 4] matrix, transposed
      {"tail", 0, 2, {2, 5}, {5, 1}},        // contiguous, offset 2
      {"whole", 0, 0, {3, 4}, {}},
      {"expanded", 0, 1, {2, 3}, {0, 2}},  // a stride-0 broadcast of elements 1, 3, 5
      {"column", 0, 3, {3}, {4}},
  };
  const std::string image = torch_checkpoint_bytes(storages, views, {});  // outlives f
  StatusOr<std::unique_ptr<TorchZipFile>> f = parse(image);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(as_f32(*(*f)->find("transposed")),
            (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(as_f32(*(*f)->find("tail")), (std::vector<float>{2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(as_f32(*(*f)->find("expanded")), (std::vector<float>{1, 3, 5, 1, 3, 5}));
  EXPECT_EQ(as_f32(*(*f)->find("column")), (std::vector<float>{3, 7, 11}));
  // A broadcast larger than its storage is refused rather than materialised.
  StatusOr<std::unique_ptr<TorchZipFile>> g =
      parse(torch_checkpoint_bytes(storages, {{"huge", 0, 0, {1 << 20, 1 << 20}, {0, 0}}}, {}));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("re-save with .contiguous()"), std::string::npos);
  // Shared and contiguous: both point into the same storage bytes.
  EXPECT_EQ((*f)->find("tail")->data, (*f)->find("whole")->data + 2 * 4);
  EXPECT_EQ((*f)->n_copied_bytes(), (12 + 6 + 3) * 4u);
}

// Other zip writers: deflated storages and ZIP64 records read the same; a CRC mismatch in a
// deflated storage is caught.
TEST(TorchZip, DeflateAndZip64) {
  std::vector<float> s(1000);
  for (int i = 0; i < 1000; ++i) s[i] = static_cast<float>(i % 7);
  const std::vector<TorchStorageOut> storages = {{"F32", f32_bytes(s)}};
  const std::vector<TorchViewOut> views = {{"w", 0, 0, {10, 100}, {}}};
  for (int mode = 0; mode < 3; ++mode) {
    SCOPED_TRACE(mode);
    TorchZipOptions o;
    o.deflate = mode != 1;
    o.zip64 = mode != 0;
    std::string image = torch_checkpoint_bytes(storages, views, o);
    StatusOr<std::unique_ptr<TorchZipFile>> f = parse(image);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    EXPECT_EQ(as_f32(*(*f)->find("w")), s);
    if (!o.deflate) continue;
    EXPECT_EQ((*f)->n_copied_bytes(), s.size() * 4);
    // Flip a bit in the middle of the deflated data: inflate or CRC check fails.
    auto zip = ZipArchive::parse(reinterpret_cast<const uint8_t*>(image.data()), image.size(), "x");
    ASSERT_TRUE(zip.ok());
    const ZipEntry* e = (*zip)->find("archive/data/0");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->method, 8u);
    image[e->data_offset + e->compressed_size / 2] ^= 0x10;
    f = parse(image);
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().code(), ErrorCode::kBadFile) << f.status().message();
  }
}

TEST(TorchZip, RefusesLegacyBigEndianAndRefusedPickles) {
  const std::vector<TorchStorageOut> storages = {{"F32", f32_bytes({1, 2})}};
  const std::vector<TorchViewOut> views = {{"w", 0, 0, {2}, {}}};
  TorchZipOptions o;
  o.byteorder_value = "big";
  StatusOr<std::unique_ptr<TorchZipFile>> f = parse(torch_checkpoint_bytes(storages, views, o));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(f.status().message().find("big-endian"), std::string::npos);

  // The tar layout of torch < 0.4: refused with what to do.
  std::string tar(1024, '\0');
  tar.replace(257, 5, "ustar");
  f = parse(tar);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(f.status().message().find("legacy torch format"), std::string::npos);
  EXPECT_NE(f.status().message().find("re-save with torch>=1.6"), std::string::npos);

  // A data.pkl that names os.system, inside a well-formed archive.
  testing::PickleWriter w;
  w.global("os", "system");
  w.str("id", false);
  w.op(0x85);
  w.op('R');
  w.op('.');
  f = parse(testing::torch_zip_bytes({{"data.pkl", w.bytes()}, {"version", "3\n"}}, {}, false));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(f.status().message().find("refusing global os.system"), std::string::npos)
      << f.status().message();
  EXPECT_NE(f.status().message().find("archive/data.pkl"), std::string::npos);
}

TEST(TorchZip, InconsistentArchivesAreClearErrors) {
  const std::vector<TorchStorageOut> storages = {{"F32", f32_bytes({1, 2, 3, 4})}};
  const std::string pkl = testing::torch_state_dict_pickle(storages, {{"w", 0, 0, {4}, {}}}, true);
  auto fails_with = [](const std::string& image, const std::string& what) {
    StatusOr<std::unique_ptr<TorchZipFile>> f = parse(image);
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().message().find('\n'), std::string::npos);
    EXPECT_NE(f.status().message().find(what), std::string::npos) << f.status().message();
  };
  fails_with(testing::torch_zip_bytes({{"data.pkl", pkl}}, {}, false),
             "storage record archive/data/0 is missing");
  fails_with(
      testing::torch_zip_bytes({{"data.pkl", pkl}, {"data/0", std::string(12, 'x')}}, {}, false),
      "holds 12 bytes");
  fails_with(testing::torch_zip_bytes({{"weights", pkl}}, {}, false), "no <archive>/data.pkl");
  fails_with("PK\x03\x04 not really a zip", "not a zip archive");
  fails_with("GGUF\x03", "not a PyTorch checkpoint");
}

// An archive from an independent writer: CPython 3.11's zipfile with force_zip64=True (ZIP64
// extra fields in every local header, no alignment), holding CPython's pickle of
// {"a": HalfStorage "0" [2, 3], "t": FloatStorage "1" viewed [4, 3] with strides (1, 4)} and the
// storages 0..5 (fp16) and 0..11 (fp32).
constexpr char kCPythonZip64Hex[] =
    "504b03042d000000000000002100a3f79a3cffffffffffffffff10001400617263686976652f646174612e70"
    "6b6c01001000f700000000000000f70000000000000080027d710028580100000061710163746f7263682e5f"
    "7574696c730a5f72656275696c645f74656e736f725f76320a71022828580700000073746f72616765710363"
    "746f7263680a48616c6653746f726167650a71045801000000307105580300000063707571064b0674710751"
    "4b004b024b038671084b034b018671098963636f6c6c656374696f6e730a4f726465726564446963740a710a"
    "2952710b74710c52710d580100000074710e68022828680363746f7263680a466c6f617453746f726167650a"
    "710f580100000031711068064b0c747111514b004b044b038671124b014b0486711389680a29527114747115"
    "527116752e504b03042d000000000000002100fa1bcda4ffffffffffffffff0e001400617263686976652f64"
    "6174612f30010010000c000000000000000c000000000000000000003c0040004200440045504b03042d0000"
    "00000000002100787d663effffffffffffffff0e001400617263686976652f646174612f3101001000300000"
    "00000000003000000000000000000000000000803f0000004000004040000080400000a0400000c0400000e0"
    "4000000041000010410000204100003041504b03042d000000000000002100d19e6755ffffffffffffffff0f"
    "001400617263686976652f76657273696f6e0100100002000000000000000200000000000000330a504b0102"
    "2d032d000000000000002100a3f79a3cf7000000f70000001000000000000000000000008001000000006172"
    "63686976652f646174612e706b6c504b01022d032d000000000000002100fa1bcda40c0000000c0000000e00"
    "00000000000000000000800139010000617263686976652f646174612f30504b01022d032d00000000000000"
    "2100787d663e30000000300000000e0000000000000000000000800185010000617263686976652f64617461"
    "2f31504b01022d032d000000000000002100d19e675502000000020000000f00000000000000000000008001"
    "f5010000617263686976652f76657273696f6e504b05060000000004000400f3000000380200000000";

TEST(TorchZip, ReadsCPythonZipfileArchives) {
  std::string image;
  for (size_t i = 0; kCPythonZip64Hex[i] != '\0'; i += 2) {
    image.push_back(
        static_cast<char>(std::stoi(std::string(kCPythonZip64Hex + i, 2), nullptr, 16)));
  }
  StatusOr<std::unique_ptr<TorchZipFile>> f = parse(image);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const StTensor* a = (*f)->find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, "F16");
  for (int i = 0; i < 6; ++i) {
    uint16_t h;
    std::memcpy(&h, a->data + 2 * i, 2);
    EXPECT_EQ(fp16_to_fp32(h), static_cast<float>(i));
  }
  EXPECT_EQ(as_f32(*(*f)->find("t")), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
}

// torch 0.4 - 1.5's legacy format, as CPython 3.11's pickle writes it through
// torch/serialization.py `_legacy_save` (stand-in torch classes): magic number, protocol
// version 1001, sys_info, an OrderedDict state dict with six-field persistent ids
// {"a": HalfStorage [2, 3], "t": FloatStorage [4, 3] strides (1, 4), "b": the half storage at
// offset 4, [2]}, the sorted storage keys, then each storage as int64 numel + bytes (0..5 fp16,
// 0..11 fp32).
constexpr char kCPythonLegacyHex[] =
    "80028a0a6cfc9c46f9206aa850192e80024de9032e80027d710028581000000070726f746f636f6c5f766572"
    "73696f6e71014de903580d0000006c6974746c655f656e6469616e710288580a000000747970655f73697a65"
    "7371037d710428580500000073686f727471054b025803000000696e7471064b0458040000006c6f6e677107"
    "4b0475752e800263636f6c6c656374696f6e730a4f726465726564446963740a710029527101285801000000"
    "61710263746f7263682e5f7574696c730a5f72656275696c645f74656e736f725f76320a7103282858070000"
    "0073746f72616765710463746f7263680a48616c6653746f726167650a7105580e0000003934303030303030"
    "3030303031367106580300000063707571074b064e747108514b004b024b038671094b034b0186710a896800"
    "2952710b74710c52710d580100000074710e68032828680463746f7263680a466c6f617453746f726167650a"
    "710f580e0000003934303030303030303030303038711068074b0c4e747111514b004b044b038671124b014b"
    "048671138968002952711474711552711658010000006271176803282868046805580e000000393430303030"
    "3030303030303136711868074b064e747119514b044b0285711a4b0185711b8968002952711c74711d52711e"
    "757d711f58090000005f6d657461646174617120680029527121580000000071227d71235807000000766572"
    "73696f6e71244b01737373622e80025d710028580e00000039343030303030303030303030387101580e0000"
    "0039343030303030303030303031367102652e0c00000000000000000000000000803f000000400000404000"
    "0080400000a0400000c0400000e0400000004100001041000020410000304106000000000000000000003c00"
    "40004200440045";

TEST(TorchZip, ReadsTheLegacyFormat) {
  std::string image;
  for (size_t i = 0; kCPythonLegacyHex[i] != '\0'; i += 2) {
    image.push_back(
        static_cast<char>(std::stoi(std::string(kCPythonLegacyHex + i, 2), nullptr, 16)));
  }
  ASSERT_TRUE(is_legacy_torch_file(reinterpret_cast<const uint8_t*>(image.data()), image.size()));
  StatusOr<std::unique_ptr<TorchZipFile>> f = parse(image);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  ASSERT_EQ((*f)->tensors().size(), 3u);
  auto halves = [](const StTensor& t) {
    std::vector<float> v(t.n_bytes / 2);
    for (size_t i = 0; i < v.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      v[i] = fp16_to_fp32(h);
    }
    return v;
  };
  EXPECT_EQ(halves(*(*f)->find("a")), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(halves(*(*f)->find("b")), (std::vector<float>{4, 5}));
  EXPECT_EQ(as_f32(*(*f)->find("t")), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ((*f)->find("b")->data, (*f)->find("a")->data + 8);  // shared, in place

  // Every prefix is an error; a big-endian sys_info is refused.
  for (size_t n = 0; n < image.size(); ++n) ASSERT_FALSE(parse(image.substr(0, n)).ok()) << n;
  const size_t le = image.find("little_endian");
  ASSERT_NE(le, std::string::npos);
  std::string big = image;
  ASSERT_EQ(static_cast<uint8_t>(big[le + 15]), 0x88);  // NEWTRUE after "little_endian" q\x02
  big[le + 15] = static_cast<char>(0x89);
  f = parse(big);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("big-endian"), std::string::npos) << f.status().message();
}

// Every prefix of a checkpoint is an error, never a crash (a truncated download).
TEST(TorchZip, TruncatedFilesAreErrors) {
  const std::vector<TorchStorageOut> storages = {{"F16", std::vector<uint8_t>(2 * 40, 1)}};
  for (bool deflate : {false, true}) {
    TorchZipOptions o;
    o.deflate = deflate;
    const std::string image = torch_checkpoint_bytes(storages, {{"w", 0, 0, {5, 8}, {}}}, o);
    ASSERT_TRUE(parse(image).ok());
    for (size_t n = 0; n < image.size(); ++n) {
      StatusOr<std::unique_ptr<TorchZipFile>> f = parse(image.substr(0, n));
      ASSERT_FALSE(f.ok()) << n;
    }
  }
}

TEST(TorchZip, OpensFilesFromDisk) {
  TempDir dir;
  const std::vector<StTensorOut> ts = {{"x", "F32", {2, 2}, f32_bytes({1, 2, 3, 4})}};
  ASSERT_TRUE(testing::write_torch_checkpoint(dir.file("pytorch_model.bin"), ts));
  StatusOr<std::unique_ptr<TorchZipFile>> f = TorchZipFile::open(dir.file("pytorch_model.bin"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(as_f32(*(*f)->find("x")), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(TorchZipFile::open(dir.file("absent.bin")).status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace glm::checkpoint
