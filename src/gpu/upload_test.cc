// Device::upload: host bytes through two staging buffers in turn (upload.cc), here a few bytes
// each, so that a small upload takes many turns; ranges of a mapped file among them.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/mapped_file.h"
#include "core/temp_dir.h"
#include "gpu/device.h"

namespace glm::gpu {
namespace {

std::vector<uint8_t> upload_pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7 + seed + (i >> 8));
  return v;
}

std::vector<uint8_t> device_bytes(Device* dev, const Buffer& b) {
  std::vector<uint8_t> out(b.size());
  EXPECT_TRUE(dev->download(b, 0, out.size(), out.data()).ok());
  return out;
}

// Parts of memory and of a mapped file, of odd lengths, across the staging buffers' edges (48
// bytes each), written one after the other from an odd offset; the bytes around them kept.
// Then a whole-buffer upload at the default size, after the resize.
TEST(GpuUpload, PartsLandInOrderWhateverTheTurns) {
  // A device of its own: its staging buffers resized (and, below, lost).
  StatusOr<std::unique_ptr<Device>> opened = Device::open(-1);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  Device* dev = opened->get();
  TempDir dir("/tmp/glm_upload.");
  const std::vector<uint8_t> file_bytes = upload_pattern(5000, 3);
  const std::string path = dir.path() + "/w.bin";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(file_bytes.data(), 1, file_bytes.size(), f), file_bytes.size());
  std::fclose(f);
  StatusOr<MappedFile> map = MappedFile::open(path);
  ASSERT_TRUE(map.ok());

  const size_t size = 8192, offset = 13;
  StatusOr<Buffer> dst = dev->alloc(size, MemoryKind::kDevice);
  ASSERT_TRUE(dst.ok());
  const std::vector<uint8_t> before = upload_pattern(size, 200);
  ASSERT_TRUE(dev->upload(before.data(), before.size(), *dst, 0).ok());

  dev->set_upload_chunk(48);
  const std::vector<uint8_t> a = upload_pattern(1, 10), b = upload_pattern(47, 20),
                             c = upload_pattern(100, 30), d = upload_pattern(1001, 40);
  const std::vector<Device::HostBytes> parts = {
      {a.data(), a.size()},
      {map->data() + 5, 95, &*map},  // a file's range, read from the file
      {b.data(), b.size()},
      {c.data(), c.size()},
      {map->data() + 1234, 2000, &*map},
      {d.data(), d.size()},
      {a.data(), 0},
  };
  ASSERT_TRUE(dev->upload(parts, *dst, offset).ok());
  std::vector<uint8_t> want = before;
  size_t at = offset;
  for (const Device::HostBytes& p : parts) {
    const auto* src = static_cast<const uint8_t*>(p.data);
    std::copy(src, src + p.bytes, want.begin() + static_cast<std::ptrdiff_t>(at));
    at += p.bytes;
  }
  EXPECT_EQ(device_bytes(dev, *dst), want);

  // Uploads one after another reuse the staging buffers; the last turn of one is waited for.
  for (int i = 0; i < 3; ++i) {
    const std::vector<uint8_t> again = upload_pattern(size, static_cast<uint8_t>(50 + i));
    ASSERT_TRUE(dev->upload(again.data(), again.size(), *dst, 0).ok());
    EXPECT_EQ(device_bytes(dev, *dst), again) << i;
  }
  dev->set_upload_chunk(Device::kUploadChunk);
  const std::vector<uint8_t> whole = upload_pattern(size, 99);
  ASSERT_TRUE(dev->upload(whole.data(), whole.size(), *dst, 0).ok());
  EXPECT_EQ(device_bytes(dev, *dst), whole);
}

// A turn that fails to go to the queue fails the upload with the device's error once the turn
// before it has finished (no hang), and the device is lost: the next upload fails at once.
TEST(GpuUpload, AFailedTurnFailsTheUploadAndLosesTheDevice) {
  // A device of its own: its staging buffers resized (and, below, lost).
  StatusOr<std::unique_ptr<Device>> opened = Device::open(-1);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  Device* dev = opened->get();
  StatusOr<Buffer> dst = dev->alloc(1024, MemoryKind::kDevice);
  ASSERT_TRUE(dst.ok());
  dev->set_upload_chunk(64);
  dev->inject_failure_after(3);  // the third of 16 turns
  const std::vector<uint8_t> bytes = upload_pattern(1024, 5);
  Status st = dev->upload(bytes.data(), bytes.size(), *dst, 0);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ErrorCode::kUnavailable);
  EXPECT_NE(st.message().find("VK_ERROR_DEVICE_LOST"), std::string::npos) << st.message();
  EXPECT_TRUE(dev->lost());
  st = dev->upload(bytes.data(), 16, *dst, 0);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("was lost"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace glm::gpu
