#pragma once
// The storage dtypes of the Adam moments (optimizer.exp_avg_dtype, optimizer.exp_avg_sq_dtype), named as
// Megatron's --exp-avg-dtype / --exp-avg-sq-dtype name them. Validation and the backend both read this
// table, so a name is accepted exactly where it runs. Bridge's spellings of the same dtypes (torch.float32,
// bfloat16, ...) are read as these names by validation (read_bridge_moment_dtypes), so they print and hash as them.
#include <optional>
#include <string>
#include <vector>

#include "kernels/float_buffer.h"

namespace sg::config {

struct OptimizerConfig;
struct Note;

// The names stepgraph stores moments in (Megatron also has fp16 and fp8; stepgraph has not).
const std::vector<std::string>& moment_dtype_names();

// nullopt: not a name in moment_dtype_names().
std::optional<kernels::FloatDtype> moment_dtype_named(const std::string& name);

// The name in moment_dtype_names() that Bridge's spelling `name` means: torch.float32 and float32 are fp32,
// torch.bfloat16 and bfloat16 are bf16 (Bridge writes a torch.dtype as str(dtype) and reads these back, as
// megatron.bridge.utils.activation_map.str_to_dtype does). nullopt for anything else, stepgraph's names included.
std::optional<std::string> moment_dtype_spelled(const std::string& name);

// Rewrites optimizer.exp_avg_dtype / exp_avg_sq_dtype written in Bridge's spellings as stepgraph's names, with one
// note naming them (validate() calls it before any check reads them).
void read_bridge_moment_dtypes(OptimizerConfig& optimizer, std::vector<Note>& notes);

}  // namespace sg::config
