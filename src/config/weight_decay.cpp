#include "config/weight_decay.h"

#include <utility>

#include "core/error.h"
#include "core/strings.h"

namespace sg::config {

namespace {

const std::vector<std::pair<std::string, model::WeightDecayIncrStyle>>& style_table() {
  static const std::vector<std::pair<std::string, model::WeightDecayIncrStyle>> table = {
      {"constant", model::WeightDecayIncrStyle::constant},
      {"linear", model::WeightDecayIncrStyle::linear},
      {"cosine", model::WeightDecayIncrStyle::cosine}};
  return table;
}

}  // namespace

double start_weight_decay(const Config& config) {
  return config.scheduler.start_weight_decay.value_or(config.optimizer.weight_decay);
}

double end_weight_decay(const Config& config) {
  return config.scheduler.end_weight_decay.value_or(config.optimizer.weight_decay);
}

bool weight_decay_changes(const Config& config) {
  return end_weight_decay(config) != start_weight_decay(config);
}

const std::vector<std::string>& weight_decay_incr_styles() {
  static const std::vector<std::string> styles = [] {
    std::vector<std::string> names;
    for (const auto& [name, style] : style_table()) names.push_back(name);
    return names;
  }();
  return styles;
}

model::WeightDecayIncrStyle weight_decay_incr_style(const Config& config) {
  const std::string& name = config.scheduler.weight_decay_incr_style;
  for (const auto& [choice, style] : style_table()) {
    if (choice == name) return style;
  }
  throw Error(strprintf("scheduler.weight_decay_incr_style = %s is not one of: %s", name.c_str(),
                        join(weight_decay_incr_styles(), ", ").c_str()));
}

int64_t weight_decay_incr_iters(const Config& config) {
  // Bridge's weight_decay_iters: scheduler.max_steps or train.train_iters.
  return config.scheduler.max_steps.value_or(config.train.train_iters.value_or(0));
}

int64_t weight_decay_incr_samples(const Config& config) {
  if (config.train.train_samples) return *config.train.train_samples;
  return weight_decay_incr_iters(config) * config.train.global_batch_size.value_or(0);
}

}  // namespace sg::config
