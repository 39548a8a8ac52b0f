// The host memory plan (train/host_memory.h): the CPU backend's from what each layer kind's CPU twin declares
// (model::CpuLayerFootprint, through the registry): every number as train/host_memory.cpp computed it
// before, per kind, with a switch, but for what the former formula missed of what the twins allocate
// (tests/model/cpu_layer_footprint_test.cpp): the attention output and its gradient are q_dim wide, not
// hidden_size, and the MoE router keeps its aux loss's per-group counts and the step's per-expert counts.
#include "train/host_memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/available_memory.h"
#include "core/error.h"
#include "model/flat_view.h"
#include "model/layer_kind.h"
#include "model/layer_registry.h"
#include "model/layers/moe_layer.h"
#include "model/stack.h"
#include "standard_shapes.h"

namespace sg::train {
namespace {

using model::LayerKind;

// train/host_memory.cpp's formulas before the kinds declared their footprint, kept here as the
// reference (the attention output q_dim wide, Q below; the MLP's and the experts' FC1 2F wide gated, F
// not): one layer's elements with its pre-norm, then the plan's items that sum them. The MoE router's expert bias
// [E] counted where the layer declares it (the former formula counted it in every MoE layer).
struct FormerLayerCost {
  double params = 0.0, saved = 0.0, scratch = 0.0;
};
FormerLayerCost former_layer_cost(LayerKind kind, const model::ModelSpec& m, const model::BatchSpec& b) {
  const double H = static_cast<double>(m.hidden_size), F = static_cast<double>(m.ffn_hidden_size);
  const double QKV = static_cast<double>(m.qkv_dim()), Q = static_cast<double>(m.num_attention_heads * m.head_dim());
  const double S = static_cast<double>(m.seq_length), T = static_cast<double>(b.micro_batch_size) * S;
  const double up = m.mlp_activation == model::MlpActivation::swiglu ? 2.0 : 1.0;
  switch (kind) {
    case LayerKind::attention:
      return {H + QKV * H + H * Q, T * (QKV + Q) + static_cast<double>(b.micro_batch_size * m.num_attention_heads) * S,
              T * (Q + QKV)};
    case LayerKind::mlp: return {H + (up + 1.0) * F * H, (up + 1.0) * T * F, (up + 1.0) * T * F};
    case LayerKind::mamba: {
      const double P = static_cast<double>(m.mamba_in_proj_dim()), C = static_cast<double>(m.mamba_conv_dim());
      const double D = static_cast<double>(m.mamba_inner()), heads = static_cast<double>(m.mamba_heads());
      const double G = static_cast<double>(m.mamba.num_groups), BC = C - D;
      return {H + P * H + 5.0 * C + H * D + 3.0 * heads + D, T * (P + C + D + BC + heads + 2.0 * D + G) + heads,
              T * (3.0 * D + BC + C + P + heads) + 2.0 * heads};
    }
    case LayerKind::moe: {
      const model::MoeShapes s = model::moe_shapes(m, b.micro_batch_size * m.seq_length);
      const double E = static_cast<double>(s.E), R = static_cast<double>(s.rows), Fe = static_cast<double>(s.F),
                   Sh = static_cast<double>(s.S), k = static_cast<double>(s.k);
      const double w = up + 1.0;
      const double expert_bias = m.moe.enable_expert_bias || up == 1.0 ? E : 0.0;
      return {H + E * H + w * E * Fe * H + w * Sh * H + expert_bias,
              T * (E + 2.0 * k) + static_cast<double>(s.aux_groups + 1) * E + R * (2.0 * H + w * Fe) + w * T * Sh,
              T * (E + k + H) + R * (2.0 * H + w * Fe) + w * T * Sh};
    }
  }
  return {};
}

struct FormerPlan {
  double state = 0.0, activations = 0.0, scratch = 0.0;  // bytes of the plan's items 1, 2 and 3
};
FormerPlan former_plan(const model::ModelSpec& m, const model::BatchSpec& b) {
  const double H = static_cast<double>(m.hidden_size), V = static_cast<double>(m.vocab_size);
  const double QKV = static_cast<double>(m.qkv_dim()), S = static_cast<double>(m.seq_length);
  const double T = static_cast<double>(b.micro_batch_size) * S;
  FormerLayerCost layers;
  double N = 0.0;
  for (const LayerKind kind : model::stack_layer_kinds(m)) {
    const FormerLayerCost c = former_layer_cost(kind, m, b);
    layers.params += c.params;
    layers.saved += c.saved;
    layers.scratch += c.scratch;
    N += 1.0;
  }
  const double P = V * H * (m.share_embeddings_and_output_weights ? 1.0 : 2.0) + layers.params + H;
  return {.state = 16.0 * P,
          .activations = ((N + 1.0) * T * (2.0 * H + 1.0) + layers.saved) * 4.0,
          .scratch = (5.0 * T * H + layers.scratch) * 4.0 + 2.0 * std::min(T, 128.0) * V * 4.0 + S * QKV * 8.0};
}

TEST(HostMemoryPlan, TheKindsFootprintsGiveTheFormerNumbersBitForBit) {
  for (const test::StandardShape& shape : test::standard_shapes()) {
    SCOPED_TRACE(shape.name);
    const HostMemoryPlan plan = plan_host_memory(shape.model, shape.batch, {.cpu_backend = true});
    const FormerPlan former = former_plan(shape.model, shape.batch);
    ASSERT_EQ(plan.items.size(), 5u);
    EXPECT_EQ(plan.items[1].bytes, former.state);
    EXPECT_EQ(plan.items[2].bytes, former.activations);
    EXPECT_EQ(plan.items[3].bytes, former.scratch);
    EXPECT_EQ(plan.items[4].bytes, former.state / 4.0);  // the initial weights, fp32
  }
}

// The footprints' parameters are the ones the kinds declare, the MoE expert bias [E] included only where a layer has
// it (model.moe_router_enable_expert_bias, or squared-ReLU experts, which always have it).
TEST(HostMemoryPlan, TheKindsFootprintsCountTheParametersTheyDeclare) {
  for (const test::StandardShape& shape : test::standard_shapes()) {
    SCOPED_TRACE(shape.name);
    const model::ModelSpec& m = shape.model;
    const HostMemoryPlan plan = plan_host_memory(m, shape.batch, {.cpu_backend = true});
    ASSERT_EQ(plan.items.size(), 5u);
    EXPECT_EQ(plan.items[4].bytes / 4.0, static_cast<double>(model::model_layout(m).num_parameters()));
  }
}

TEST(HostMemoryPlan, EveryKindsTwinDeclaresItsFootprint) {
  model::ModelSpec m;
  m.hybrid_layer_pattern = "M*-E";
  m.num_layers = 4;
  m.num_moe_experts = 4;
  m.moe_ffn_hidden_size = 32;
  const model::BatchSpec b;
  for (const model::LayerKindInfo& info : model::layer_kinds()) {
    SCOPED_TRACE(info.name);
    const model::CpuLayerFootprint footprint = model::layer_kind_host_footprint(info.kind, m, b);
    EXPECT_GT(footprint.params, 0.0);
    EXPECT_GT(footprint.saved, 0.0);
    EXPECT_GT(footprint.scratch, 0.0);
  }
}

// Data parallel: each rank on a node holds its own batches and, at a resume, its own upload buffers, all at once. A
// limit the node shares (MemAvailable, a cgroup) must hold them all; an rlimit is each process's own.
TEST(HostMemoryPlan, TheRanksOnANodeShareItsMemory) {
  const test::StandardShape shape = test::standard_shapes().front();
  SCOPED_TRACE(shape.name);
  const HostMemoryOptions gpu{.cpu_backend = false, .checkpoint_load = true};
  const HostMemoryPlan one = plan_host_memory(shape.model, shape.batch, gpu);
  ASSERT_EQ(one.items.size(), 2u);
  EXPECT_EQ(one.items[1].what, "checkpoint upload buffers");
  EXPECT_EQ(one.ranks_on_node, 1);
  EXPECT_EQ(one.total(), one.per_rank());

  HostMemoryOptions eight = gpu;
  eight.ranks_on_node = 8;
  eight.ranks_source = "LOCAL_WORLD_SIZE = 8";
  const HostMemoryPlan node = plan_host_memory(shape.model, shape.batch, eight);
  EXPECT_EQ(node.per_rank(), one.per_rank());
  EXPECT_EQ(node.total(), 8.0 * one.per_rank());

  // Room for four ranks: one fits, eight do not, and the error says how many and how much each.
  const AvailableHostMemory shared{4.0 * one.per_rank(), "MemAvailable in /proc/meminfo"};
  EXPECT_NO_THROW(check_host_memory(one, shared));
  std::string e;
  try {
    check_host_memory(node, shared);
  } catch (const Error& error) {
    e = error.what();
  }
  EXPECT_NE(e.find("of host memory on this node: 8 ranks (LOCAL_WORLD_SIZE = 8) x " + bytes_text(one.per_rank()) +
                   " per rank"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("the run needs about " + bytes_text(8.0 * one.per_rank())), std::string::npos) << e;
  EXPECT_NE(e.find("start fewer ranks on this node"), std::string::npos) << e;
  EXPECT_EQ(e.find("train on a GPU"), std::string::npos) << e;
  // The same bytes as one process's rlimit: each rank has its own.
  EXPECT_NO_THROW(check_host_memory(node, AvailableHostMemory{4.0 * one.per_rank(), "RLIMIT_AS (ulimit -v)", true}));
  EXPECT_THROW(
      check_host_memory(node, std::vector<AvailableHostMemory>{{16.0 * one.per_rank(), "RLIMIT_AS", true}, shared}),
      Error);
}

// Only the rank that writes checkpoints downloads the state to save it; with the distributed optimizer the others
// join the gathers without a copy (TrainingBackend::join_state_gather): the node holds one copy, beside every rank's
// batches. The error says so; an rlimit holds the writing rank's need.
TEST(HostMemoryPlan, OnlyTheRankThatWritesCheckpointsCopiesTheStateToSaveIt) {
  const test::StandardShape shape = test::standard_shapes().front();
  SCOPED_TRACE(shape.name);
  HostMemoryOptions options{.cpu_backend = false, .checkpoint_save = true};
  options.ranks_on_node = 8;
  options.ranks_source = "LOCAL_WORLD_SIZE = 8";
  const HostMemoryPlan node = plan_host_memory(shape.model, shape.batch, options);
  ASSERT_EQ(node.items.size(), 2u);
  const HostMemoryItem& batches = node.items[0];
  const HostMemoryItem& copy = node.items[1];
  EXPECT_FALSE(batches.writer_only);
  EXPECT_TRUE(copy.writer_only);
  EXPECT_GT(copy.bytes, 8.0 * batches.bytes) << "the case that matters: the copy dwarfs the batches";
  EXPECT_EQ(node.per_rank(), batches.bytes + copy.bytes);
  EXPECT_EQ(node.every_rank(), batches.bytes);
  EXPECT_EQ(node.total(), 8.0 * batches.bytes + copy.bytes);
  // Room for the batches of eight ranks and one copy (and a bit): enough.
  EXPECT_NO_THROW(check_host_memory(
      node, AvailableHostMemory{8.0 * batches.bytes + 1.01 * copy.bytes, "MemAvailable in /proc/meminfo"}));
  std::string e;
  // Too little even for one copy: the error names the copy as the writing rank's own.
  const AvailableHostMemory tight{8.0 * batches.bytes + 0.5 * copy.bytes, "MemAvailable in /proc/meminfo"};
  try {
    check_host_memory(node, tight);
  } catch (const Error& error) {
    e = error.what();
  }
  const std::string need = "the run needs about " + bytes_text(node.total()) +
                           " of host memory on this node: 8 ranks (LOCAL_WORLD_SIZE = 8) x " +
                           bytes_text(batches.bytes) + " per rank + " + bytes_text(copy.bytes) +
                           " on the rank that writes checkpoints";
  EXPECT_NE(e.find(need), std::string::npos) << e;
  const std::string item =
      "checkpoint copy of the state " + bytes_text(copy.bytes) + " (the rank that writes checkpoints only)";
  EXPECT_NE(e.find(item), std::string::npos) << e;
  // A per-process limit holds one rank's need, the writing rank's (its batches and the copy).
  EXPECT_THROW(check_host_memory(node, AvailableHostMemory{0.9 * node.per_rank(), "RLIMIT_AS (ulimit -v)", true}),
               Error);
  EXPECT_NO_THROW(check_host_memory(node, AvailableHostMemory{node.per_rank(), "RLIMIT_AS (ulimit -v)", true}));
  // One process: the copy is its own, and nothing says otherwise.
  options.ranks_on_node = 1;
  const HostMemoryPlan one = plan_host_memory(shape.model, shape.batch, options);
  EXPECT_EQ(one.total(), one.per_rank());
  EXPECT_EQ(one.describe().find("only"), std::string::npos) << one.describe();
}

// A per-process limit (an rlimit) holds this process's own need: a rank that does not write checkpoints holds no copy
// of the state at a save, so a limit between its need and the writing rank's refuses only the writing rank.
TEST(HostMemoryPlan, APerProcessLimitHoldsARankThatWritesNoCheckpointsToItsOwnNeed) {
  const test::StandardShape shape = test::standard_shapes().front();
  HostMemoryOptions options{.cpu_backend = false, .checkpoint_save = true, .ranks_on_node = 8};
  const HostMemoryPlan writer = plan_host_memory(shape.model, shape.batch, options);
  options.writes_checkpoints = false;
  const HostMemoryPlan other = plan_host_memory(shape.model, shape.batch, options);
  ASSERT_LT(writer.every_rank(), 0.5 * writer.per_rank()) << "the case that matters: the copy dwarfs the batches";
  const AvailableHostMemory rlimit{0.5 * writer.per_rank(), "RLIMIT_AS (ulimit -v)", true};
  EXPECT_THROW(check_host_memory(writer, rlimit), Error);
  EXPECT_NO_THROW(check_host_memory(other, rlimit));
  // Below its own need the other rank is refused too, and the error says whose need it is.
  std::string e;
  try {
    check_host_memory(other, AvailableHostMemory{0.5 * other.every_rank(), "RLIMIT_AS (ulimit -v)", true});
  } catch (const Error& error) {
    e = error.what();
  }
  EXPECT_NE(e.find("the run needs about " + bytes_text(other.every_rank()) +
                   " of host memory on this rank, which writes no checkpoints"),
            std::string::npos)
      << e;
  // A limit the node's ranks share still counts the writing rank's copy, whichever rank checks it.
  const AvailableHostMemory shared{writer.total() - 1.0, "MemAvailable in /proc/meminfo"};
  EXPECT_THROW(check_host_memory(other, shared), Error);
}

// A resume or a pretrained start holds no copy of the state on any rank: each backend reads the mapped checkpoint or
// weights (page cache, shared by the node's ranks) through its upload buffers, a fixed size whatever the model's; the
// CPU backend reads straight into its own buffers.
TEST(HostMemoryPlan, AResumeHoldsNoCopyOfTheStateOnAnyRank) {
  const model::ModelSpec small = test::standard_shapes().front().model;
  model::ModelSpec large = small;
  large.vocab_size *= 16;  // the state grows, the upload buffers do not
  const model::BatchSpec batch = test::standard_shapes().front().batch;
  HostMemoryOptions load{.cpu_backend = false, .checkpoint_load = true, .ranks_on_node = 8};
  for (const model::ModelSpec& m : {small, large}) {
    const HostMemoryPlan plan = plan_host_memory(m, batch, load);
    ASSERT_EQ(plan.items.size(), 2u);
    EXPECT_EQ(plan.items[1].what, "checkpoint upload buffers");
    EXPECT_EQ(plan.items[1].bytes, static_cast<double>(model::kUploadChunkBytes));
    EXPECT_FALSE(plan.items[1].writer_only);
    EXPECT_EQ(plan.total(), 8.0 * plan.per_rank());
  }
  load.cpu_backend = true;
  EXPECT_EQ(plan_host_memory(large, batch, load).total(),
            plan_host_memory(large, batch, {.cpu_backend = true, .ranks_on_node = 8}).total());
}

}  // namespace
}  // namespace sg::train
