#pragma once
// Which regions of the step get CUDA graphs, decided once from the config and the model's layer
// pattern. Pure CPU (unit-tested in CI). Megatron-Bridge semantics:
//   cuda_graph_impl none                 -> no graphs (scopes ignored)
//   cuda_graph_impl local                -> one graph of the whole iteration; cuda_graph_scope must be
//                                           [] or [full_iteration]
//   cuda_graph_impl transformer_engine   -> one graph per (layer, module, phase) region whose module is
//                                           in cuda_graph_scope (attn, mlp, moe, moe_router,
//                                           moe_preprocess, mamba); [] means every module the model
//                                           marks (whole layers). full_iteration is not allowed;
//                                           moe excludes moe_router; moe_preprocess needs moe_router.
// Scope -> region modules: attn->attn, mlp->mlp (dense MLP), moe->moe+moe_router+moe_preprocess
// (the whole MoE layer), moe_router->moe_router, moe_preprocess->moe_preprocess, mamba->mamba.
// The spellings, the scope -> module mapping and the impl/scope rules live here ONCE: config
// validation (src/config/validate.cpp) reports the same problems under its rule numbers.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/region.h"

namespace sg::graph {

enum class GraphImpl : uint8_t { none, local, transformer_engine };
enum class GraphScope : uint8_t { full_iteration, attn, mlp, moe, moe_router, moe_preprocess, mamba };

const char* graph_impl_name(GraphImpl impl);     // "none", "local", "transformer_engine"
const char* graph_scope_name(GraphScope scope);  // "full_iteration", "attn", ... (a module scope: module_name)
// Parse config spellings; throw sg::Error listing the valid values (and the closest one).
GraphImpl parse_graph_impl(std::string_view text);
GraphScope parse_graph_scope(std::string_view text);
std::vector<GraphScope> parse_graph_scopes(const std::vector<std::string>& texts);
// Every spelling the config accepts, in this order; nullopt for anything else.
std::vector<std::string> graph_impl_names();   // none, local, transformer_engine
std::vector<std::string> graph_scope_names();  // full_iteration, attn, mlp, moe, moe_router, ...
std::optional<GraphImpl> find_graph_impl(std::string_view text);
std::optional<GraphScope> find_graph_scope(std::string_view text);

// A broken rule of model.cuda_graph_impl / model.cuda_graph_scope: what is wrong and how to fix it.
enum class ScopeRule : uint8_t {
  unknown_impl,                    // not a known impl
  unknown_scope,                   // not a known scope
  full_iteration_not_alone,        // local: full_iteration with other scopes
  local_with_module_scopes,        // local: module scopes (local graphs the whole step)
  full_iteration_without_local,    // transformer_engine: full_iteration
  moe_with_moe_router,             // moe and moe_router together
  moe_preprocess_without_router,   // moe_preprocess needs moe_router
};
struct ScopeProblem {
  ScopeRule rule;
  std::string message;  // "full_iteration is only valid with cuda_graph_impl local"
  std::string fix;      // what to change
};
std::optional<ScopeProblem> check_graph_impl_name(std::string_view text);
std::optional<ScopeProblem> check_graph_scope_name(std::string_view text);
// Every rule `scopes` (known ones) break under `impl`, in the order above. impl none breaks none:
// Bridge ignores the scope when graphs are off.
std::vector<ScopeProblem> check_scope_rules(GraphImpl impl, const std::vector<GraphScope>& scopes);

// The regions one layer of the model marks, in step order (the model exposes this; graph/ never
// includes model/). Each layer of the stack is one kind, so a GPT block is two layers: attention {i, {attn}},
// then MLP {i + 1, {mlp}} or MoE {i + 1, {moe_router, moe_preprocess, moe}}; a Mamba layer: {i, {mamba}}.
// Every module has a forward and a backward region.
struct LayerRegions {
  int layer = 0;
  std::vector<Module> modules;
};

struct ScopePlan {
  GraphImpl impl = GraphImpl::none;
  std::vector<GraphScope> scopes;  // normalised: defaults filled in, duplicates removed
  bool full_iteration = false;     // impl local: the whole step is one graph
  std::vector<RegionKey> graphed_regions;  // scoped: forward regions in layer order, then backward
                                           // regions in reverse layer order (the order they run)
  int graphable_layers = 0;  // layers with at least one graphed region
  int total_layers = 0;
  int64_t num_microbatches = 1;  // the step's microbatches (plan_graph_scopes' argument)

  // Graphs the run will create: 1 (full iteration), graphed_regions.size() (scoped) or 0. With more
  // than one microbatch, each graphed backward region is captured twice (RegionKey::first_microbatch),
  // so scoped: graphed_regions.size() + the backward ones. The one count: describe() and the trainer's
  // start report both say it.
  int num_graphs() const;
  bool graphs_region(const RegionKey& key) const;
  // "transformer_engine [attn, mlp]: 24 region graphs (16 regions, the 8 backward ones twice: 2 microbatches),
  // 4 graphable layers of 4"; with one microbatch "...: 16 region graphs, 4 graphable layers of 4"
  std::string describe() const;
};

// Modules a scope covers (see the table above); empty for full_iteration.
std::vector<Module> scope_modules(GraphScope scope);

// `num_microbatches` (>= 1): the step's microbatches; with more than one the step runs each backward region
// in two variants (RegionKey::first_microbatch), and a graphed one is two graphs. A step that keys no
// first-microbatch variant (a test's toy step) plans as 1.
// Throws sg::Error naming the rule, the values and the fix for an invalid impl/scope combination,
// or for a layer list with duplicate layer indices.
ScopePlan plan_graph_scopes(GraphImpl impl, const std::vector<GraphScope>& scopes,
                            const std::vector<LayerRegions>& layers, int64_t num_microbatches);

// "3 eager warmup steps, capture at step 4, replay after (...)": model.cuda_graph_warmup_steps as the plan
// and the logs state it. The steps count from where this run starts, so a resumed run warms up again.
std::string describe_warmup(int warmup_steps);

}  // namespace sg::graph
