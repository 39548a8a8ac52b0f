#include "model/activation_account.h"

#include <map>
#include <memory>
#include <tuple>

#include "core/strings.h"
#include "cuda/arena.h"
#include "cuda/bf16.h"
#include "model/layer_context.h"
#include "model/layer_registry.h"
#include "model/recompute.h"
#include "model/recompute_layout.h"

namespace sg::model {

size_t ActivationAccount::without_recompute() const {
  size_t sum = 0;
  for (const LayerActivations& l : layers) sum += l.bytes;
  return sum;
}

size_t ActivationAccount::with_recompute() const {
  size_t sum = recompute_buffer_bytes;
  for (const LayerActivations& l : layers) sum += l.kept();
  return sum;
}

ActivationAccount activation_account(const ModelSpec& model, const BatchSpec& batch) {
  std::vector<std::unique_ptr<Layer>> layers = make_layers(model);
  const ModelLayout layout = declare_model(model, [&](size_t i, LayerDeclarations& d) { layers[i]->declare(d); });
  const int64_t T = batch.tokens_per_microbatch(model), H = model.hidden_size;
  cuda::MemoryPlan plan;
  SharedBuffers shared;
  RecomputeLayout recompute(layout.spec);
  plan_boundaries(plan, recompute, layout.num_layers(), T, H);
  LayerPlanContext context(layout.spec, batch, plan, shared, &recompute);
  for (auto& layer : layers) {
    context.set_layer(layer->index());
    layer->plan(context);
  }
  recompute.plan(plan);

  ActivationAccount account;
  const size_t boundary = 2 * static_cast<size_t>(T * H) * sizeof(bf16) + static_cast<size_t>(T) * sizeof(float);
  for (const auto& layer : layers) account.layers.push_back({layer->index(), layer->kind(), boundary, 0});
  for (const SavedActivationBytes& s : context.saved_bytes()) account.layers.at(static_cast<size_t>(s.layer)).bytes += s.bytes;
  for (LayerActivations& l : account.layers) l.recomputed = recompute.layer_bytes(l.layer);
  account.recompute_buffer_bytes = recompute.buffer_bytes();
  return account;
}

namespace {
// "0, 2, 4, ..., 30" (at most five indices written out).
std::string index_list(const std::vector<int>& indices) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices.size() > 5 && i == 3) {
      parts.push_back("...");
      i = indices.size() - 1;
    }
    parts.push_back(std::to_string(indices[i]));
  }
  return join(parts, ", ");
}
}  // namespace

std::vector<std::string> describe_activations(const ModelSpec& model, const ActivationAccount& account) {
  std::vector<std::string> lines;
  const RecomputeSpec& r = model.recompute;
  std::string head = strprintf("activations per microbatch: %zu stack layers, %s without recompute",
                               account.layers.size(), human_bytes(account.without_recompute()).c_str());
  if (r.on()) {
    head += strprintf("; recompute %s: %s (%s kept + %s recompute buffer)", describe_recompute(r).c_str(),
                      human_bytes(account.with_recompute()).c_str(),
                      human_bytes(account.with_recompute() - account.recompute_buffer_bytes).c_str(),
                      human_bytes(account.recompute_buffer_bytes).c_str());
  } else {
    head += "; recompute off";
  }
  lines.push_back(head);
  // Alike layers (same kind and bytes) on one line, in order of first appearance.
  std::vector<std::tuple<LayerKind, size_t, size_t>> keys;
  std::map<std::tuple<LayerKind, size_t, size_t>, std::vector<int>> groups;
  for (const LayerActivations& l : account.layers) {
    const auto key = std::make_tuple(l.kind, l.bytes, l.kept());
    if (groups.find(key) == groups.end()) keys.push_back(key);
    groups[key].push_back(l.layer);
  }
  for (const auto& key : keys) {
    const std::vector<int>& idx = groups[key];
    std::string line = strprintf("  %zu %s layer%s (%s): %s each", idx.size(), layer_kind_info(std::get<0>(key)).description,
                                 idx.size() == 1 ? "" : "s", index_list(idx).c_str(), human_bytes(std::get<1>(key)).c_str());
    if (r.on()) line += strprintf(", %s with recompute", human_bytes(std::get<2>(key)).c_str());
    lines.push_back(line);
  }
  return lines;
}

}  // namespace sg::model
