#include "model/gpu_plan.h"

#include <gtest/gtest.h>

namespace glm::model {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Four layers of 10 MiB weights (their largest matrix 4 MiB) and 2 MiB K/V, a head of 8 MiB
// (one matrix), 4 MiB of scratch: one layer costs 12 MiB, and with the margin (a tenth of the
// budget) everything needs 8 + 4 + 48 = 60 MiB. No limit on a buffer unless a test sets one.
GpuPlanInput shape(size_t budget_mib) {
  GpuPlanInput in;
  in.layer_weights.assign(4, 10 * kMiB);
  in.layer_kv.assign(4, 2 * kMiB);
  in.layer_largest.assign(4, 4 * kMiB);
  in.head = 8 * kMiB;
  in.head_largest = 8 * kMiB;
  in.scratch = 4 * kMiB;
  in.budget = budget_mib * kMiB;
  return in;
}

StatusOr<GpuLayerPlan> plan(size_t budget_mib, int requested) {
  return plan_gpu_layers(shape(budget_mib), requested, "gpu0");
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
  GpuPlanInput no_kv_in = shape(50);
  no_kv_in.layer_kv.assign(4, 0);
  auto no_kv = plan_gpu_layers(no_kv_in, -1, "gpu0");
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

TEST(GpuLayerPlan, ALayerWithAMatrixLargerThanABufferStaysOnTheCpuWithTheLayersBefore) {
  // Layer 1's largest matrix is over the 6 MiB buffer: layers are taken from the last, so only
  // layers 2 and 3 can go, though the budget takes all four.
  GpuPlanInput in = shape(100);
  in.layer_largest[1] = 7 * kMiB;
  in.max_buffer = 6 * kMiB;
  in.head_largest = 6 * kMiB;  // a buffer's size fits: the limit is the largest allowed
  auto p = plan_gpu_layers(in, -1, "gpu0");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->n_gpu, 2);
  EXPECT_EQ(p->too_large, "layer 1's largest matrix (7.0 MiB)");
  EXPECT_EQ(p->why_too_large("gpu0"),
            "layer 1's largest matrix (7.0 MiB) is larger than a buffer can be on gpu0 "
            "(6.0 MiB)");
  // No limit: all four.
  in.max_buffer = SIZE_MAX;
  auto free = plan_gpu_layers(in, -1, "gpu0");
  ASSERT_TRUE(free.ok());
  EXPECT_EQ(free->n_gpu, 4);
  EXPECT_EQ(free->too_large, "");
}

TEST(GpuLayerPlan, WhenTheBudgetStopsFirstNoMatrixIsBlamed) {
  // 50 MiB take the last two layers; layer 1's matrix over the buffer would not have changed it.
  GpuPlanInput in = shape(50);
  in.layer_largest[1] = 7 * kMiB;
  in.max_buffer = in.head_largest = 6 * kMiB;
  auto p = plan_gpu_layers(in, -1, "gpu0");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->n_gpu, 2);
  EXPECT_EQ(p->too_large, "");
  // Layer 2's instead: one layer, and the matrix said.
  in.layer_largest[1] = 4 * kMiB;
  in.layer_largest[2] = 7 * kMiB;
  auto q = plan_gpu_layers(in, -1, "gpu0");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->n_gpu, 1);
  EXPECT_EQ(q->too_large, "layer 2's largest matrix (7.0 MiB)");
}

TEST(GpuLayerPlan, AHeadLargerThanABufferKeepsEveryLayerOffWhateverTheBudget) {
  GpuPlanInput in = shape(100);
  in.max_buffer = 7 * kMiB;  // the head's 8 MiB matrix is over it
  auto p = plan_gpu_layers(in, -1, "gpu0");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->n_gpu, 0);
  EXPECT_EQ(p->too_large, "the output head (8.0 MiB)");
  in.budget = 10 * kMiB;  // the budget fails too: the head is still said
  auto small = plan_gpu_layers(in, -1, "gpu0");
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->n_gpu, 0);
  EXPECT_EQ(small->too_large, "the output head (8.0 MiB)");
}

TEST(GpuLayerPlan, AskedLayersWithAMatrixTooLargeAreRefusedNamingItAndTheBuffer) {
  GpuPlanInput in = shape(100);
  in.layer_largest[1] = 7 * kMiB;
  in.max_buffer = in.head_largest = 6 * kMiB;
  auto p = plan_gpu_layers(in, 4, "gpu0");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::kUnsupported);
  EXPECT_EQ(p.status().message(),
            "--gpu-layers 4: layer 1's largest matrix (7.0 MiB) is larger than a buffer can be "
            "on gpu0 (6.0 MiB) (2 fit; lower --gpu-layers, or leave it out to put as many as "
            "fit)");
  auto two = plan_gpu_layers(in, 2, "gpu0");  // layers 2 and 3: fine
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->n_gpu, 2);
  EXPECT_EQ(two->too_large, "");
}

TEST(GpuLayerPlan, DescribeSaysTheParts) {
  auto p = plan(100, -1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->describe(),
            "4 of 4 layers: weights 0.05 GiB + KV cache 0.01 GiB + scratch 0.01 GiB = 0.07 GiB");
}

}  // namespace
}  // namespace glm::model
