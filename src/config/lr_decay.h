#pragma once
// The learning-rate decay keys as the training step reads them: scheduler.lr_decay_style by Megatron's names
// (one table for validation, rule 16's "not implemented yet" note and the backend) and scheduler.lr_decay_iters
// with Bridge's default.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "model/spec.h"

namespace sg::config {

struct LrDecayStyleName {
  const char* name;                          // Megatron's --lr-decay-style spelling
  std::optional<model::LrDecayStyle> style;  // nullopt: accepted by name, not implemented yet
};

// Megatron's choices, in its order: constant, linear, cosine, inverse-square-root.
const std::vector<LrDecayStyleName>& lr_decay_styles();
std::vector<std::string> lr_decay_style_names();

// The styles named but not implemented yet ("inverse-square-root"); nullopt for any other name.
std::optional<std::string> unimplemented_lr_decay_style(std::string_view name);

// The style the step trains with. Throws sg::Error naming the key and the implemented styles for a name that is
// not one of them (validation refuses unknown names first; this guards a config that skipped it).
model::LrDecayStyle lr_decay_style(const std::string& name);

// scheduler.lr_decay_iters, else train.train_iters (Bridge's meaning of null); nullopt when neither is set.
std::optional<int64_t> resolved_lr_decay_iters(const Config& config);

}  // namespace sg::config
