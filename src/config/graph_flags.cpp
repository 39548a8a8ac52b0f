#include "config/graph_flags.h"

#include <algorithm>

#include "core/strings.h"

namespace sg::config {
namespace {

bool contains(const std::vector<std::string>& values, const std::string& value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string close = closest_match(word, candidates);
  return close.empty() ? std::string() : " (did you mean '" + close + "'?)";
}

}  // namespace

const std::vector<std::string>& cuda_graph_impl_names() {
  static const std::vector<std::string> names = {"none", "local", "transformer_engine"};
  return names;
}

const std::vector<std::string>& cuda_graph_scope_names() {
  static const std::vector<std::string> names = {"full_iteration", "attn",           "mlp",  "moe",
                                                 "moe_router",     "moe_preprocess", "mamba"};
  return names;
}

void apply_cuda_graph_overrides(Config& config, const CudaGraphFlags& flags) {
  if (flags.impl) {
    config.model.cuda_graph_impl = *flags.impl;
    if (*flags.impl != "none") {
      config.model.use_te_rng_tracker = true;
      config.rng.te_rng_tracker = true;
    }
  }
  if (config.model.cuda_graph_impl == "none") {
    // Bridge: no graphs -> no graph-safe RNG tracker, and the scope flag is not applied.
    config.model.use_te_rng_tracker = false;
    config.rng.te_rng_tracker = false;
    return;
  }
  if (flags.scope) config.model.cuda_graph_scope = *flags.scope;
  const std::vector<std::string>& scope = config.model.cuda_graph_scope;
  const bool full_iteration = config.model.cuda_graph_impl == "local" &&
                              (scope.empty() || scope == std::vector<std::string>{"full_iteration"});
  if (full_iteration) config.rerun_state_machine.check_for_nan_in_loss = false;
}

std::vector<std::string> parse_scope_flag(const std::string& text) {
  std::vector<std::string> scopes;
  for (const std::string& raw : split(text, ',')) {
    const std::string scope = trim(raw);
    if (!contains(cuda_graph_scope_names(), scope)) {
      throw ConfigError("--cuda_graph_scope: unknown scope '" + scope + "'" +
                        did_you_mean(scope, cuda_graph_scope_names()) + "; use a comma-separated list of " +
                        join(cuda_graph_scope_names(), ", "));
    }
    scopes.push_back(scope);
  }
  return scopes;
}

void check_impl_flag(const std::string& impl) {
  if (!contains(cuda_graph_impl_names(), impl)) {
    throw ConfigError("--cuda_graph_impl " + impl + " is not valid" + did_you_mean(impl, cuda_graph_impl_names()) +
                      "; use one of " + join(cuda_graph_impl_names(), ", "));
  }
}

}  // namespace sg::config
