#pragma once
// The learning-rate schedule's keys as the training step reads them: scheduler.lr_decay_style and, for WSD,
// scheduler.lr_wsd_decay_style by Megatron's names (one table each for validation and the backend),
// scheduler.lr_decay_iters with Bridge's default, and the checks of the keys that shape the schedule beyond its
// lengths (lr_warmup_init, WSD's annealing phase).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/validate.h"
#include "model/spec.h"

namespace sg::config {

struct LrDecayStyleName {
  const char* name;  // Megatron's --lr-decay-style spelling
  model::LrDecayStyle style;
};
struct LrWsdDecayStyleName {
  const char* name;  // Megatron's --lr-wsd-decay-style spelling
  model::LrWsdDecayStyle style;
};

// Megatron's choices, in its order: constant, linear, cosine, inverse-square-root, WSD.
const std::vector<LrDecayStyleName>& lr_decay_styles();
std::vector<std::string> lr_decay_style_names();
// WSD's annealing styles, Megatron's order: exponential, linear, cosine, minus_sqrt.
const std::vector<LrWsdDecayStyleName>& lr_wsd_decay_styles();
std::vector<std::string> lr_wsd_decay_style_names();

// The styles the step trains with. Throw sg::Error naming the key and the styles for a name that is not one of them
// (validation refuses unknown names first; this guards a config that skipped it).
model::LrDecayStyle lr_decay_style(const std::string& name);
model::LrWsdDecayStyle lr_wsd_decay_style(const std::string& name);

// scheduler.lr_decay_iters, else train.train_iters (Bridge's meaning of null); nullopt when neither is set.
std::optional<int64_t> resolved_lr_decay_iters(const Config& config);

// The schedule's shape, after its lengths are resolved (warmup, decay): lr_warmup_init within [0, optimizer.lr];
// WSD's annealing phase given (Megatron asserts it) and no longer than the decay; the WSD keys noted as unused under
// another style, and lr_warmup_init under no warmup.
void check_lr_schedule(const Config& config, std::vector<Violation>& violations, std::vector<Note>& notes);

}  // namespace sg::config
