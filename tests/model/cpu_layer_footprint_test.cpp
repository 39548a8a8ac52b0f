// The host memory a layer kind declares for its CPU twin (model::CpuLayerFootprint, summed by
// train/host_memory.h) against what the twin allocates when it plans a microbatch: saved + scratch must be
// the bytes of its plan() buffers, also for shapes where q_dim (heads x kv_channels) is not hidden_size; its parameters
// the elements of the tensors the layer declares.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "model/layer_kind.h"
#include "model/layer_registry.h"
#include "moe_layer_case.h"
#include "tiny_model.h"

namespace {

// Bytes allocated through the global operator new while `counting` (this test is single-threaded).
bool counting = false;
size_t counted_bytes = 0;

}  // namespace

void* operator new(size_t bytes) {
  if (counting) counted_bytes += bytes;
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace sg::model {
namespace {

// What each layer of `spec`'s stack allocates in plan(), against its kind's footprint (fp32 elements).
void expect_footprints_allocated(const ModelSpec& spec, const BatchSpec& batch) {
  const std::vector<LayerKind> kinds = stack_layer_kinds(spec);
  std::vector<std::unique_ptr<CpuLayer>> layers = make_cpu_layers(spec);
  ASSERT_EQ(layers.size(), kinds.size());
  const std::vector<LayerPlace> places = stack_places(spec);
  const ModelLayout layout = model_layout(spec);
  for (size_t i = 0; i < layers.size(); ++i) {
    SCOPED_TRACE("layer " + std::to_string(i) + ", " + layer_kind_info(kinds[i]).name);
    counted_bytes = 0;
    counting = true;
    layers[i]->plan(spec, batch);
    counting = false;
    const CpuLayerFootprint footprint = layer_kind_host_footprint(kinds[i], spec, batch);
    EXPECT_EQ(static_cast<double>(counted_bytes), (footprint.saved + footprint.scratch) * sizeof(float));
    // Its parameters: the tensors the layer declares under its prefix.
    int64_t declared = 0;
    for (const ParamTensor& t : layout.params.tensors()) {
      if (t.name.rfind(places[i].param_prefix, 0) == 0) declared += t.numel;
    }
    EXPECT_EQ(footprint.params, static_cast<double>(declared)) << places[i].param_prefix;
  }
}

TEST(CpuLayerFootprint, CountsWhatTheTwinAllocates) {
  const BatchSpec batch{.micro_batch_size = 2};
  expect_footprints_allocated(test::tiny_hybrid_spec("*-M"), batch);
}

// model.kv_channels: 4 heads of 6 make the attention output 24 wide on a hidden size of 16.
TEST(CpuLayerFootprint, CountsTheAttentionOutputQDimWide) {
  ModelSpec spec = test::tiny_hybrid_spec("*-");
  spec.kv_channels = 6;
  ASSERT_NE(spec.q_dim(), spec.hidden_size);
  expect_footprints_allocated(spec, BatchSpec{.micro_batch_size = 2});
}

// model.qk_layernorm: the projection before the norms, their rstd and one token's heads of scratch.
TEST(CpuLayerFootprint, CountsTheQueryAndKeyNormsBuffers) {
  ModelSpec spec = test::tiny_hybrid_spec("*-");
  spec.qk_layernorm = true;
  expect_footprints_allocated(spec, BatchSpec{.micro_batch_size = 2});
}

// model.add_qkv_bias: the bias [qkv_dim] of every attention's projection.
TEST(CpuLayerFootprint, CountsTheQkvBias) {
  ModelSpec spec = test::tiny_hybrid_spec("*-");
  spec.add_qkv_bias = true;
  expect_footprints_allocated(spec, BatchSpec{.micro_batch_size = 2});
}

// model.add_bias_linear: q, k, v and o_proj's biases and both MLP linears', gated (SwiGLU) and not (squared ReLU).
TEST(CpuLayerFootprint, CountsTheLinearBiases) {
  ModelSpec gated = test::tiny_hybrid_spec("*-");
  gated.mlp_activation = MlpActivation::swiglu;
  gated.add_bias_linear = true;
  expect_footprints_allocated(gated, BatchSpec{.micro_batch_size = 2});
  ModelSpec squared_relu = test::tiny_hybrid_spec("M*-");
  squared_relu.add_bias_linear = true;
  expect_footprints_allocated(squared_relu, BatchSpec{.micro_batch_size = 2});
}

// MoE layers (routed experts, a shared expert, capacity with padding, per-sequence aux loss groups, the experts'
// linear biases).
TEST(CpuLayerFootprint, CountsTheMoeLayersBuffers) {
  for (const test::MoeCase& c : {
           test::MoeCase{.name = "dropless", .H = 16, .E = 4, .k = 2, .F = 8, .S = 0, .micro_batch = 2, .seq = 5},
           test::MoeCase{.name = "shared", .H = 16, .E = 6, .k = 3, .F = 8, .S = 12, .micro_batch = 3, .seq = 4},
           test::MoeCase{.name = "shared_gate", .H = 16, .E = 6, .k = 3, .F = 8, .S = 12, .micro_batch = 3, .seq = 4,
                         .shared_gate = true},
           test::MoeCase{.name = "seq_aux_padded", .H = 8, .E = 5, .k = 1, .F = 8, .S = 0, .micro_batch = 3, .seq = 7,
                         .pre_softmax = true, .balancing = MoeLoadBalancing::seq_aux_loss, .capacity_factor = 1.5,
                         .pad = true},
           test::MoeCase{.name = "linear_biases", .H = 16, .E = 4, .k = 2, .F = 8, .S = 0, .micro_batch = 2, .seq = 5,
                         .linear_biases = true},
           test::MoeCase{.name = "linear_biases_squared_relu", .H = 16, .E = 4, .k = 2, .F = 8, .S = 0,
                         .micro_batch = 2, .seq = 5, .activation = MlpActivation::squared_relu, .linear_biases = true},
       }) {
    SCOPED_TRACE(c.name);
    expect_footprints_allocated(test::moe_case_spec(c), test::moe_case_batch(c));
  }
}

}  // namespace
}  // namespace sg::model
