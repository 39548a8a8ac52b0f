#include "model/layer_registry.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "model/layers/attention_layer.h"
#include "model/layers/mamba_layer.h"
#include "model/layers/mlp_layer.h"
#include "model/layers/moe_layer.h"

namespace sg::model {

namespace {

// What the kind declares of itself (model/layer.h), read from its classes.
struct Registration {
  LayerKind kind;
  std::unique_ptr<Layer> (*make)(const LayerPlace& place);
  std::unique_ptr<CpuLayer> (*make_cpu)(const LayerPlace& place);
  std::unique_ptr<CpuDecodeLayer> (*make_cpu_decode)(const LayerPlace& place);
  std::unique_ptr<GpuDecodeLayer> (*make_gpu_decode)(const LayerPlace& place);
  double (*decode_state_bytes)(const ModelSpec& model, const DecodeSpec& decode);
  LayerRecompute (*recompute)();  // what the kind can recompute
  LayerFlops (*flops_per_token)(const ModelSpec& model);
  CpuLayerFootprint (*host_footprint)(const ModelSpec& model, const BatchSpec& batch);
};

// Recompute is opt-in; the FLOPs and the host footprint every kind must declare (a kind without them
// does not compile here).
template <class GpuLayer, class CpuTwin, class CpuDecodeTwin, class GpuDecodeTwin>
constexpr Registration kind(LayerKind k) {
  return Registration{
      .kind = k,
      .make = [](const LayerPlace& p) -> std::unique_ptr<Layer> { return std::make_unique<GpuLayer>(p); },
      .make_cpu = [](const LayerPlace& p) -> std::unique_ptr<CpuLayer> { return std::make_unique<CpuTwin>(p); },
      .make_cpu_decode = [](const LayerPlace& p) -> std::unique_ptr<CpuDecodeLayer> {
        return std::make_unique<CpuDecodeTwin>(p);
      },
      .make_gpu_decode = [](const LayerPlace& p) -> std::unique_ptr<GpuDecodeLayer> {
        return std::make_unique<GpuDecodeTwin>(p);
      },
      .decode_state_bytes = &CpuDecodeTwin::state_bytes,
      .recompute = []() -> LayerRecompute {
        if constexpr (requires { GpuLayer::recompute_support(); }) {
          return GpuLayer::recompute_support();
        } else {
          return {};  // the kind has not opted in: recompute refuses it
        }
      },
      .flops_per_token = &GpuLayer::flops_per_token,
      .host_footprint = &CpuTwin::host_footprint,
  };
}

// ONE line per layer kind.
constexpr Registration kRegistrations[] = {
    kind<AttentionLayer, AttentionLayerCpu, AttentionDecodeCpu, AttentionDecodeGpu>(LayerKind::attention),
    kind<MlpLayer, MlpLayerCpu, MlpDecodeCpu, MlpDecodeGpu>(LayerKind::mlp),
    kind<MoeLayer, MoeLayerCpu, MoeDecodeCpu, MoeDecodeGpu>(LayerKind::moe),
    kind<MambaLayer, MambaLayerCpu, MambaDecodeCpu, MambaDecodeGpu>(LayerKind::mamba),
};

const Registration* find(LayerKind kind) {
  for (const Registration& r : kRegistrations) {
    if (r.kind == kind) return &r;
  }
  return nullptr;
}

const Registration& require(LayerKind kind) {
  const Registration* r = find(kind);
  SG_CHECK(r != nullptr, layer_kind_missing_message(kind));
  return *r;
}

}  // namespace

bool layer_kind_implemented(LayerKind kind) { return find(kind) != nullptr; }

LayerRecompute layer_kind_recompute(LayerKind kind) {
  const Registration* r = find(kind);
  return r != nullptr ? r->recompute() : LayerRecompute{};
}

LayerFlops layer_kind_flops_per_token(LayerKind kind, const ModelSpec& model) {
  return require(kind).flops_per_token(model);
}

CpuLayerFootprint layer_kind_host_footprint(LayerKind kind, const ModelSpec& model, const BatchSpec& batch) {
  return require(kind).host_footprint(model, batch);
}

std::string missing_layer_kind_text(LayerKind kind) {
  const LayerKindInfo& info = layer_kind_info(kind);
  return strprintf("%s layer kind (%c in the pattern)", info.description, info.letter);
}

std::string layer_kind_missing_message(LayerKind kind) {
  return "not implemented yet: " + missing_layer_kind_text(kind);
}

std::vector<LayerKind> missing_layer_kinds(const ModelSpec& spec) {
  std::vector<LayerKind> missing;
  for (LayerKind k : stack_layer_kinds(spec)) {
    if (!layer_kind_implemented(k) && std::find(missing.begin(), missing.end(), k) == missing.end()) {
      missing.push_back(k);
    }
  }
  return missing;
}

std::vector<std::unique_ptr<Layer>> make_layers(const ModelSpec& spec) {
  std::vector<std::unique_ptr<Layer>> layers;
  for (const LayerPlace& place : stack_places(spec)) layers.push_back(require(place.kind).make(place));
  return layers;
}

std::vector<std::unique_ptr<CpuLayer>> make_cpu_layers(const ModelSpec& spec) {
  std::vector<std::unique_ptr<CpuLayer>> layers;
  for (const LayerPlace& place : stack_places(spec)) layers.push_back(require(place.kind).make_cpu(place));
  return layers;
}

std::vector<std::unique_ptr<CpuDecodeLayer>> make_cpu_decode_layers(const ModelSpec& spec) {
  std::vector<std::unique_ptr<CpuDecodeLayer>> layers;
  for (const LayerPlace& place : stack_places(spec)) layers.push_back(require(place.kind).make_cpu_decode(place));
  return layers;
}

std::vector<std::unique_ptr<GpuDecodeLayer>> make_gpu_decode_layers(const ModelSpec& spec) {
  std::vector<std::unique_ptr<GpuDecodeLayer>> layers;
  for (const LayerPlace& place : stack_places(spec)) layers.push_back(require(place.kind).make_gpu_decode(place));
  return layers;
}

double decode_state_bytes(const ModelSpec& model, const DecodeSpec& decode) {
  double bytes = 0.0;
  for (LayerKind kind : stack_layer_kinds(model)) bytes += require(kind).decode_state_bytes(model, decode);
  return bytes;
}

ModelLayout model_layout(const ModelSpec& spec) {
  std::vector<std::unique_ptr<CpuLayer>> layers = make_cpu_layers(spec);
  return declare_model(spec, [&](size_t i, LayerDeclarations& d) { layers[i]->declare(d); });
}

std::vector<SavedActivationBytes> saved_activation_bytes(const ModelSpec& model, const BatchSpec& batch) {
  std::vector<std::unique_ptr<Layer>> layers = make_layers(model);
  const ModelLayout layout = declare_model(model, [&](size_t i, LayerDeclarations& d) { layers[i]->declare(d); });
  cuda::MemoryPlan plan;
  SharedBuffers shared;
  LayerPlanContext context(layout.spec, batch, plan, shared);
  for (auto& layer : layers) {
    context.set_layer(layer->index());
    layer->plan(context);
  }
  return context.saved_bytes();
}

}  // namespace sg::model
