// Rule 16's recompute checks: Megatron's own asserts on the recompute keys, then what this model's layer
// kinds can recompute (model/recompute.h: each kind declares it). The graph interplay is rules 11-13
// (validate.cpp).
#include "config/model_config.h"
#include "config/validate.h"
#include "core/strings.h"
#include "model/recompute.h"

namespace sg::config::detail {

void check_recompute(const Config& config, std::vector<Violation>& violations, std::vector<Note>& notes) {
  const ModelConfig& m = config.model;
  const auto values = [&](const std::vector<std::string>& keys) {
    std::vector<KeyValue> out;
    for (const auto& key : keys) out.push_back({key, format_value(config, key)});
    return out;
  };
  using G = model::RecomputeGranularity;
  const std::optional<G> granularity = recompute_granularity(m);  // nullopt: unknown, reported by the shape checks
  if (granularity == G::full) {
    if (!m.recompute_method) {
      violations.push_back({16, "recompute_granularity full needs recompute_method (uniform or block)",
                            values({"model.recompute_granularity", "model.recompute_method"}),
                            "set model.recompute_method=uniform (every layer, in chunks of recompute_num_layers) "
                            "or block (only the first recompute_num_layers layers)"});
    }
    if (!m.recompute_num_layers) {
      violations.push_back({16, "recompute_granularity full needs recompute_num_layers",
                            values({"model.recompute_granularity", "model.recompute_num_layers"}),
                            strprintf("set model.recompute_num_layers between 1 and %lld (model.num_layers)",
                                      static_cast<long long>(m.num_layers))});
    }
  } else if (granularity == G::selective && m.recompute_num_layers) {
    violations.push_back({16, "recompute_num_layers applies only to full recompute; selective recompute takes "
                              "every layer's recompute_modules",
                          values({"model.recompute_granularity", "model.recompute_num_layers"}),
                          "unset model.recompute_num_layers (null), or use model.recompute_granularity=full"});
  } else if (granularity == G::none && (m.recompute_method || m.recompute_num_layers)) {
    notes.push_back({16, "recompute_method and recompute_num_layers apply only with recompute_granularity full",
                     values({"model.recompute_granularity", "model.recompute_method", "model.recompute_num_layers"})});
  }
  if (granularity != G::full && granularity != G::selective) return;
  for (const auto& name : m.recompute_modules) {
    if (!model::find_recompute_module(name)) return;  // an unknown name: reported by the shape checks
  }
  model::ModelSpec spec;
  try {
    spec = model_spec(config);
    for (const model::RecomputeProblem& p : model::check_recompute(spec)) {
      const std::vector<std::string> keys = {"model.recompute_granularity", "model.recompute_modules"};
      violations.push_back({16, p.message, values(keys), p.fix});
    }
  } catch (const Error&) {
    // an invalid stack: reported by the pattern and shape checks
  }
}

}  // namespace sg::config::detail
