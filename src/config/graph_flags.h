#pragma once
// The CUDA-graph flags of Megatron-Bridge's scripts/performance/run_script.py (--cuda_graph_impl,
// --cuda_graph_scope) and their side effects on the config — ONE rule, shared by `stepgraph bench` and
// `stepgraph train --cuda_graph_impl/--cuda_graph_scope`, following Bridge's _set_cuda_graph_overrides:
//   * an impl sets model.cuda_graph_impl; any impl other than none turns model.use_te_rng_tracker and
//     rng.te_rng_tracker on. When the resulting impl is none both trackers are turned off and the
//     scope flag is ignored (Bridge returns early there).
//   * a scope sets model.cuda_graph_scope.
//   * a full-iteration graph turns rerun_state_machine.check_for_nan_in_loss off, as Bridge does, so a
//     pasted command line means the same config (stepgraph could keep it: its NaN flags are read after
//     the graph, rule 5 is a note; ddp.check_for_nan_in_grad stays as configured and still stops a
//     non-finite run). In stepgraph that is impl local with scope [full_iteration] or no scope
//     (validate reads local + no scope as full_iteration, rule 4).
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

void apply_cuda_graph_overrides(Config& config, const CudaGraphFlags& flags);

// --cuda_graph_scope "attn,mlp" -> {"attn", "mlp"}; ConfigError for an unknown scope.
std::vector<std::string> parse_scope_flag(const std::string& text);
// --cuda_graph_impl: ConfigError for an unknown impl (with the closest one).
void check_impl_flag(const std::string& impl);

}  // namespace sg::config
