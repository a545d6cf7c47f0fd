// The embedded SPIR-V as a driver gets it, read without a device: what every variant's code
// keeps in a thread's registers.
#include "gpu/shaders.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace glm::gpu {
namespace {

// From the SPIR-V specification: the magic number (2.3), the opcodes read here (3.52) and the
// Function storage class (3.7: a thread's own variables).
constexpr uint32_t kMagic = 0x07230203;
constexpr uint32_t kOpTypeArray = 28;
constexpr uint32_t kOpTypePointer = 32;
constexpr uint32_t kOpConstant = 43;
constexpr uint32_t kOpVariable = 59;
constexpr uint32_t kOpAccessChain = 65;
constexpr uint32_t kOpInBoundsAccessChain = 66;
constexpr uint32_t kStorageFunction = 7;
constexpr size_t kHeaderWords = 5;

// The accesses of a thread's arrays (Function variables of array type, and pointers into them)
// whose index is not a constant, as "%result": a compiler keeps such an array in memory (on
// NVIDIA's GPUs "local memory", as slow as device memory past the cache) instead of registers.
// Each index of a loop that [[unroll]] unrolled is a constant; one left rolled is not.
std::vector<std::string> runtime_indexed_arrays(const Spirv& s, std::string* error) {
  std::vector<std::string> found;
  if (s.n_words < kHeaderWords || s.words[0] != kMagic) {
    *error = "not SPIR-V";
    return found;
  }
  std::set<uint32_t> array_types, constants, array_pointer_types, private_arrays;
  for (size_t i = kHeaderWords; i < s.n_words;) {
    uint32_t count = s.words[i] >> 16, op = s.words[i] & 0xFFFFu;
    if (count == 0 || i + count > s.n_words) {
      *error = "an instruction past the end at word " + std::to_string(i);
      return found;
    }
    const uint32_t* w = s.words + i;
    if (op == kOpTypeArray) {
      array_types.insert(w[1]);
    } else if (op == kOpConstant) {
      constants.insert(w[2]);
    } else if (op == kOpTypePointer && w[2] == kStorageFunction && array_types.count(w[3])) {
      array_pointer_types.insert(w[1]);
    } else if (op == kOpVariable && w[3] == kStorageFunction && array_pointer_types.count(w[1])) {
      private_arrays.insert(w[2]);
    } else if ((op == kOpAccessChain || op == kOpInBoundsAccessChain) &&
               private_arrays.count(w[3])) {
      private_arrays.insert(w[2]);  // a pointer into the array: its own accesses count too
      for (uint32_t k = 4; k < count; ++k) {
        if (!constants.count(w[k])) {
          found.push_back("%" + std::to_string(w[2]));
          break;
        }
      }
    }
    i += count;
  }
  return found;
}

// Every shader's arrays stay in registers: each loop that indexes them unrolls (src/gpu/shaders:
// [[unroll]] on loops of a constant count, no break or continue in them, no loop over runtime
// counts inside them; and src/gpu/CMakeLists.txt's second optimizer pass). A thread's sums
// across the rows of its team, the parts it decodes, the rows of an attention workgroup: in
// memory each of their reads would wait on the memory.
TEST(GpuShaders, NoPrivateArrayIsIndexedAtRunTime) {
  for (int i = 0; i < kShaderCount; ++i) {
    const Spirv& s = spirv(static_cast<Shader>(i));
    std::string error;
    std::vector<std::string> found = runtime_indexed_arrays(s, &error);
    EXPECT_TRUE(error.empty()) << s.name << ": " << error;
    if (!found.empty()) {
      ADD_FAILURE() << s.name << ": " << found.size()
                    << " accesses to a thread's arrays at a run-time index, the first "
                    << found.front() << " (spirv-dis shows it)";
    }
  }
}

// The rolled build (what GPU-assisted validation runs: shaders.h) is every shader again with
// its loops as written: the decode matmul, the tiled one and attention index their arrays at
// run time there, as all shaders did before their loops were unrolled.
TEST(GpuShaders, TheRolledBuildKeepsItsLoops) {
  for (int i = 0; i < kShaderCount; ++i) {
    const Spirv& u = spirv(static_cast<Shader>(i));
    const Spirv& r = spirv(static_cast<Shader>(i), ShaderBuild::kRolled);
    EXPECT_STREQ(u.name, r.name);
    std::string error;
    runtime_indexed_arrays(r, &error);
    EXPECT_TRUE(error.empty()) << r.name << " (rolled): " << error;
  }
  for (Shader sh : {Shader::kMatvecQ4_0, Shader::kMatmulTiledQ4_K, Shader::kAttentionRowsF16}) {
    std::string error;
    EXPECT_FALSE(runtime_indexed_arrays(spirv(sh, ShaderBuild::kRolled), &error).empty())
        << spirv(sh).name;
  }
}

// The check sees what it must: a loop over a thread's array that stays rolled.
TEST(GpuShaders, TheArrayCheckFindsARuntimeIndex) {
  // Assembled by hand: the types, a thread's array of 4 floats, one access to it at a
  // constant index and one at an index that is not a constant (a rolled loop's counter).
  const uint32_t words[] = {
      kMagic, 0x00010500, 0, 20, 0,
      // %1 = OpTypeInt 32 0; %2 = OpConstant %1 4; %3 = OpTypeFloat 32;
      (4u << 16) | 21, 1, 32, 0, (4u << 16) | kOpConstant, 1, 2, 4, (3u << 16) | 22, 3, 32,
      // %4 = OpTypeArray %3 %2; %5 = OpTypePointer Function %4; %6 = OpTypePointer Function %3;
      (4u << 16) | kOpTypeArray, 4, 3, 2, (4u << 16) | kOpTypePointer, 5, kStorageFunction, 4,
      (4u << 16) | kOpTypePointer, 6, kStorageFunction, 3,
      // %7 = OpVariable %5 Function; %8 = OpAccessChain %6 %7 %2 (constant);
      (4u << 16) | kOpVariable, 5, 7, kStorageFunction, (5u << 16) | kOpAccessChain, 6, 8, 7, 2,
      // %9 = OpAccessChain %6 %7 %10 (%10: not a constant)
      (5u << 16) | kOpAccessChain, 6, 9, 7, 10};
  Spirv s{words, sizeof(words) / 4, "hand-made"};
  std::string error;
  std::vector<std::string> found = runtime_indexed_arrays(s, &error);
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_EQ(found, std::vector<std::string>{"%9"});
}

}  // namespace
}  // namespace glm::gpu
