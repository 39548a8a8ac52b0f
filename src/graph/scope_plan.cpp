#include "graph/scope_plan.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "core/strings.h"

namespace sg::graph {

namespace {

constexpr GraphImpl kImpls[] = {GraphImpl::none, GraphImpl::local, GraphImpl::transformer_engine};
constexpr GraphScope kScopes[] = {GraphScope::full_iteration, GraphScope::attn,       GraphScope::mlp,
                                  GraphScope::moe,            GraphScope::moe_router, GraphScope::moe_preprocess,
                                  GraphScope::mamba};

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
  switch (scope) {
    case GraphScope::full_iteration: return "full_iteration";
    case GraphScope::attn: return "attn";
    case GraphScope::mlp: return "mlp";
    case GraphScope::moe: return "moe";
    case GraphScope::moe_router: return "moe_router";
    case GraphScope::moe_preprocess: return "moe_preprocess";
    case GraphScope::mamba: return "mamba";
  }
  return "?";
}

GraphImpl parse_graph_impl(std::string_view text) {
  std::vector<std::string> names;
  for (GraphImpl i : kImpls) {
    if (text == graph_impl_name(i)) return i;
    names.emplace_back(graph_impl_name(i));
  }
  const std::string near = closest_match(text, names);
  throw Error(strprintf("model.cuda_graph_impl: '%.*s' is not one of %s%s", static_cast<int>(text.size()),
                        text.data(), join(names, ", ").c_str(),
                        near.empty() ? "" : strprintf("; did you mean '%s'?", near.c_str()).c_str()));
}

GraphScope parse_graph_scope(std::string_view text) {
  std::vector<std::string> names;
  for (GraphScope s : kScopes) {
    if (text == graph_scope_name(s)) return s;
    names.emplace_back(graph_scope_name(s));
  }
  const std::string near = closest_match(text, names);
  throw Error(strprintf("model.cuda_graph_scope: '%.*s' is not one of %s%s", static_cast<int>(text.size()),
                        text.data(), join(names, ", ").c_str(),
                        near.empty() ? "" : strprintf("; did you mean '%s'?", near.c_str()).c_str()));
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
  return static_cast<int>(graphed_regions.size());
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
  return strprintf("%s %s: %d region graphs, %d graphable layers of %d", graph_impl_name(impl),
                   scope_list(scopes).c_str(), num_graphs(), graphable_layers, total_layers);
}

ScopePlan plan_graph_scopes(GraphImpl impl, const std::vector<GraphScope>& scopes,
                            const std::vector<LayerRegions>& layers) {
  ScopePlan plan;
  plan.impl = impl;
  plan.total_layers = static_cast<int>(layers.size());
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

  if (impl == GraphImpl::local) {
    const bool ok = plan.scopes.empty() ||
                    (plan.scopes.size() == 1 && plan.scopes[0] == GraphScope::full_iteration);
    SG_CHECK(ok, strprintf("model.cuda_graph_scope %s is not allowed with model.cuda_graph_impl local: local "
                           "captures the whole iteration, so the scope must be [full_iteration] (or empty). "
                           "For per-module graphs set model.cuda_graph_impl: transformer_engine.",
                           scope_list(plan.scopes).c_str()));
    plan.scopes = {GraphScope::full_iteration};
    plan.full_iteration = true;
    plan.graphable_layers = plan.total_layers;  // the whole step's graph holds every layer
    return plan;
  }

  // transformer_engine: per-region graphs.
  SG_CHECK(!contains(plan.scopes, GraphScope::full_iteration),
           strprintf("model.cuda_graph_scope %s: full_iteration is not allowed with cuda_graph_impl "
                     "transformer_engine (it graphs modules). Use cuda_graph_impl local for a whole-step graph.",
                     scope_list(plan.scopes).c_str()));
  SG_CHECK(!(contains(plan.scopes, GraphScope::moe) && contains(plan.scopes, GraphScope::moe_router)),
           strprintf("model.cuda_graph_scope %s: moe and moe_router cannot both be set (moe already graphs "
                     "the router); keep one",
                     scope_list(plan.scopes).c_str()));
  SG_CHECK(!contains(plan.scopes, GraphScope::moe_preprocess) || contains(plan.scopes, GraphScope::moe_router),
           strprintf("model.cuda_graph_scope %s: moe_preprocess requires moe_router (the preprocess graph "
                     "follows the router graph); add moe_router",
                     scope_list(plan.scopes).c_str()));

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

}  // namespace sg::graph
