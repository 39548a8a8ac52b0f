#include "train/host_memory.h"

#include <algorithm>
#include <cmath>
#include <new>
#include <stdexcept>

#include "core/error.h"
#include "core/strings.h"
#include "model/layers/moe_layer.h"
#include "model/stack.h"

namespace sg::train {

namespace {

// What one layer of the stack (model/stack.h) costs the CPU backend, in elements, counted without
// building the model (a config may ask for far more than fits): its parameters (with its pre-norm),
// its saved activations and its CPU twin's scratch (model/layers/*_layer_cpu.cpp).
struct CpuLayerCost {
  double params = 0.0, saved = 0.0, scratch = 0.0;
};
CpuLayerCost cpu_layer_cost(model::LayerKind kind, const model::ModelSpec& m, const model::BatchSpec& b) {
  const double H = static_cast<double>(m.hidden_size), F = static_cast<double>(m.ffn_hidden_size);
  const double QKV = static_cast<double>(m.qkv_dim()), Q = static_cast<double>(m.num_attention_heads * m.head_dim());
  const double S = static_cast<double>(m.seq_length), T = static_cast<double>(b.micro_batch_size) * S;
  switch (kind) {
    case model::LayerKind::attention:  // qkv, attention output, softmax statistics; d attn, d qkv
      return {H + QKV * H + H * Q,
              T * (QKV + H) + static_cast<double>(b.micro_batch_size * m.num_attention_heads) * S, T * (H + QKV)};
    case model::LayerKind::mlp: {  // gate_up (up alone when not gated), activation output; their gradients
      const double up = m.mlp_activation == model::MlpActivation::swiglu ? 2.0 : 1.0;
      return {H + (up + 1.0) * F * H, (up + 1.0) * T * F, (up + 1.0) * T * F};
    }
    case model::LayerKind::mamba: {  // model/layers/mamba_layer.h's MambaLayerCpu buffers
      const double P = static_cast<double>(m.mamba_in_proj_dim()), C = static_cast<double>(m.mamba_conv_dim());
      const double D = static_cast<double>(m.mamba_inner()), heads = static_cast<double>(m.mamba_heads());
      const double G = static_cast<double>(m.mamba.num_groups), BC = C - D;
      return {H + P * H + 5.0 * C + H * D + 3.0 * heads + D,
              T * (P + C + D + BC + heads + 2.0 * D + G) + heads,
              T * (3.0 * D + BC + C + P + heads) + 2.0 * heads};
    }
    case model::LayerKind::moe: {  // moe_layer_cpu.cpp: router, permuted rows, experts, shared expert
      const model::MoeShapes s = model::moe_shapes(m, b.micro_batch_size * m.seq_length);
      const double E = static_cast<double>(s.E), R = static_cast<double>(s.rows), Fe = static_cast<double>(s.F),
                   Sh = static_cast<double>(s.S), k = static_cast<double>(s.k);
      return {H + E * H + 3.0 * E * Fe * H + 3.0 * Sh * H + E,
              T * (E + 2.0 * k) + R * (2.0 * H + 3.0 * Fe) + 3.0 * T * Sh,
              T * (E + k + H) + R * (2.0 * H + 3.0 * Fe) + 3.0 * T * Sh};
    }
  }
  throw Error(strprintf("host memory of %s layers is not counted yet (train/host_memory.cpp)",
                        model::layer_kind_info(kind).description));
}

}  // namespace

double HostMemoryPlan::total() const {
  double t = 0.0;
  for (const auto& i : items) t += i.bytes;
  return t;
}

std::string HostMemoryPlan::describe() const {
  std::vector<std::string> parts;
  for (const auto& i : items) parts.push_back(i.what + " " + bytes_text(i.bytes));
  return join(parts, ", ");
}

HostMemoryPlan plan_host_memory(const model::ModelSpec& m, const model::BatchSpec& b,
                                const HostMemoryOptions& options) {
  HostMemoryPlan plan;
  const double f32 = 4.0;
  const double tokens_per_step =
      static_cast<double>(b.micro_batch_size) * static_cast<double>(b.num_microbatches) * static_cast<double>(m.seq_length);
  // tokens + targets (int32) and the loss mask (fp32); the GPU backend's pinned copies are two more.
  plan.items.push_back({"input batch", tokens_per_step * 12.0 * (options.cpu_backend ? 1.0 : 3.0),
                        "train.global_batch_size, model.seq_length"});
  if (!options.cpu_backend) return plan;

  const double H = static_cast<double>(m.hidden_size), V = static_cast<double>(m.vocab_size);
  const double QKV = static_cast<double>(m.qkv_dim()), S = static_cast<double>(m.seq_length);
  const double T = static_cast<double>(b.micro_batch_size) * S;  // tokens per microbatch
  CpuLayerCost layers;
  double N = 0.0;
  for (const model::LayerKind kind : model::stack_layer_kinds(m)) {
    const CpuLayerCost c = cpu_layer_cost(kind, m, b);
    layers.params += c.params;
    layers.saved += c.saved;
    layers.scratch += c.scratch;
    N += 1.0;
  }
  const double P = V * H * (m.share_embeddings_and_output_weights ? 1.0 : 2.0) + layers.params + H;
  const std::string param_keys = "model.num_layers, model.hidden_size, model.ffn_hidden_size, model.vocab_size";
  plan.items.push_back({strprintf("weights, gradients and Adam moments (fp32, %.3g parameters)", P), 16.0 * P,
                        param_keys});
  // The residual stream, its pre-norm output and rstd at the N + 1 layer boundaries (model/cpu_model.h),
  // and each layer's own saved activations.
  plan.items.push_back({"activations of one microbatch", ((N + 1.0) * T * (2.0 * H + 1.0) + layers.saved) * f32,
                        "model.num_layers, train.micro_batch_size, model.seq_length, model.hidden_size"});
  // Scratch: the model's 5 [T,H] buffers, each layer twin's gradient scratch, the LM-head chunk's
  // logits and dlogits (128 rows), the attention backward's fp64 rows.
  const double scratch = (5.0 * T * H + layers.scratch) * f32 + 2.0 * std::min(T, 128.0) * V * f32 + S * QKV * 8.0;
  plan.items.push_back({"scratch", scratch, "train.micro_batch_size, model.seq_length, model.vocab_size"});
  // The initial weights are built before they are copied in.
  plan.items.push_back({"initial weights", P * f32, param_keys});
  if (options.checkpoint_staging) {
    // A save copies weights and both moments (fp32) and a bf16 copy of the weights; a load the same.
    plan.items.push_back({"checkpoint copy of the state", 14.0 * P, param_keys});
  }
  return plan;
}

void check_host_memory(const HostMemoryPlan& plan, const AvailableHostMemory& available) {
  if (available.source.empty() || plan.total() <= available.bytes) return;
  const auto largest = std::max_element(plan.items.begin(), plan.items.end(),
                                        [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
  throw Error(strprintf(
      "the run needs about %s of host memory (%s), but only %s is available (%s). Nothing was allocated. "
      "The largest part is the %s: lower %s, or train on a GPU",
      bytes_text(plan.total()).c_str(), plan.describe().c_str(), bytes_text(available.bytes).c_str(),
      available.source.c_str(), largest->what.c_str(), largest->keys.c_str()));
}

void with_host_allocation(const std::string& what, const std::function<void()>& allocate) {
  try {
    allocate();
  } catch (const std::bad_alloc&) {
    throw Error(strprintf("out of host memory while allocating %s (std::bad_alloc); the memory plan "
                          "underestimated it or other processes took the memory. Use a smaller model or batch",
                          what.c_str()));
  } catch (const std::length_error&) {
    throw Error(strprintf("cannot allocate %s: the size exceeds what one host buffer can hold "
                          "(std::length_error). Use a smaller model or batch",
                          what.c_str()));
  }
}

}  // namespace sg::train
