#pragma once
// Non-finite values in checkpoint tensors. stepgraph never saves a NaN/Inf state (the trainer
// refuses), so a non-finite value in a checkpoint is corruption or a diverged run written by
// another tool: loading it would train on garbage without a word. F32, BF16 and F16 tensors are
// scanned; integer tensors cannot be non-finite.
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "checkpoint/safetensors.h"

namespace sg::checkpoint {

struct NonFiniteValue {
  std::string tensor;    // name
  int64_t index = 0;     // flat element index of the first non-finite value
  float value = 0.0f;    // NaN, +inf or -inf
  int64_t count = 0;     // non-finite elements in the whole list
};

// The first non-finite element of `tensors` (in list order) and the total count; nullopt when all
// are finite.
std::optional<NonFiniteValue> find_nonfinite(std::span<const TensorRef> tensors);

// The same over every tensor of a (memory-mapped) safetensors file.
std::optional<NonFiniteValue> find_nonfinite(const SafetensorsFile& file);

// "tensor model.layers.0.mlp.up_proj.weight element 17 is nan (3 non-finite values in all)".
std::string describe(const NonFiniteValue& v);

}  // namespace sg::checkpoint
