// Helpers shared by the convert module's tests: those of checkpoint/test_util.h.
#pragma once

#include "checkpoint/test_util.h"

namespace glm::convert::testing {

using checkpoint::testing::first_difference;
using checkpoint::testing::read_bytes;
using checkpoint::testing::shared_data;
using checkpoint::testing::TempDir;

}  // namespace glm::convert::testing
