// The memory planner (pure CPU) and the allocation guard, without a GPU.
#include <gtest/gtest.h>

#include "test_util.h"

#include <algorithm>
#include <functional>
#include <thread>
#include <string>

#include "core/error.h"
#include "cuda/arena.h"

namespace sg::cuda {
namespace {

using test::thrown_message;

MemoryPlan sample_plan() {
  MemoryPlan plan;
  plan.add("grad.a", MemoryCategory::gradients, 1000);
  plan.add("param.a", MemoryCategory::parameters, 3, 1);
  plan.add("act.x", MemoryCategory::activations, 4096 + 17, 512);
  plan.add("param.b", MemoryCategory::parameters, 250, 64);
  plan.add("input.tokens", MemoryCategory::inputs, 0);
  plan.add("ws.gemm", MemoryCategory::workspaces, 32 << 20, 4096);
  plan.add("adam.m", MemoryCategory::optimizer_state, 999);
  plan.add("master.a", MemoryCategory::main_weights, 12);
  plan.add("grad.b", MemoryCategory::gradients, 1);
  return plan;
}

TEST(ArenaPlan, OffsetsHonourAlignment) {
  const MemoryPlan plan = sample_plan();
  const MemoryLayout layout = plan.layout();
  ASSERT_EQ(layout.allocations.size(), plan.size());
  for (const auto& a : layout.allocations) {
    EXPECT_EQ(a.offset % a.alignment, 0u) << a.name;
  }
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    EXPECT_EQ(layout.categories[c].begin % kArenaAlignment, 0u) << c;
  }
  EXPECT_EQ(layout.total_bytes % kArenaAlignment, 0u);
}

TEST(ArenaPlan, NoOverlapAndInsideTotal) {
  const MemoryLayout layout = sample_plan().layout();
  auto allocs = layout.allocations;
  std::sort(allocs.begin(), allocs.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  for (size_t i = 0; i + 1 < allocs.size(); ++i) {
    EXPECT_LE(allocs[i].offset + allocs[i].bytes, allocs[i + 1].offset)
        << allocs[i].name << " overlaps " << allocs[i + 1].name;
  }
  for (const auto& a : allocs) EXPECT_LE(a.offset + a.bytes, layout.total_bytes) << a.name;
}

TEST(ArenaPlan, CategoriesAreContiguousInEnumOrder) {
  const MemoryLayout layout = sample_plan().layout();
  for (const auto& a : layout.allocations) {
    const CategoryRange& r = layout.range(a.category);
    EXPECT_GE(a.offset, r.begin) << a.name;
    EXPECT_LE(a.offset + a.bytes, r.end) << a.name;
  }
  for (int c = 0; c + 1 < kNumMemoryCategories; ++c) {
    EXPECT_LE(layout.categories[c].end, layout.categories[c + 1].begin);
  }
  // Inside a category, allocations keep the order they were added.
  MemoryPlan plan = sample_plan();
  const MemoryLayout l2 = plan.layout();
  EXPECT_LT(l2.allocations[plan.find("grad.a").index].offset, l2.allocations[plan.find("grad.b").index].offset);
  EXPECT_LT(l2.allocations[plan.find("param.a").index].offset,
            l2.allocations[plan.find("param.b").index].offset);
}

TEST(ArenaPlan, TotalsPerCategory) {
  const MemoryPlan plan = sample_plan();
  EXPECT_EQ(plan.category_bytes(MemoryCategory::parameters), 253u);
  EXPECT_EQ(plan.category_bytes(MemoryCategory::gradients), 1001u);
  EXPECT_EQ(plan.category_bytes(MemoryCategory::inputs), 0u);
  EXPECT_EQ(plan.category_bytes(MemoryCategory::workspaces), size_t{32} << 20);
  const size_t requested = 253 + 12 + 1001 + 999 + 4113 + (size_t{32} << 20) + 0;
  EXPECT_EQ(plan.requested_bytes(), requested);
  const MemoryLayout layout = plan.layout();
  size_t sum = 0;
  for (int c = 0; c < kNumMemoryCategories; ++c) sum += layout.requested_bytes[c];
  EXPECT_EQ(sum, requested);
  EXPECT_GE(layout.total_bytes, requested);
  // Padding is bounded: per allocation < its alignment, per category < kArenaAlignment.
  size_t max_padding = kNumMemoryCategories * kArenaAlignment;
  for (const auto& a : layout.allocations) max_padding += a.alignment;
  EXPECT_LE(layout.total_bytes - requested, max_padding);
}

TEST(ArenaPlan, LayoutIsDeterministic) {
  const MemoryLayout a = sample_plan().layout(), b = sample_plan().layout();
  ASSERT_EQ(a.allocations.size(), b.allocations.size());
  for (size_t i = 0; i < a.allocations.size(); ++i) EXPECT_EQ(a.allocations[i].offset, b.allocations[i].offset);
  EXPECT_EQ(a.total_bytes, b.total_bytes);
}

TEST(ArenaPlan, EmptyPlan) {
  const MemoryLayout layout = MemoryPlan().layout();
  EXPECT_EQ(layout.total_bytes, 0u);
  EXPECT_TRUE(layout.allocations.empty());
}

TEST(ArenaPlan, RejectsDuplicatesBadAlignmentAndForeignSlots) {
  MemoryPlan plan;
  plan.add("x", MemoryCategory::activations, 10);
  EXPECT_NE(thrown_message([&] { plan.add("x", MemoryCategory::gradients, 10); }).find("'x' is planned twice"),
            std::string::npos);
  EXPECT_NE(thrown_message([&] { plan.add("y", MemoryCategory::gradients, 10, 48); }).find("power of two"),
            std::string::npos);
  EXPECT_NE(thrown_message([&] { plan.add("", MemoryCategory::gradients, 10); }).find("needs a name"),
            std::string::npos);
  MemoryPlan other;
  const MemorySlot foreign = other.add("z", MemoryCategory::inputs, 4);
  EXPECT_NE(thrown_message([&] { (void)plan.at(foreign); }).find("does not belong"), std::string::npos);
  EXPECT_FALSE(plan.find("absent").valid());
  EXPECT_EQ(plan.at(plan.find("x")).bytes, 10u);
  EXPECT_EQ(plan.add_array<float>("floats", MemoryCategory::activations, 7).index, 1u);
  EXPECT_EQ(plan.at(plan.find("floats")).bytes, 28u);
}

TEST(ArenaPlan, BreakdownListsEveryCategoryAndTotal) {
  const MemoryLayout layout = sample_plan().layout();
  const std::string text = format_memory_breakdown(layout, size_t{100} << 30, size_t{140} << 30,
                                                   size_t{99} << 30, size_t{140} << 30);
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    EXPECT_NE(text.find(memory_category_name(static_cast<MemoryCategory>(c))), std::string::npos) << text;
  }
  EXPECT_NE(text.find("total"), std::string::npos);
  EXPECT_NE(text.find(std::to_string(layout.total_bytes)), std::string::npos) << text;
  EXPECT_NE(text.find("100.00 GiB / 140.00 GiB"), std::string::npos) << text;
  EXPECT_NE(text.find("99.00 GiB / 140.00 GiB"), std::string::npos) << text;
}

// The guard refuses before any CUDA call is made, so this runs without a GPU.
TEST(AllocationGuard, ThrowsNamingTheRegionAndTheBuffer) {
  EXPECT_FALSE(step_guard_active());
  {
    StepGuard step("step 7");
    StepGuard region("layer 2 mlp forward");
    EXPECT_TRUE(step_guard_active());
    EXPECT_EQ(step_guard_region(), "step 7 > layer 2 mlp forward");
    const std::string msg = thrown_message([] { (void)device_allocate(4096, "attention scratch"); });
    EXPECT_NE(msg.find("attention scratch"), std::string::npos) << msg;
    EXPECT_NE(msg.find("step 7 > layer 2 mlp forward"), std::string::npos) << msg;
    EXPECT_NE(msg.find("4096 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("MemoryPlan"), std::string::npos) << msg;  // the fix
    const std::string free_msg = thrown_message([] { device_free(reinterpret_cast<void*>(0x1000), "old buffer"); });
    EXPECT_NE(free_msg.find("old buffer"), std::string::npos) << free_msg;
    const std::string host_msg = thrown_message([] { (void)pinned_host_allocate(64, "loss readback"); });
    EXPECT_NE(host_msg.find("loss readback"), std::string::npos) << host_msg;
    const std::string sync_msg = thrown_message([] { check_host_sync_allowed("cudaStreamSynchronize"); });
    EXPECT_NE(sync_msg.find("cudaStreamSynchronize"), std::string::npos) << sync_msg;
    EXPECT_NE(sync_msg.find("layer 2 mlp forward"), std::string::npos) << sync_msg;
  }
  EXPECT_FALSE(step_guard_active());
  EXPECT_EQ(step_guard_region(), "");
  EXPECT_NO_THROW(check_allocation_allowed("setup buffer", 16));
  EXPECT_NO_THROW(check_host_sync_allowed("end of step"));
  EXPECT_NO_THROW(device_free(nullptr, "nothing"));
}

TEST(AllocationGuard, IsThreadLocal) {
  StepGuard step("step 1");
  bool other_thread_active = true;
  std::thread([&] { other_thread_active = step_guard_active(); }).join();
  EXPECT_FALSE(other_thread_active);
  EXPECT_TRUE(step_guard_active());
}

}  // namespace
}  // namespace sg::cuda
