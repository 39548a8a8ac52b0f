#pragma once
// The storage dtypes of the Adam moments (optimizer.exp_avg_dtype, optimizer.exp_avg_sq_dtype), named as
// Megatron's --exp-avg-dtype / --exp-avg-sq-dtype name them. Validation and the backend both read this
// table, so a name is accepted exactly where it runs.
#include <optional>
#include <string>
#include <vector>

#include "kernels/float_buffer.h"

namespace sg::config {

// The names stepgraph stores moments in (Megatron also has fp16 and fp8; stepgraph has not).
const std::vector<std::string>& moment_dtype_names();

// nullopt: not a name in moment_dtype_names().
std::optional<kernels::FloatDtype> moment_dtype_named(const std::string& name);

}  // namespace sg::config
