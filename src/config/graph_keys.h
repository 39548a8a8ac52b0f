#pragma once
// model.cuda_graph_impl and model.cuda_graph_scope are strings in the config, as YAML and Bridge spell them. Code
// asks about them with the graph layer's enums (graph/scope_plan.h), so a misspelt name is a compile error rather
// than a comparison that is never true.
#include <algorithm>

#include "config/config.h"
#include "graph/scope_plan.h"

namespace sg::config {

inline bool graph_impl_is(const ModelConfig& model, graph::GraphImpl impl) {
  return model.cuda_graph_impl == graph::graph_impl_name(impl);
}

inline bool graph_scope_listed(const ModelConfig& model, graph::GraphScope scope) {
  const std::vector<std::string>& scopes = model.cuda_graph_scope;
  return std::find(scopes.begin(), scopes.end(), graph::graph_scope_name(scope)) != scopes.end();
}

}  // namespace sg::config
