// The GPU step's memory plan, declared without a device (LlamaStep::plan_memory): what `stepgraph
// validate` and `bench --dryrun` print. The byte totals follow the shapes; the two device-sized
// workspaces (cuDNN attention, CUB sort scratch) are whatever the caller passes (0 without a device).
#include <gtest/gtest.h>

#include "kernels/gemm.h"
#include "model/llama_step.h"
#include "model/param_layout.h"
#include "tiny_model.h"

namespace sg::model {
namespace {

TEST(MemoryPlan, DeclaredWithoutADeviceFromTheShapes) {
  const ModelSpec spec = test::tiny_model_spec();
  BatchSpec batch;
  batch.micro_batch_size = 2;
  batch.num_microbatches = 3;
  const int64_t n = ParamLayout(spec).total();
  const int64_t T = batch.tokens_per_microbatch(spec);
  const cuda::MemoryPlan plan = LlamaStep::plan_memory(spec, batch, {}, {});
  EXPECT_EQ(plan.category_bytes(cuda::MemoryCategory::parameters), static_cast<size_t>(n) * 2);
  EXPECT_EQ(plan.category_bytes(cuda::MemoryCategory::main_weights), static_cast<size_t>(n) * 4);
  EXPECT_EQ(plan.category_bytes(cuda::MemoryCategory::gradients), static_cast<size_t>(n) * 4);
  EXPECT_GE(plan.category_bytes(cuda::MemoryCategory::optimizer_state), static_cast<size_t>(n) * 8);
  EXPECT_EQ(plan.category_bytes(cuda::MemoryCategory::inputs), static_cast<size_t>(T * batch.num_microbatches) * 12);
  EXPECT_GE(plan.category_bytes(cuda::MemoryCategory::workspaces), kernels::Blas::kWorkspaceBytes);
  // One microbatch's activations per layer, whatever the number of microbatches.
  for (const char* name : {"act.layer0.qkv", "act.layer1.swiglu_out", "act.resid2", "grad.d_qkv"}) {
    EXPECT_TRUE(plan.find(name).valid()) << name;
  }
  EXPECT_EQ(plan.at(plan.find("act.layer0.qkv")).bytes, static_cast<size_t>(T * spec.qkv_dim()) * 2);
  EXPECT_EQ(plan.at(plan.find("workspace.cudnn_attention")).bytes, 0u);
  const cuda::MemoryPlan sized = LlamaStep::plan_memory(spec, batch, {}, {1 << 20, 4096});
  EXPECT_EQ(sized.requested_bytes(), plan.requested_bytes() + (1 << 20) + 4096);
}

}  // namespace
}  // namespace sg::model
