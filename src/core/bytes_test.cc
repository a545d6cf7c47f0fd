#include "core/bytes.h"

#include <gtest/gtest.h>

namespace glm {
namespace {

// An F32 GLM-4-9B head (151552 x 4096 x 4 bytes) against a 2 GiB driver's largest buffer: MiB
// to a tenth tells them apart where GiB to a hundredth nearly does not; a cap of 3.5 MiB is
// not "3" or "4".
TEST(Bytes, SizesReadAsTheyAre) {
  EXPECT_EQ(format_mib(uint64_t{151552} * 4096 * 4), "2368.0 MiB");
  EXPECT_EQ(format_mib(uint64_t{2} << 30), "2048.0 MiB");
  EXPECT_EQ(format_mib(uint64_t{7} << 19), "3.5 MiB");
  EXPECT_EQ(format_mib(0), "0.0 MiB");
  EXPECT_EQ(format_gib(uint64_t{151552} * 4096 * 4), "2.31 GiB");
  EXPECT_EQ(format_gib(uint64_t{1} << 29), "0.50 GiB");
  EXPECT_EQ(format_gib(uint64_t{80} << 30), "80.00 GiB");
}

}  // namespace
}  // namespace glm
