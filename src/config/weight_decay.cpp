#include "config/weight_decay.h"

namespace sg::config {

double start_weight_decay(const Config& config) {
  return config.scheduler.start_weight_decay.value_or(config.optimizer.weight_decay);
}

double end_weight_decay(const Config& config) {
  return config.scheduler.end_weight_decay.value_or(config.optimizer.weight_decay);
}

double effective_weight_decay(const Config& config) {
  return start_weight_decay(config);
}

bool weight_decay_changes(const Config& config) {
  return end_weight_decay(config) != start_weight_decay(config);
}

const std::vector<std::string>& weight_decay_incr_styles() {
  static const std::vector<std::string> styles = {"constant", "linear", "cosine"};
  return styles;
}

}  // namespace sg::config
