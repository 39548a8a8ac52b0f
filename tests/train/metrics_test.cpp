// Model FLOPs per step (train/metrics.h) from the FLOPs each layer kind declares (model::LayerFlops,
// through the registry): every number as train/metrics.cpp computed it before, per kind, with a switch.
#include "train/metrics.h"

#include <gtest/gtest.h>

#include <set>

#include "model/layer_kind.h"
#include "model/layer_registry.h"
#include "model/stack.h"
#include "standard_shapes.h"

namespace sg::train {
namespace {

using model::LayerKind;

// train/metrics.cpp's formula before the kinds declared their FLOPs, kept here as the reference.
StepFlops former_flops_by_kind(const model::ModelSpec& m, const model::BatchSpec& b) {
  const double H = static_cast<double>(m.hidden_size);
  const double S = static_cast<double>(m.seq_length);
  double matmul_params = static_cast<double>(m.vocab_size) * H;
  double attention_layers = 0.0, scan_flops_per_token = 0.0;
  // The MLP's and the experts' linears per unit of width: FC1 (2 gated, 1 not) and FC2.
  const double linears = m.mlp_activation == model::MlpActivation::swiglu ? 3.0 : 2.0;
  for (const LayerKind kind : model::stack_layer_kinds(m)) {
    switch (kind) {
      case LayerKind::attention:
        matmul_params += H * static_cast<double>(m.qkv_dim()) + H * static_cast<double>(m.q_dim());
        attention_layers += static_cast<double>(m.q_dim()) / H;
        break;
      case LayerKind::mlp: matmul_params += linears * H * static_cast<double>(m.ffn_hidden_size); break;
      case LayerKind::moe: {
        const double F = static_cast<double>(m.moe_ffn_hidden_size);
        const double shared = static_cast<double>(m.moe.shared_expert_intermediate_size);
        matmul_params += H * static_cast<double>(m.num_moe_experts) +
                         linears * H * (F * static_cast<double>(m.moe_router_topk) + shared);
        break;
      }
      case LayerKind::mamba:
        matmul_params += H * static_cast<double>(m.mamba_in_proj_dim() + m.mamba_inner());
        scan_flops_per_token += 21.0 * static_cast<double>(m.mamba_inner()) * static_cast<double>(m.mamba.state_dim);
        break;
    }
  }
  const double tokens = static_cast<double>(b.micro_batch_size * b.num_microbatches) * S;
  return StepFlops{.matmul = 6.0 * matmul_params * tokens,
                   .attention = 12.0 * attention_layers * S * H * tokens,
                   .scan = scan_flops_per_token * tokens};
}

TEST(TrainingFlops, TheKindsDeclarationsGiveTheFormerNumbersBitForBit) {
  std::set<LayerKind> kinds_seen;
  for (const test::StandardShape& shape : test::standard_shapes()) {
    SCOPED_TRACE(shape.name);
    for (const LayerKind kind : model::stack_layer_kinds(shape.model)) kinds_seen.insert(kind);
    const StepFlops now = training_flops_by_kind(shape.model, shape.batch);
    const StepFlops former = former_flops_by_kind(shape.model, shape.batch);
    EXPECT_EQ(now.matmul, former.matmul);
    EXPECT_EQ(now.attention, former.attention);
    EXPECT_EQ(now.scan, former.scan);
    EXPECT_EQ(training_flops_per_step(shape.model, shape.batch), former.total());
  }
  EXPECT_EQ(kinds_seen.size(), model::layer_kinds().size()) << "the shapes must reach every layer kind";
}

TEST(TrainingFlops, EveryKindDeclaresItsOwn) {
  model::ModelSpec m;
  m.hybrid_layer_pattern = "M*-E";
  m.num_layers = 4;
  m.num_moe_experts = 4;
  m.moe_ffn_hidden_size = 32;
  for (const model::LayerKindInfo& info : model::layer_kinds()) {
    SCOPED_TRACE(info.name);
    const model::LayerFlops flops = model::layer_kind_flops_per_token(info.kind, m);
    EXPECT_GT(flops.matmul_weights, 0.0);
    EXPECT_EQ(flops.attention > 0.0, info.kind == LayerKind::attention);
    EXPECT_EQ(flops.scan > 0.0, info.kind == LayerKind::mamba);
  }
}

}  // namespace
}  // namespace sg::train
