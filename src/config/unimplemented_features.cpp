// The features a config asks for that the engine does not build yet: rule 16's notes, and what `stepgraph train`
// refuses (validate.h unimplemented_features).
#include <algorithm>

#include "config/model_config.h"
#include "config/validate.h"
#include "core/strings.h"
#include "model/layer_registry.h"

namespace sg::config {
namespace {

bool contains_kind(const std::vector<model::LayerKind>& kinds, model::LayerKind kind) {
  return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
}

}  // namespace

namespace detail {

std::vector<UnimplementedFeature> find_unimplemented(const Config& c) {
  const ModelConfig& m = c.model;
  std::vector<UnimplementedFeature> out;
  if (m.tensor_model_parallel_size > 1) {
    out.push_back({"tensor parallelism", {"model.tensor_model_parallel_size"}});
  }
  if (m.pipeline_model_parallel_size > 1) {
    out.push_back({"pipeline parallelism", {"model.pipeline_model_parallel_size"}});
  }
  if (m.expert_model_parallel_size > 1) {
    out.push_back({"expert parallelism", {"model.expert_model_parallel_size"}});
  }
  if (m.cpu_offloading) out.push_back({"activation CPU offloading", {"model.cpu_offloading"}});
  if (m.delay_wgrad_compute) {
    out.push_back({"delayed weight-gradient compute", {"model.delay_wgrad_compute"}});
  }
  // Layer kinds the pattern names that the engine does not build yet (model/layer_registry.h).
  std::vector<model::LayerKind> kinds;
  try {
    if (m.num_layers <= kMaxLayers) kinds = layer_pattern(c);  // more: rule 16 reports it; no pattern to build
  } catch (const ConfigError&) {
    // an invalid letter: rule 16 reports it
  }
  std::vector<model::LayerKind> missing;
  for (const model::LayerKind kind : kinds) {
    if (!model::layer_kind_implemented(kind) && !contains_kind(missing, kind)) missing.push_back(kind);
  }
  for (const model::LayerKind kind : missing) {
    std::vector<std::string> keys;
    if (kind == model::LayerKind::moe) keys.push_back("model.num_moe_experts");
    if (m.hybrid_override_pattern) keys.push_back("model.hybrid_override_pattern");
    out.push_back({model::missing_layer_kind_text(kind), keys});
  }
  if (c.dataset.packed_sequence) out.push_back({"packed sequences", {"dataset.packed_sequence"}});
  return out;
}

}  // namespace detail

std::vector<std::string> unimplemented_features(const Config& config) {
  std::vector<std::string> out;
  for (const auto& item : detail::find_unimplemented(config)) {
    std::vector<std::string> shown;
    for (const auto& key : item.keys) shown.push_back(key + " = " + format_value(config, key));
    out.push_back(item.what + " (" + join(shown, ", ") + ")");
  }
  return out;
}

}  // namespace sg::config
