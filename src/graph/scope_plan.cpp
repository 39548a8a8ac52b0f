#include "graph/scope_plan.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "core/strings.h"

namespace sg::graph {

namespace {

constexpr GraphImpl kImpls[] = {GraphImpl::none, GraphImpl::local, GraphImpl::transformer_engine};

// Every scope in config order, with the module it is named after: a module scope is spelled as its module
// (region.h's module_name), so the names live in one table; full_iteration names no module.
struct ScopeEntry {
  GraphScope scope;
  std::optional<Module> namesake;
};
constexpr ScopeEntry kScopes[] = {
    {.scope = GraphScope::full_iteration, .namesake = std::nullopt},
    {.scope = GraphScope::attn, .namesake = Module::attn},
    {.scope = GraphScope::mlp, .namesake = Module::mlp},
    {.scope = GraphScope::moe, .namesake = Module::moe},
    {.scope = GraphScope::moe_router, .namesake = Module::moe_router},
    {.scope = GraphScope::moe_preprocess, .namesake = Module::moe_preprocess},
    {.scope = GraphScope::mamba, .namesake = Module::mamba},
};

bool contains(const std::vector<GraphScope>& v, GraphScope s) { return std::find(v.begin(), v.end(), s) != v.end(); }

std::string scope_list(const std::vector<GraphScope>& scopes) {
  std::vector<std::string> names;
  for (GraphScope s : scopes) names.emplace_back(graph_scope_name(s));
  std::string out = "[";  // appended piecewise: "[" + ... trips a GCC 12 -Wrestrict false positive
  out += join(names, ", ");
  out += "]";
  return out;
}

}  // namespace

const char* graph_impl_name(GraphImpl impl) {
  switch (impl) {
    case GraphImpl::none: return "none";
    case GraphImpl::local: return "local";
    case GraphImpl::transformer_engine: return "transformer_engine";
  }
  return "?";
}

const char* graph_scope_name(GraphScope scope) {
  for (const ScopeEntry& e : kScopes) {
    if (e.scope == scope) return e.namesake ? module_name(*e.namesake) : "full_iteration";
  }
  return "?";
}

std::vector<std::string> graph_impl_names() {
  std::vector<std::string> names;
  for (GraphImpl i : kImpls) names.emplace_back(graph_impl_name(i));
  return names;
}

std::vector<std::string> graph_scope_names() {
  std::vector<std::string> names;
  for (const ScopeEntry& e : kScopes) names.emplace_back(graph_scope_name(e.scope));
  return names;
}

std::optional<GraphImpl> find_graph_impl(std::string_view text) {
  for (GraphImpl i : kImpls) {
    if (text == graph_impl_name(i)) return i;
  }
  return std::nullopt;
}

std::optional<GraphScope> find_graph_scope(std::string_view text) {
  for (const ScopeEntry& e : kScopes) {
    if (text == graph_scope_name(e.scope)) return e.scope;
  }
  return std::nullopt;
}

namespace {
ScopeProblem unknown(ScopeRule rule, const char* key, std::string_view text, const std::vector<std::string>& names) {
  const std::string near = closest_match(text, names);
  return ScopeProblem{rule,
                      strprintf("unknown %s '%.*s'", key, static_cast<int>(text.size()), text.data()),
                      "use one of: " + join(names, ", ") +
                          (near.empty() ? std::string() : "; did you mean '" + near + "'?")};
}

std::string module_scopes(const std::vector<GraphScope>& scopes) {
  std::vector<std::string> names;
  for (GraphScope s : scopes) {
    if (s != GraphScope::full_iteration) names.emplace_back(graph_scope_name(s));
  }
  return join(names, ",");
}
}  // namespace

std::optional<ScopeProblem> check_graph_impl_name(std::string_view text) {
  if (find_graph_impl(text)) return std::nullopt;
  return unknown(ScopeRule::unknown_impl, "model.cuda_graph_impl", text, graph_impl_names());
}

std::optional<ScopeProblem> check_graph_scope_name(std::string_view text) {
  if (find_graph_scope(text)) return std::nullopt;
  return unknown(ScopeRule::unknown_scope, "model.cuda_graph_scope value", text, graph_scope_names());
}

std::vector<ScopeProblem> check_scope_rules(GraphImpl impl, const std::vector<GraphScope>& scopes) {
  std::vector<ScopeProblem> out;
  if (impl == GraphImpl::none) return out;
  const bool full = contains(scopes, GraphScope::full_iteration);
  const bool modules = std::any_of(scopes.begin(), scopes.end(), [](GraphScope s) {
    return s != GraphScope::full_iteration;
  });
  if (impl == GraphImpl::local && full && modules) {
    out.push_back({ScopeRule::full_iteration_not_alone, "full_iteration must be the only scope",
                   "use model.cuda_graph_scope=full_iteration (the whole step as one graph), or "
                   "model.cuda_graph_impl=transformer_engine with the module scopes alone"});
  } else if (impl == GraphImpl::local && modules) {
    out.push_back({ScopeRule::local_with_module_scopes, "cuda_graph_impl local accepts only full_iteration",
                   "use model.cuda_graph_scope=full_iteration for a whole-step graph, or "
                   "model.cuda_graph_impl=transformer_engine for per-module graphs of " +
                       module_scopes(scopes)});
  }
  if (impl == GraphImpl::transformer_engine && full) {
    out.push_back({ScopeRule::full_iteration_without_local, "full_iteration is only valid with cuda_graph_impl local",
                   "for a whole-step graph use model.cuda_graph_impl=local model.cuda_graph_scope=full_iteration; "
                   "for per-module graphs remove full_iteration from model.cuda_graph_scope"});
  }
  if (contains(scopes, GraphScope::moe) && contains(scopes, GraphScope::moe_router)) {
    out.push_back({ScopeRule::moe_with_moe_router, "moe and moe_router are mutually exclusive",
                   "graph the whole MoE layer with moe or only its router with "
                   "moe_router,moe_preprocess, not both"});
  }
  if (contains(scopes, GraphScope::moe_preprocess) && !contains(scopes, GraphScope::moe_router)) {
    out.push_back({ScopeRule::moe_preprocess_without_router, "moe_preprocess requires moe_router",
                   "add moe_router to model.cuda_graph_scope, or remove moe_preprocess"});
  }
  return out;
}

GraphImpl parse_graph_impl(std::string_view text) {
  if (const auto problem = check_graph_impl_name(text)) throw Error(problem->message + ": " + problem->fix);
  return *find_graph_impl(text);
}

GraphScope parse_graph_scope(std::string_view text) {
  if (const auto problem = check_graph_scope_name(text)) throw Error(problem->message + ": " + problem->fix);
  return *find_graph_scope(text);
}

std::vector<GraphScope> parse_graph_scopes(const std::vector<std::string>& texts) {
  std::vector<GraphScope> out;
  for (const auto& t : texts) out.push_back(parse_graph_scope(trim(t)));
  return out;
}

std::vector<Module> scope_modules(GraphScope scope) {
  switch (scope) {
    case GraphScope::full_iteration: return {};
    case GraphScope::attn: return {Module::attn};
    case GraphScope::mlp: return {Module::mlp};
    case GraphScope::moe: return {Module::moe, Module::moe_router, Module::moe_preprocess};
    case GraphScope::moe_router: return {Module::moe_router};
    case GraphScope::moe_preprocess: return {Module::moe_preprocess};
    case GraphScope::mamba: return {Module::mamba};
  }
  return {};
}

int ScopePlan::num_graphs() const {
  if (full_iteration) return 1;
  const auto backward = std::count_if(graphed_regions.begin(), graphed_regions.end(),
                                      [](const RegionKey& k) { return k.phase == Phase::backward; });
  return static_cast<int>(graphed_regions.size()) + (num_microbatches > 1 ? static_cast<int>(backward) : 0);
}

bool ScopePlan::graphs_region(const RegionKey& key) const {
  return std::find(graphed_regions.begin(), graphed_regions.end(), key) != graphed_regions.end();
}

std::string ScopePlan::describe() const {
  if (impl == GraphImpl::none) return "cuda graphs off (cuda_graph_impl none)";
  if (full_iteration) {
    return strprintf("%s [full_iteration]: 1 graph of the whole step (%d layers)", graph_impl_name(impl),
                     total_layers);
  }
  const int regions = static_cast<int>(graphed_regions.size());
  const std::string variants = num_graphs() > regions
                                   ? strprintf(" (%d regions, the %d backward ones twice: %lld microbatches)", regions,
                                               num_graphs() - regions, static_cast<long long>(num_microbatches))
                                   : std::string();
  return strprintf("%s %s: %d region graphs%s, %d graphable layers of %d", graph_impl_name(impl),
                   scope_list(scopes).c_str(), num_graphs(), variants.c_str(), graphable_layers, total_layers);
}

ScopePlan plan_graph_scopes(GraphImpl impl, const std::vector<GraphScope>& scopes,
                            const std::vector<LayerRegions>& layers, int64_t num_microbatches) {
  SG_CHECK(num_microbatches >= 1,
           strprintf("graph scope planning: %lld microbatches (at least 1)", static_cast<long long>(num_microbatches)));
  ScopePlan plan;
  plan.impl = impl;
  plan.total_layers = static_cast<int>(layers.size());
  plan.num_microbatches = num_microbatches;
  {
    std::set<int> seen;
    for (const auto& l : layers) {
      SG_CHECK(seen.insert(l.layer).second,
               strprintf("graph scope planning: layer %d is listed twice in the model's layer pattern", l.layer));
    }
  }
  // Normalise: drop duplicates, keep the user's order.
  for (GraphScope s : scopes) {
    if (!contains(plan.scopes, s)) plan.scopes.push_back(s);
  }

  if (impl == GraphImpl::none) {
    plan.scopes.clear();  // Bridge ignores the scope when graphs are off
    return plan;
  }

  const std::vector<ScopeProblem> problems = check_scope_rules(impl, plan.scopes);
  if (!problems.empty()) {
    throw Error(strprintf("model.cuda_graph_impl %s, model.cuda_graph_scope %s: %s; fix: %s", graph_impl_name(impl),
                          scope_list(plan.scopes).c_str(), problems.front().message.c_str(),
                          problems.front().fix.c_str()));
  }
  if (impl == GraphImpl::local) {
    plan.scopes = {GraphScope::full_iteration};
    plan.full_iteration = true;
    plan.graphable_layers = plan.total_layers;  // the whole step's graph holds every layer
    return plan;
  }

  std::vector<Module> graphed_modules;
  if (plan.scopes.empty()) {
    // Whole layers: every module the model marks.
    for (const auto& l : layers) {
      for (Module m : l.modules) {
        if (std::find(graphed_modules.begin(), graphed_modules.end(), m) == graphed_modules.end()) {
          graphed_modules.push_back(m);
        }
      }
    }
  } else {
    for (GraphScope s : plan.scopes) {
      for (Module m : scope_modules(s)) graphed_modules.push_back(m);
    }
  }
  auto graphed = [&](Module m) {
    return std::find(graphed_modules.begin(), graphed_modules.end(), m) != graphed_modules.end();
  };

  // Run order: forward through the layers, then backward in reverse (modules reversed within a layer).
  for (const auto& l : layers) {
    bool any = false;
    for (Module m : l.modules) {
      if (!graphed(m)) continue;
      plan.graphed_regions.push_back(RegionKey{l.layer, m, Phase::forward});
      any = true;
    }
    plan.graphable_layers += any ? 1 : 0;
  }
  for (auto l = layers.rbegin(); l != layers.rend(); ++l) {
    for (auto m = l->modules.rbegin(); m != l->modules.rend(); ++m) {
      if (graphed(*m)) plan.graphed_regions.push_back(RegionKey{l->layer, *m, Phase::backward});
    }
  }
  return plan;
}

std::string describe_warmup(int warmup_steps) {
  return strprintf("%d eager warmup step%s, capture at step %d, replay after (counted from where the run starts: a "
                   "resumed run warms up again)",
                   warmup_steps, warmup_steps == 1 ? "" : "s", warmup_steps + 1);
}

}  // namespace sg::graph
