#include "model/recompute.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "model/layer_registry.h"
#include "model/stack.h"

namespace sg::model {

const std::vector<RecomputeModuleInfo>& recompute_modules() {
  using K = LayerKind;
  using M = RecomputeModule;
  static const std::vector<RecomputeModuleInfo> modules = {
      {M::core_attn, "core_attn", K::attention, false, "the attention kernel's output and softmax statistics"},
      {M::mlp, "mlp", K::mlp, false, "the dense MLP's activations"},
      {M::layernorm, "layernorm", std::nullopt, true, "every layer's pre-norm output"},
      {M::moe_act, "moe_act", K::moe, false, "the experts' activation function"},
      {M::moe, "moe", K::moe, false, "the whole MoE layer"},
      {M::shared_experts, "shared_experts", K::moe, false, "the shared experts"},
      {M::mamba, "mamba", K::mamba, false, "the Mamba mixer"},
      {M::mla_up_proj, "mla_up_proj", std::nullopt, false, "multi-latent attention's up-projections"},
  };
  return modules;
}

const RecomputeModuleInfo& recompute_module_info(RecomputeModule module) {
  return recompute_modules().at(static_cast<size_t>(module));
}
const char* recompute_module_name(RecomputeModule module) { return recompute_module_info(module).name; }

std::optional<RecomputeModule> find_recompute_module(std::string_view name) {
  for (const RecomputeModuleInfo& m : recompute_modules()) {
    if (name == m.name) return m.module;
  }
  return std::nullopt;
}

std::vector<std::string> recompute_module_names() {
  std::vector<std::string> names;
  for (const RecomputeModuleInfo& m : recompute_modules()) names.push_back(m.name);
  return names;
}

namespace {
bool declares(LayerKind kind, RecomputeModule module) {
  const std::vector<RecomputeModule> m = layer_kind_recompute(kind).modules;
  return std::find(m.begin(), m.end(), module) != m.end();
}
}  // namespace

std::vector<RecomputeProblem> check_recompute(const ModelSpec& spec) {
  const RecomputeSpec& r = spec.recompute;
  std::vector<RecomputeProblem> out;
  if (!r.on()) return out;
  const std::vector<LayerKind> kinds = stack_layer_kinds(spec);
  const auto has_kind = [&](LayerKind k) { return std::find(kinds.begin(), kinds.end(), k) != kinds.end(); };
  if (r.granularity == RecomputeGranularity::full) {
    std::vector<LayerKind> seen;
    for (LayerKind k : kinds) {
      if (std::find(seen.begin(), seen.end(), k) != seen.end()) continue;
      seen.push_back(k);
      if (!layer_kind_implemented(k) || layer_kind_recompute(k).full) continue;  // missing kinds: noted elsewhere
      out.push_back({strprintf("full recompute needs every layer kind to rerun its forward, and the %s layer kind "
                               "does not declare it (model/layer_registry.h)",
                               layer_kind_info(k).description),
                     "use model.recompute_granularity=selective, or null"});
    }
    return out;
  }
  for (RecomputeModule module : r.modules) {
    const RecomputeModuleInfo& info = recompute_module_info(module);
    if (info.step) continue;  // layernorm: the step's pre-norms, every model has them
    if (!info.kind) {
      out.push_back({strprintf("recompute_modules %s: no layer kind here has %s", info.name, info.what),
                     strprintf("remove %s from model.recompute_modules", info.name)});
      continue;
    }
    const LayerKind kind = *info.kind;
    if (!layer_kind_implemented(kind)) {
      out.push_back({strprintf("recompute_modules %s recomputes %s, and %s", info.name, info.what,
                               layer_kind_missing_message(kind).c_str()),
                     strprintf("remove %s from model.recompute_modules", info.name)});
    } else if (!declares(kind, module)) {
      out.push_back({strprintf("recompute_modules %s: the %s layer kind does not declare that it can recompute %s "
                               "(model/layer_registry.h)",
                               info.name, layer_kind_info(kind).description, info.what),
                     strprintf("remove %s from model.recompute_modules", info.name)});
    } else if (!has_kind(kind)) {
      out.push_back({strprintf("recompute_modules %s recomputes %s, and this model has no %s layers (%c in the "
                               "pattern; its layers: %s)",
                               info.name, info.what, layer_kind_info(kind).description, layer_kind_info(kind).letter,
                               compact_layer_pattern(kinds).c_str()),
                     strprintf("remove %s from model.recompute_modules", info.name)});
    } else if (module == RecomputeModule::shared_experts && spec.moe.shared_expert_intermediate_size <= 0) {
      out.push_back({"recompute_modules shared_experts: this MoE model has no shared expert "
                     "(model.moe_shared_expert_intermediate_size is not set)",
                     "remove shared_experts from model.recompute_modules, or set "
                     "model.moe_shared_expert_intermediate_size"});
    }
  }
  return out;
}

std::string describe_recompute(const RecomputeSpec& spec) {
  switch (spec.granularity) {
    case RecomputeGranularity::none: return "off";
    case RecomputeGranularity::selective: {
      std::vector<std::string> names;
      for (RecomputeModule m : spec.modules) names.push_back(recompute_module_name(m));
      return "selective (" + join(names, ", ") + ")";
    }
    case RecomputeGranularity::full: {
      const long long k = static_cast<long long>(spec.num_layers);
      // Megatron counts model.num_layers' layers: a GPT block (attention and MLP, two stack layers) is one.
      if (spec.method == RecomputeMethod::uniform) {
        return strprintf("full, uniform: every layer, in chunks of %lld model layer%s", k, k == 1 ? "" : "s");
      }
      return strprintf("full, block: the first %lld model layer%s", k, k == 1 ? "" : "s");
    }
  }
  return "?";
}

}  // namespace sg::model
