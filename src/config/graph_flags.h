#pragma once
// The CUDA-graph flags of Megatron-Bridge's scripts/performance/run_script.py (--cuda_graph_impl,
// --cuda_graph_scope) and their side effects on the config — ONE rule, shared by `stepgraph bench` and
// `stepgraph train --cuda_graph_impl/--cuda_graph_scope`, following Bridge's _set_cuda_graph_overrides:
//   * an impl sets model.cuda_graph_impl; any impl other than none turns model.use_te_rng_tracker and
//     rng.te_rng_tracker on. When the resulting impl is none both trackers are turned off; with an
//     explicit impl none the scope flag is ignored (Bridge returns early there).
//   * a scope sets model.cuda_graph_scope. A scope flag without an impl flag on a config whose impl is
//     none is a ConfigError naming the fix (Bridge drops it silently, and the run would be eager).
//   * Bridge also turns rerun_state_machine.check_for_nan_in_loss off for a full-iteration graph (its
//     check reads the loss on the host). stepgraph does not: its NaN/Inf flags are computed inside the
//     graph and read after it (rule 5 is a note), so the check stays as configured and a non-finite
//     run still stops (docs/configuration.md, "Deviations from Megatron-Bridge").
// Whatever the result, validate() judges it afterwards: an invalid combination is refused there.
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace sg::config {

// Bridge's VALID_CUDA_GRAPH_IMPLS and VALID_CUDA_GRAPH_SCOPES (scripts/performance/argument_parser.py).
const std::vector<std::string>& cuda_graph_impl_names();
const std::vector<std::string>& cuda_graph_scope_names();

struct CudaGraphFlags {
  std::optional<std::string> impl;
  std::optional<std::vector<std::string>> scope;
};

// ConfigError for a scope flag that would be dropped (no impl flag, and the config's impl is none).
void apply_cuda_graph_overrides(Config& config, const CudaGraphFlags& flags);

// "full_iteration, attn, mlp, ...": the scope flag's values, for help texts.
std::string cuda_graph_scope_list();

// --cuda_graph_scope "attn,mlp" -> {"attn", "mlp"}; ConfigError for an unknown scope.
std::vector<std::string> parse_scope_flag(const std::string& text);
// --cuda_graph_impl: ConfigError for an unknown impl (with the closest one).
void check_impl_flag(const std::string& impl);

}  // namespace sg::config
