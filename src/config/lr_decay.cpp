#include "config/lr_decay.h"

#include "core/error.h"
#include "core/strings.h"

namespace sg::config {

const std::vector<LrDecayStyleName>& lr_decay_styles() {
  static const std::vector<LrDecayStyleName> styles = {
      {.name = "constant", .style = model::LrDecayStyle::constant},
      {.name = "linear", .style = model::LrDecayStyle::linear},
      {.name = "cosine", .style = model::LrDecayStyle::cosine},
      {.name = "inverse-square-root", .style = std::nullopt},
      {.name = "WSD", .style = std::nullopt},  // Megatron's warmup-stable-decay (its lr_wsd_decay_* keys)
  };
  return styles;
}

std::vector<std::string> lr_decay_style_names() {
  std::vector<std::string> names;
  for (const LrDecayStyleName& s : lr_decay_styles()) names.emplace_back(s.name);
  return names;
}

std::optional<std::string> unimplemented_lr_decay_style(std::string_view name) {
  for (const LrDecayStyleName& s : lr_decay_styles()) {
    if (name == s.name && !s.style) return std::string(s.name);
  }
  return std::nullopt;
}

model::LrDecayStyle lr_decay_style(const std::string& name) {
  std::vector<std::string> implemented;
  for (const LrDecayStyleName& s : lr_decay_styles()) {
    if (name == s.name && s.style) return *s.style;
    if (s.style) implemented.emplace_back(s.name);
  }
  // "constant, linear or cosine"
  const std::string last = implemented.back();
  implemented.pop_back();
  throw Error(strprintf("scheduler.lr_decay_style = %s is not implemented yet; use %s or %s", name.c_str(),
                        join(implemented, ", ").c_str(), last.c_str()));
}

std::optional<int64_t> resolved_lr_decay_iters(const Config& config) {
  return config.scheduler.lr_decay_iters ? config.scheduler.lr_decay_iters : config.train.train_iters;
}

}  // namespace sg::config
