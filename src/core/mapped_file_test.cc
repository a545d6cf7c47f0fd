// MappedFile: the mapping of a whole file, and copy_out, which reads the bytes of the mapping
// from the file (and any others from memory).
#include "core/mapped_file.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/smaps_test_util.h"
#include "core/temp_dir.h"

namespace glm {
namespace {

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + seed + (i >> 9));
  return v;
}

std::string write_file(const TempDir& dir, const std::string& name,
                       const std::vector<uint8_t>& bytes) {
  const std::string path = dir.path() + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  if (f != nullptr) {
    EXPECT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    std::fclose(f);
  }
  return path;
}

TEST(MappedFile, MapsTheWholeFileAndSaysWhatItCannotOpen) {
  TempDir dir("/tmp/glm_mapped.");
  const std::vector<uint8_t> bytes = pattern(10000, 7);
  StatusOr<MappedFile> m = MappedFile::open(write_file(dir, "a.bin", bytes));
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->size(), bytes.size());
  EXPECT_EQ(std::vector<uint8_t>(m->data(), m->data() + m->size()), bytes);

  StatusOr<MappedFile> missing = MappedFile::open(dir.path() + "/none.bin");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  StatusOr<MappedFile> directory = MappedFile::open(dir.path());
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.status().code(), ErrorCode::kBadFile);
  EXPECT_NE(directory.status().message().find("not a regular file"), std::string::npos);
}

// Ranges at the start, in the middle (odd offsets and lengths), at the very end and empty: the
// file's bytes, whether read from it or copied from the mapping; and bytes of another mapping
// or of memory: copied as they are.
TEST(MappedFile, CopyOutGivesTheBytesOfAnyRange) {
  TempDir dir("/tmp/glm_mapped.");
  const std::vector<uint8_t> a_bytes = pattern(3 * 4096 + 123, 1), b_bytes = pattern(5000, 2);
  StatusOr<MappedFile> a = MappedFile::open(write_file(dir, "a.bin", a_bytes));
  StatusOr<MappedFile> b = MappedFile::open(write_file(dir, "b.bin", b_bytes));
  ASSERT_TRUE(a.ok() && b.ok());
  const size_t n = a_bytes.size();
  for (auto [at, len] : std::vector<std::pair<size_t, size_t>>{
           {0, n}, {0, 1}, {1, 4095}, {4095, 4098}, {777, 5555}, {n - 1, 1}, {n, 0}, {100, 0}}) {
    std::vector<uint8_t> out(len + 2, 0xEE);
    a->copy_out(a->data() + at, len, out.data() + 1);
    EXPECT_EQ(std::vector<uint8_t>(out.begin() + 1, out.end() - 1),
              std::vector<uint8_t>(a_bytes.begin() + at, a_bytes.begin() + at + len))
        << at << "+" << len;
    EXPECT_EQ(out.front(), 0xEE);
    EXPECT_EQ(out.back(), 0xEE);  // nothing past the range written
  }
  std::vector<uint8_t> out(b_bytes.size());
  a->copy_out(b->data(), out.size(), out.data());  // another file's mapping: a memcpy
  EXPECT_EQ(out, b_bytes);
  const std::vector<uint8_t> heap = pattern(300, 9);
  std::vector<uint8_t> out2(heap.size());
  a->copy_out(heap.data(), heap.size(), out2.data());
  EXPECT_EQ(out2, heap);
  const MappedFile none;  // no file: everything from memory
  none.copy_out(a->data() + 10, 20, out2.data());
  EXPECT_EQ(std::vector<uint8_t>(out2.begin(), out2.begin() + 20),
            std::vector<uint8_t>(a_bytes.begin() + 10, a_bytes.begin() + 30));
}

// copy_out reads the mapping's bytes from the file: none of its pages is mapped into the process
// (the page faults a load would take), where a memcpy from the mapping maps every one it reads.
TEST(MappedFile, CopyOutMapsNoPageOfTheFile) {
  TempDir dir("/tmp/glm_mapped.");
  const std::vector<uint8_t> bytes = pattern(size_t{4} << 20, 4);
  StatusOr<MappedFile> m = MappedFile::open(write_file(dir, "a.bin", bytes));
  ASSERT_TRUE(m.ok());
  std::vector<uint8_t> out(bytes.size());
  ASSERT_EQ(testing::mapping_resident_kb(m->data()), 0);
  m->copy_out(m->data(), out.size(), out.data());
  EXPECT_EQ(out, bytes);
  EXPECT_EQ(testing::mapping_resident_kb(m->data()), 0);
  std::memcpy(out.data(), m->data(), out.size());
  EXPECT_EQ(testing::mapping_resident_kb(m->data()), 4096);  // what copy_out spares
}

// A mapping moved to another object keeps reading from its file; the one moved from has none.
TEST(MappedFile, AMovedMappingKeepsItsFile) {
  TempDir dir("/tmp/glm_mapped.");
  const std::vector<uint8_t> bytes = pattern(9000, 3);
  StatusOr<MappedFile> m = MappedFile::open(write_file(dir, "a.bin", bytes));
  ASSERT_TRUE(m.ok());
  MappedFile moved = std::move(*m);
  MappedFile assigned;
  assigned = std::move(moved);
  EXPECT_EQ(moved.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state
  std::vector<uint8_t> out(4000);
  assigned.copy_out(assigned.data() + 5000, out.size(), out.data());
  EXPECT_EQ(out, std::vector<uint8_t>(bytes.begin() + 5000, bytes.end()));
  EXPECT_EQ(testing::mapping_resident_kb(assigned.data()), 0);  // read from the file
}

}  // namespace
}  // namespace glm
