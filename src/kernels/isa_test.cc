#include "kernels/isa.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/scoped_env_test_util.h"
#include "kernels/matmul.h"
#include "kernels/test_util.h"

namespace glm::kernels {
namespace {

// Sets GLMSERVE_ISA for its lifetime (restores the old value and the active ISA after).
class ScopedIsaEnv {
 public:
  explicit ScopedIsaEnv(const char* value) : isa_(active_isa()), env_("GLMSERVE_ISA", value) {}
  ~ScopedIsaEnv() { EXPECT_TRUE(set_isa(isa_).ok()); }

 private:
  Isa isa_;
  glm::testing::ScopedEnv env_;
};

TEST(IsaTest, OneNamePerIsaAndItParsesBack) {
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    const StatusOr<Isa> p = parse_isa(isa_name(i));
    ASSERT_TRUE(p.ok()) << isa_name(i);
    EXPECT_EQ(p.value(), i);
  }
  for (const char* bad : {"", "AVX2", "avx512vnni", "avx", "sse4", "avx2 "}) {
    const StatusOr<Isa> p = parse_isa(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find("scalar, avx2 or avx512"), std::string::npos);
  }
}

TEST(IsaTest, SetIsaSelectsWhatTheCpuHasAndRefusesTheRest) {
  const Isa before = active_isa();
  for (Isa i : testing::runnable_isas()) {
    ASSERT_TRUE(set_isa(i).ok());
    EXPECT_EQ(active_isa(), i);
    EXPECT_STREQ(matmul_isa(), i == Isa::kAvx2 && avxvnni_active() ? "avx2+avxvnni" : isa_name(i));
  }
  if (cpu_isa() != Isa::kAvx512) {
    const Status s = set_isa(Isa::kAvx512);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("no avx512"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(cpu_isa_description()), std::string::npos) << s.message();
    EXPECT_EQ(active_isa(), testing::runnable_isas().back());  // a refused ISA changes nothing
  }
  ASSERT_TRUE(set_isa(before).ok());
}

TEST(IsaTest, EnvironmentIsValidated) {
  {
    ScopedIsaEnv env("scalar");
    ASSERT_TRUE(init_isa_from_env().ok());
    EXPECT_EQ(active_isa(), Isa::kScalar);
  }
  {
    ScopedIsaEnv env(isa_name(cpu_isa()));
    ASSERT_TRUE(init_isa_from_env().ok());
    EXPECT_EQ(active_isa(), cpu_isa());
  }
  {
    ScopedIsaEnv env("");
    ASSERT_TRUE(init_isa_from_env().ok());
    EXPECT_EQ(active_isa(), cpu_isa());
  }
  {
    ScopedIsaEnv env("avx-2");
    const Isa kept = active_isa();
    const Status s = init_isa_from_env();
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("GLMSERVE_ISA"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("avx-2"), std::string::npos) << s.message();
    EXPECT_EQ(active_isa(), kept);  // a refused value changes nothing
  }
  if (cpu_isa() != Isa::kAvx512) {
    ScopedIsaEnv env("avx512");
    const Status s = init_isa_from_env();
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("it has: " + cpu_isa_description()), std::string::npos)
        << s.message();
  }
}

TEST(IsaTest, DescriptionListsTheBestFirst) {
  const std::string d = cpu_isa_description();
  EXPECT_EQ(d.find(isa_name(cpu_isa())), 0u) << d;
  EXPECT_NE(d.find("scalar"), std::string::npos) << d;
}

}  // namespace
}  // namespace glm::kernels
