#include "model/gpu_plan.h"

#include <gtest/gtest.h>

namespace glm::model {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Four layers of 10 MiB weights and 2 MiB K/V, a head of 8 MiB, 4 MiB of scratch: one layer
// costs 12 MiB, and with the margin (a tenth of the budget) everything needs 8 + 4 + 48 = 60 MiB.
struct Shape {
  std::vector<size_t> weights = std::vector<size_t>(4, 10 * kMiB);
  std::vector<size_t> kv = std::vector<size_t>(4, 2 * kMiB);
  size_t head = 8 * kMiB;
  size_t scratch = 4 * kMiB;
};

StatusOr<GpuLayerPlan> plan(size_t budget_mib, int requested) {
  Shape s;
  return plan_gpu_layers(s.weights, s.kv, s.head, s.scratch, budget_mib * kMiB, requested, "gpu0");
}

TEST(GpuLayerPlan, AutomaticTakesEveryLayerWhenAllFit) {
  auto p = plan(100, -1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->n_gpu, 4);
  EXPECT_EQ(p->weights, 48 * kMiB);
  EXPECT_EQ(p->kv, 8 * kMiB);
  EXPECT_EQ(p->scratch, 4 * kMiB + 10 * kMiB);  // the margin: a tenth of 100 MiB
  EXPECT_EQ(p->need(), 70 * kMiB);
}

TEST(GpuLayerPlan, AutomaticTakesAsManyAsFitBesideTheirKv) {
  // 50 MiB: margin 5, head 8, scratch 4 leave 33 MiB: two layers of 12 (not three: 36).
  auto p = plan(50, -1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->n_gpu, 2);
  EXPECT_LE(p->need(), 50 * kMiB);
  // Without their K/V, three layers' weights (30 MiB) would have fit: the KV is counted.
  Shape s;
  auto no_kv = plan_gpu_layers(s.weights, std::vector<size_t>(4, 0), s.head, s.scratch, 50 * kMiB,
                               -1, "gpu0");
  ASSERT_TRUE(no_kv.ok());
  EXPECT_EQ(no_kv->n_gpu, 3);
}

TEST(GpuLayerPlan, AutomaticGivesNoLayerWhenNotEvenTheHeadFits) {
  auto p = plan(10, -1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->n_gpu, 0);
}

TEST(GpuLayerPlan, AskedLayersThatDoNotFitAreRefusedWithBothSizesAndWhatFits) {
  auto p = plan(50, 3);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::kOutOfMemory);
  const std::string& m = p.status().message();
  EXPECT_NE(m.find("--gpu-layers 3: 3 of 4 layers"), std::string::npos) << m;
  EXPECT_NE(m.find("gpu0 has 0.05 GiB"), std::string::npos) << m;
  EXPECT_NE(m.find("2 fit"), std::string::npos) << m;
  auto tiny = plan(10, 1);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.status().message().find("not even the output head fits"), std::string::npos)
      << tiny.status().message();
}

TEST(GpuLayerPlan, AskedLayersThatFitAreTakenAndCappedAtTheLayerCount) {
  auto p = plan(50, 2);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->n_gpu, 2);
  auto all = plan(100, 99);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->n_gpu, 4);
}

TEST(GpuLayerPlan, AnUnknownBudgetFitsEverything) {
  auto p = plan(0, -1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->n_gpu, 4);
  EXPECT_EQ(p->scratch, 4 * kMiB);
}

TEST(GpuLayerPlan, TheMarginIsATenthOfTheBudgetUpTo512MiB) {
  EXPECT_EQ(gpu_margin_bytes(100 * kMiB), 10 * kMiB);
  EXPECT_EQ(gpu_margin_bytes(size_t{80} << 30), 512 * kMiB);
  EXPECT_EQ(gpu_margin_bytes(0), 0u);
}

TEST(GpuLayerPlan, DescribeSaysTheParts) {
  auto p = plan(100, -1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->describe(),
            "4 of 4 layers: weights 0.05 GiB + KV cache 0.01 GiB + scratch 0.01 GiB = 0.07 GiB");
}

}  // namespace
}  // namespace glm::model
