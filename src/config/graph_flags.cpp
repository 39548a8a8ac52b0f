#include "config/graph_flags.h"

#include <algorithm>

#include "config/graph_keys.h"
#include "core/strings.h"
#include "graph/scope_plan.h"

namespace sg::config {
namespace {

// "--cuda_graph_scope: unknown scope 'mpl' (did you mean 'mlp'?); use ..." with the flag's valid values.
ConfigError unknown(const std::string& what, const std::string& value, const std::vector<std::string>& valid,
                    const std::string& use) {
  const std::string close = closest_match(value, valid);
  return ConfigError(what + " '" + value + "'" + (close.empty() ? "" : " (did you mean '" + close + "'?)") + "; " +
                     use + " " + join(valid, ", "));
}

}  // namespace

// The graph layer's spellings (graph/scope_plan.h), written once.
const std::vector<std::string>& cuda_graph_impl_names() {
  static const std::vector<std::string> names = graph::graph_impl_names();
  return names;
}

const std::vector<std::string>& cuda_graph_scope_names() {
  static const std::vector<std::string> names = graph::graph_scope_names();
  return names;
}

void apply_cuda_graph_overrides(Config& config, const CudaGraphFlags& flags) {
  if (flags.impl) {
    config.model.cuda_graph_impl = *flags.impl;
    if (*flags.impl != graph::graph_impl_name(graph::GraphImpl::none)) {
      config.model.use_te_rng_tracker = true;
      config.rng.te_rng_tracker = true;
    }
  }
  if (graph_impl_is(config.model, graph::GraphImpl::none)) {
    if (flags.scope && !flags.impl) {
      // Bridge drops the scope here; stepgraph refuses, since the run would silently be eager.
      const std::string scope = join(*flags.scope, ",");
      throw ConfigError("--cuda_graph_scope " + scope +
                        " needs CUDA graphs, and model.cuda_graph_impl is none, so the scope would be dropped: "
                        "add --cuda_graph_impl transformer_engine (module scopes) or --cuda_graph_impl local "
                        "(full_iteration), or drop --cuda_graph_scope");
    }
    // Bridge: no graphs -> no graph-safe RNG tracker, and the scope flag is not applied.
    config.model.use_te_rng_tracker = false;
    config.rng.te_rng_tracker = false;
    return;
  }
  if (flags.scope) config.model.cuda_graph_scope = *flags.scope;
}

std::string cuda_graph_scope_list() {
  return join(cuda_graph_scope_names(), ", ");
}

std::vector<std::string> parse_scope_flag(const std::string& text) {
  std::vector<std::string> scopes;
  for (const std::string& raw : split(text, ',')) {
    const std::string scope = trim(raw);
    const auto& names = cuda_graph_scope_names();
    if (std::find(names.begin(), names.end(), scope) == names.end()) {
      throw unknown("--cuda_graph_scope: unknown scope", scope, names, "use a comma-separated list of");
    }
    scopes.push_back(scope);
  }
  return scopes;
}

void check_impl_flag(const std::string& impl) {
  const auto& names = cuda_graph_impl_names();
  if (std::find(names.begin(), names.end(), impl) == names.end()) {
    throw unknown("--cuda_graph_impl: not a valid implementation:", impl, names, "use one of");
  }
}

}  // namespace sg::config
