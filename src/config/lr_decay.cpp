#include "config/lr_decay.h"

#include "config/training_samples.h"
#include "core/error.h"
#include "core/strings.h"

namespace sg::config {

const std::vector<LrDecayStyleName>& lr_decay_styles() {
  static const std::vector<LrDecayStyleName> styles = {
      {.name = "constant", .style = model::LrDecayStyle::constant},
      {.name = "linear", .style = model::LrDecayStyle::linear},
      {.name = "cosine", .style = model::LrDecayStyle::cosine},
      {.name = "inverse-square-root", .style = model::LrDecayStyle::inverse_square_root},
      {.name = "WSD", .style = model::LrDecayStyle::wsd},  // warmup-stable-decay (the lr_wsd_decay_* keys)
  };
  return styles;
}

const std::vector<LrWsdDecayStyleName>& lr_wsd_decay_styles() {
  static const std::vector<LrWsdDecayStyleName> styles = {
      {.name = "exponential", .style = model::LrWsdDecayStyle::exponential},
      {.name = "linear", .style = model::LrWsdDecayStyle::linear},
      {.name = "cosine", .style = model::LrWsdDecayStyle::cosine},
      {.name = "minus_sqrt", .style = model::LrWsdDecayStyle::minus_sqrt},
  };
  return styles;
}

namespace {

template <class Table>
std::vector<std::string> names_of(const Table& table) {
  std::vector<std::string> names;
  for (const auto& s : table) names.emplace_back(s.name);
  return names;
}

template <class Table>
auto style_named(const Table& table, const char* key, const std::string& name) {
  for (const auto& s : table) {
    if (name == s.name) return s.style;
  }
  throw Error(strprintf("%s = %s is not a style stepgraph knows; use one of: %s", key, name.c_str(),
                        join(names_of(table), ", ").c_str()));
}

}  // namespace

std::vector<std::string> lr_decay_style_names() {
  return names_of(lr_decay_styles());
}
std::vector<std::string> lr_wsd_decay_style_names() {
  return names_of(lr_wsd_decay_styles());
}

model::LrDecayStyle lr_decay_style(const std::string& name) {
  return style_named(lr_decay_styles(), "scheduler.lr_decay_style", name);
}

model::LrWsdDecayStyle lr_wsd_decay_style(const std::string& name) {
  return style_named(lr_wsd_decay_styles(), "scheduler.lr_wsd_decay_style", name);
}

std::optional<int64_t> resolved_lr_decay_iters(const Config& config) {
  return config.scheduler.lr_decay_iters ? config.scheduler.lr_decay_iters : config.train.train_iters;
}

void check_lr_schedule(const Config& config, std::vector<Violation>& violations, std::vector<Note>& notes) {
  const SchedulerConfig& s = config.scheduler;
  const auto fail = [&](const std::string& message, const std::vector<std::string>& keys, const std::string& fix) {
    violations.push_back({16, message, detail::key_values(config, keys), fix});
  };
  const auto note = [&](const std::string& message, const std::vector<std::string>& keys) {
    notes.push_back({16, message, detail::key_values(config, keys)});
  };
  // Megatron asserts init_lr <= max_lr; a negative lr would ascend the loss.
  if (s.lr_warmup_init < 0.0 || s.lr_warmup_init > config.optimizer.lr) {
    fail("scheduler.lr_warmup_init must be within [0, optimizer.lr]: the warmup rises from it to the peak lr",
         {"scheduler.lr_warmup_init", "optimizer.lr"}, "set scheduler.lr_warmup_init between 0 and optimizer.lr");
  } else if (s.lr_warmup_init != 0.0 && resolved_lr_warmup_iters(config) == 0) {
    note("scheduler.lr_warmup_init has no effect without a warmup: the first step already has optimizer.lr",
         {"scheduler.lr_warmup_init", "scheduler.lr_warmup_iters"});
  }
  const bool wsd = s.lr_decay_style == "WSD";
  const std::string length_key =
      config.train.train_samples ? "scheduler.lr_wsd_decay_samples" : "scheduler.lr_wsd_decay_iters";
  if (!wsd) {
    const bool wsd_keys =
        s.lr_wsd_decay_iters || s.lr_wsd_decay_samples || s.lr_wsd_decay_style != SchedulerConfig{}.lr_wsd_decay_style;
    if (wsd_keys) {
      note("the lr_wsd_decay_* keys shape only lr_decay_style WSD's annealing phase: unused with " + s.lr_decay_style,
           {"scheduler.lr_decay_style", "scheduler.lr_wsd_decay_style", length_key});
    }
    return;
  }
  // With train_samples, validation derived lr_wsd_decay_iters from lr_wsd_decay_samples (config/training_samples.h),
  // or refused the samples already.
  if (!s.lr_wsd_decay_iters && config.train.train_samples && s.lr_wsd_decay_samples) return;
  if (!s.lr_wsd_decay_iters) {
    fail("lr_decay_style WSD needs the length of its annealing phase (Megatron asserts it)",
         {"scheduler.lr_decay_style", length_key},
         "set " + length_key + " to the steps" + (config.train.train_samples ? " (in samples)" : "") +
             " over which the lr anneals from optimizer.lr to optimizer.min_lr, ending at lr_decay_iters");
    return;
  }
  const int64_t anneal = *s.lr_wsd_decay_iters;
  const std::optional<int64_t> decay = resolved_lr_decay_iters(config);
  if (anneal < 1) {
    fail(length_key + " must be >= 1", {length_key}, "set the annealing phase's length, at least one step");
  } else if (decay && anneal > *decay) {
    fail(strprintf("WSD's annealing phase (%lld steps) is longer than the decay it ends (lr_decay_iters %lld)",
                   static_cast<long long>(anneal), static_cast<long long>(*decay)),
         {length_key, "scheduler.lr_decay_iters"}, "shorten " + length_key + " or lengthen the decay");
  } else if (decay && anneal > *decay - resolved_lr_warmup_iters(config)) {
    note(strprintf("WSD's annealing phase starts at step %lld, inside the warmup (%lld steps): the lr drops below "
                   "the peak as soon as the warmup ends",
                   static_cast<long long>(*decay - anneal), static_cast<long long>(resolved_lr_warmup_iters(config))),
         {length_key, "scheduler.lr_warmup_iters", "scheduler.lr_decay_iters"});
  }
}

}  // namespace sg::config
