// The GPU step's memory plan, declared without a device (TrainStep::plan_memory): what `stepgraph
// validate`, `bench --dryrun` and `train` at start print. The byte totals follow the shapes and the
// layers of the stack; the workspaces only the device can size (the layers' plan_device: cuDNN
// attention; CUB's sort scratch) are absent or 0 bytes. tests/model/train_step_gpu_test.cu checks that
// every other buffer is planned exactly as the arena the GPU step allocates.
#include <gtest/gtest.h>

#include <string>

#include "kernels/gemm.h"
#include "model/layer_registry.h"
#include "model/train_step.h"
#include "tiny_model.h"

namespace sg::model {
namespace {

BatchSpec batch_of(int64_t micro_batch_size, int64_t microbatches) {
  BatchSpec batch;
  batch.micro_batch_size = micro_batch_size;
  batch.num_microbatches = microbatches;
  return batch;
}

TEST(MemoryPlan, DeclaredWithoutADeviceFromTheShapes) {
  const ModelSpec spec = test::tiny_model_spec();  // 2 GPT blocks: layers 0..3 = * - * -
  const BatchSpec batch = batch_of(2, 3);
  const int64_t n = model_layout(spec).total();
  const int64_t T = batch.tokens_per_microbatch(spec);
  const cuda::MemoryPlan plan = TrainStep::plan_memory(spec, batch);
  EXPECT_EQ(plan.category_bytes(cuda::MemoryCategory::parameters), static_cast<size_t>(n) * 2);
  EXPECT_EQ(plan.category_bytes(cuda::MemoryCategory::main_weights), static_cast<size_t>(n) * 4);
  EXPECT_EQ(plan.category_bytes(cuda::MemoryCategory::gradients), static_cast<size_t>(n) * 4);
  EXPECT_GE(plan.category_bytes(cuda::MemoryCategory::optimizer_state), static_cast<size_t>(n) * 8);
  EXPECT_EQ(plan.category_bytes(cuda::MemoryCategory::inputs), static_cast<size_t>(T * batch.num_microbatches) * 12);
  EXPECT_GE(plan.category_bytes(cuda::MemoryCategory::workspaces), kernels::Blas::kWorkspaceBytes);
  // One microbatch's activations per layer of the stack, whatever the number of microbatches; the
  // attention layers' saved activations in the attention layers only.
  for (const char* name : {"act.layer0.qkv", "act.layer1.swiglu_out", "act.layer2.qkv", "act.layer3.gate_up",
                           "act.resid4", "act.norm4", "grad.d_qkv", "grad.d_act"}) {
    EXPECT_TRUE(plan.find(name).valid()) << name;
  }
  for (const char* name : {"act.layer1.qkv", "act.layer0.gate_up", "act.layer4.qkv", "act.resid5"}) {
    EXPECT_FALSE(plan.find(name).valid()) << name;
  }
  EXPECT_EQ(plan.at(plan.find("act.layer0.qkv")).bytes, static_cast<size_t>(T * spec.qkv_dim()) * 2);
  EXPECT_FALSE(plan.find("workspace.cudnn_attention").valid());  // sized by the device's cuDNN plan
  EXPECT_EQ(plan.at(plan.find("workspace.embedding_backward")).bytes, 0u);
  // No attention dropout: no cuDNN seed slots.
  EXPECT_EQ(plan.at(plan.find("attention.dropout_seeds")).bytes, 0u);
  // RoPE's cos/sin table: one for every attention layer, seq_length x (d/2 cos + d/2 sin) fp32; none
  // without RoPE.
  ASSERT_TRUE(plan.find("state.rope_cos_sin").valid());
  EXPECT_EQ(plan.at(plan.find("state.rope_cos_sin")).bytes, static_cast<size_t>(spec.seq_length * spec.head_dim()) * 4);
  ModelSpec no_rope = spec;
  no_rope.position_embedding = PositionEmbedding::none;
  EXPECT_FALSE(TrainStep::plan_memory(no_rope, batch).find("state.rope_cos_sin").valid());

  // More microbatches change only the input buffers.
  const cuda::MemoryPlan more = TrainStep::plan_memory(spec, batch_of(2, 5));
  EXPECT_EQ(more.requested_bytes() - plan.requested_bytes(), static_cast<size_t>(T * 2) * 12);
}

// model.qk_layernorm keeps, per attention layer, the projection before the norms (bf16) and the norms' rstd (one fp32
// per query and key head of every token); their partial rows are a workspace only the device plan sizes.
TEST(MemoryPlan, QkLayernormKeepsTheProjectionAndTheNormsRstd) {
  ModelSpec spec = test::tiny_model_spec();
  const BatchSpec batch = batch_of(2, 1);
  const int64_t T = batch.tokens_per_microbatch(spec);
  const cuda::MemoryPlan plain = TrainStep::plan_memory(spec, batch);
  EXPECT_FALSE(plain.find("act.layer0.qkv_before_qk_norm").valid());
  spec.qk_layernorm = true;
  const cuda::MemoryPlan plan = TrainStep::plan_memory(spec, batch);
  const size_t projection = static_cast<size_t>(T * spec.qkv_dim()) * 2;
  const size_t rstd = static_cast<size_t>(T * (spec.num_attention_heads + spec.num_query_groups)) * 4;
  for (const char* layer : {"act.layer0.", "act.layer2."}) {
    EXPECT_EQ(plan.at(plan.find(std::string(layer) + "qkv_before_qk_norm")).bytes, projection) << layer;
    EXPECT_EQ(plan.at(plan.find(std::string(layer) + "qk_norm_rstd")).bytes, rstd) << layer;
  }
  EXPECT_FALSE(plan.find("act.layer1.qkv_before_qk_norm").valid());  // an MLP layer
  EXPECT_EQ(
      plan.category_bytes(cuda::MemoryCategory::parameters) - plain.category_bytes(cuda::MemoryCategory::parameters),
      static_cast<size_t>(model_layout(spec).total() - model_layout(test::tiny_model_spec()).total()) * 2);
}

// The tiny model's plan with the default optimizer and with `optimizer`, and its parameter count: the storage-dtype
// tests below.
struct PlansOf {
  cuda::MemoryPlan fp32, other;
  size_t n = 0;
};
PlansOf plans_with(const OptimizerSpec& optimizer) {
  const ModelSpec spec = test::tiny_model_spec();
  const BatchSpec batch = batch_of(2, 1);
  return {TrainStep::plan_memory(spec, batch), TrainStep::plan_memory(spec, batch, {}, optimizer),
          static_cast<size_t>(model_layout(spec).total())};
}

// bf16 Adam moments (optimizer.exp_avg_dtype / exp_avg_sq_dtype) take 2 bytes a parameter each.
TEST(MemoryPlan, Bf16MomentsHalveTheirBuffers) {
  OptimizerSpec bf16_first;
  bf16_first.exp_avg_dtype = kernels::FloatDtype::bf16;
  const auto [fp32, mixed, n] = plans_with(bf16_first);
  EXPECT_EQ(fp32.at(fp32.find("optimizer.exp_avg")).bytes, n * 4);
  EXPECT_EQ(mixed.at(mixed.find("optimizer.exp_avg")).bytes, n * 2);
  EXPECT_EQ(mixed.at(mixed.find("optimizer.exp_avg_sq")).bytes, n * 4);
  EXPECT_EQ(fp32.category_bytes(cuda::MemoryCategory::optimizer_state) -
                mixed.category_bytes(cuda::MemoryCategory::optimizer_state),
            n * 2);
}

// bf16 main gradients (ddp.grad_reduce_in_fp32=false) take 2 bytes a parameter; nothing else changes.
TEST(MemoryPlan, Bf16MainGradientsHalveTheGradientBuffer) {
  OptimizerSpec bf16_grads;
  bf16_grads.main_grad_dtype = kernels::FloatDtype::bf16;
  const auto [fp32, bf16, n] = plans_with(bf16_grads);
  EXPECT_EQ(fp32.at(fp32.find("gradients")).bytes, n * 4);
  EXPECT_EQ(bf16.at(bf16.find("gradients")).bytes, n * 2);
  EXPECT_EQ(fp32.category_bytes(cuda::MemoryCategory::gradients) - bf16.category_bytes(cuda::MemoryCategory::gradients),
            n * 2);
  EXPECT_EQ(fp32.requested_bytes() - bf16.requested_bytes(), n * 2);
}

// One rank's arena of a data-parallel run (validate's plan at WORLD_SIZE > 1): with the distributed optimizer
// the fp32 master weights and both moments are this rank's shard of the padded buffer, the gradients and bf16
// weights whole (padded); without it every buffer is whole, as at one rank.
TEST(MemoryPlan, OneRankOfADistributedOptimizerHoldsItsShardOfTheFp32State) {
  const ModelSpec spec = test::tiny_model_spec();
  BatchSpec batch = batch_of(2, 1);
  batch.data_parallel_size = 4;
  const auto n = static_cast<size_t>(model_layout(spec).total());
  const cuda::MemoryPlan whole = TrainStep::plan_memory(spec, batch, {.planned_world_size = 4});
  const cuda::MemoryPlan sharded =
      TrainStep::plan_memory(spec, batch, {.planned_world_size = 4, .planned_distributed_optimizer = true});
  const size_t padded = (n + 4 * 128 - 1) / (4 * 128) * (4 * 128), shard = padded / 4;
  EXPECT_EQ(whole.category_bytes(cuda::MemoryCategory::main_weights), n * 4);
  EXPECT_EQ(sharded.category_bytes(cuda::MemoryCategory::main_weights), shard * 4);
  for (const char* moment : {"optimizer.exp_avg", "optimizer.exp_avg_sq"}) {
    EXPECT_EQ(whole.at(whole.find(moment)).bytes, n * 4) << moment;
    EXPECT_EQ(sharded.at(sharded.find(moment)).bytes, shard * 4) << moment;
  }
  EXPECT_EQ(sharded.at(sharded.find("gradients")).bytes, padded * 4);
  EXPECT_LT(sharded.requested_bytes(), whole.requested_bytes());
}

// With the distributed optimizer every rank also keeps the fp32 weights the forward reads (Mamba's dt_bias, A_log and
// D: ParamBuilder::fp32_vector) whole, packed, with their flat offsets; without it, or for a model that has none, the
// layers read the master weights and nothing is added.
TEST(MemoryPlan, ADistributedOptimizerRankKeepsAReplicaOfTheFp32WeightsTheForwardReads) {
  const ModelSpec hybrid = test::tiny_hybrid_spec("M*M-");
  BatchSpec batch = batch_of(2, 1);
  batch.data_parallel_size = 2;
  const int64_t packed = model_layout(hybrid).params.fp32_packed_total();
  EXPECT_EQ(packed, 2 * 3 * kParamAlignment);  // two Mamba layers, three blocks of 4 heads each
  const cuda::MemoryPlan sharded =
      TrainStep::plan_memory(hybrid, batch, {.planned_world_size = 2, .planned_distributed_optimizer = true});
  ASSERT_TRUE(sharded.find("main_weights.fp32_replica").valid());
  EXPECT_EQ(sharded.at(sharded.find("main_weights.fp32_replica")).bytes, static_cast<size_t>(packed) * sizeof(float));
  EXPECT_EQ(sharded.at(sharded.find("state.fp32_replica_offsets")).bytes,
            static_cast<size_t>(packed) * sizeof(int64_t));
  const cuda::MemoryPlan whole = TrainStep::plan_memory(hybrid, batch, {.planned_world_size = 2});
  EXPECT_FALSE(whole.find("main_weights.fp32_replica").valid());
  const cuda::MemoryPlan dense = TrainStep::plan_memory(
      test::tiny_model_spec(), batch, {.planned_world_size = 2, .planned_distributed_optimizer = true});
  EXPECT_FALSE(dense.find("main_weights.fp32_replica").valid());
}

TEST(MemoryPlan, FollowsAHybridPatternAndAttentionDropout) {
  ModelSpec spec = test::tiny_model_spec();
  spec.hybrid_layer_pattern = "*-*";
  spec.num_layers = 3;
  spec.attention_dropout = 0.1f;
  const cuda::MemoryPlan plan = TrainStep::plan_memory(spec, batch_of(2, 1));
  EXPECT_TRUE(plan.find("act.layer2.qkv").valid());
  EXPECT_TRUE(plan.find("act.layer1.swiglu_out").valid());
  EXPECT_FALSE(plan.find("act.layer3.qkv").valid());
  EXPECT_TRUE(plan.find("act.resid3").valid());
  // One cuDNN dropout seed slot per attention layer.
  EXPECT_EQ(plan.at(plan.find("attention.dropout_seeds")).bytes, 2 * sizeof(int64_t));
}

}  // namespace
}  // namespace sg::model
