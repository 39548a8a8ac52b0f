#pragma once
// The CUDA-graph modes `stepgraph bench --compare` runs, one after the other on the same model and data:
//   --compare none,local,transformer_engine:attn,transformer_engine:attn+mlp,local+recompute_full
// Each entry is IMPL[:SCOPE[+SCOPE...]][+RECOMPUTE] with IMPL one of none, local, transformer_engine, SCOPE
// one of Megatron-Bridge's cuda_graph_scope values ('+' joins scopes because ',' separates modes) and
// RECOMPUTE an activation-recompute setting (bench/recompute_mode.h: recompute_full,
// recompute_selective=core_attn/mlp, ...; it starts with "recompute_", so it never reads as a scope). A mode
// always sets its scope explicitly ("local" = no scope = the whole iteration in stepgraph;
// "transformer_engine" = no scope = every module of every layer), so a recipe's own cuda_graph_scope
// never leaks into a compared mode. Only the spelling is checked here: whether a combination is
// allowed (local:attn, transformer_engine:full_iteration) is the validator's call, like any config.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/graph_flags.h"
#include "graph/scope_plan.h"
#include "bench/recompute_mode.h"

namespace sg::bench {

inline const std::vector<std::string>& graph_impl_names() { return config::cuda_graph_impl_names(); }
// Megatron-Bridge's VALID_CUDA_GRAPH_SCOPES (scripts/performance/argument_parser.py).
inline const std::vector<std::string>& graph_scope_names() { return config::cuda_graph_scope_names(); }

struct GraphMode {
  graph::GraphImpl impl = graph::GraphImpl::none;  // compared as the enum: a misspelt name does not compile
  std::vector<std::string> scope;  // as written, in order; empty: the impl's default
  std::optional<RecomputeMode> recompute;  // none: the recipe's (and overrides') recompute settings

  // "none", "local", "transformer_engine:attn+mlp", "local+recompute_full" (parse_graph_mode(label())
  // gives the mode back).
  std::string label() const;
  bool operator==(const GraphMode&) const = default;
};

// One entry. Throws config::ConfigError (a usage error, exit 2) for an unknown impl or scope (with the
// closest valid spelling), an empty scope between '+', a scope on impl none, or a recompute setting that
// is misspelt, not last, given twice or alone (bench/recompute_mode.h).
GraphMode parse_graph_mode(std::string_view text);

// The comma-separated list. Throws config::ConfigError for an empty list or entry, or a mode listed twice.
std::vector<GraphMode> parse_mode_list(std::string_view text);

}  // namespace sg::bench
