// Megatron's CUDA-graph spellings since its CUDA-graph refactor (Megatron-LM e41b370, 2026-05), read as stepgraph's
// before rules 1 and 4 look at the keys: cuda_graph_impl full_iteration is local with cuda_graph_scope
// [full_iteration], and the scope "full" (deprecated there) is the empty list. (cuda_graph_modules, the scope's new
// name, is an alias in config_yaml.cpp.)
#include <algorithm>

#include "config/validate.h"
#include "graph/scope_plan.h"

namespace sg::config::detail {

void read_megatron_graph_spellings(Config& config, std::vector<Violation>& violations, std::vector<Note>& notes) {
  const std::vector<std::string> keys = {"model.cuda_graph_impl", "model.cuda_graph_scope"};
  std::vector<std::string>& scope = config.model.cuda_graph_scope;
  const std::string full_iteration = graph::graph_scope_name(graph::GraphScope::full_iteration);
  if (std::find(scope.begin(), scope.end(), "full") != scope.end()) {
    if (scope.size() == 1) {
      scope.clear();
      notes.push_back({1, "cuda_graph_scope full (Megatron's deprecated spelling of the whole layer) is the empty list",
                       key_values(config, keys)});
    } else {
      violations.push_back({1, "cuda_graph_scope full (the whole layer) is given with other entries",
                            key_values(config, keys),
                            "use model.cuda_graph_scope=full alone, or the modules to graph (attn, mlp, ...)"});
      scope.erase(std::remove(scope.begin(), scope.end(), "full"), scope.end());  // reported once, here
    }
  }
  if (config.model.cuda_graph_impl != full_iteration) return;
  if (!scope.empty() && scope != std::vector<std::string>{full_iteration}) {
    violations.push_back({4,
                          "cuda_graph_impl full_iteration graphs the whole iteration, so cuda_graph_scope must be "
                          "empty (as Megatron requires)",
                          key_values(config, keys),
                          "drop model.cuda_graph_scope, or use model.cuda_graph_impl=transformer_engine for "
                          "per-module graphs"});
    return;
  }
  config.model.cuda_graph_impl = graph::graph_impl_name(graph::GraphImpl::local);
  scope = {full_iteration};
  notes.push_back({4,
                   "cuda_graph_impl full_iteration (Megatron's spelling since its CUDA-graph refactor) is local with "
                   "cuda_graph_scope full_iteration: the whole step as one graph, its optimizer update included",
                   key_values(config, keys)});
}

}  // namespace sg::config::detail
