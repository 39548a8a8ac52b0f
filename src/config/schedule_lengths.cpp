#include "config/schedule_lengths.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/strings.h"

namespace sg::config {
namespace {

void fail(const Config& config, std::vector<Violation>& violations, const std::string& message,
          const std::vector<std::string>& keys, const std::string& fix) {
  violations.push_back({16, message, detail::key_values(config, keys), fix});
}

}  // namespace

void resolve_max_steps(Config& config, std::vector<Violation>& violations, std::vector<Note>& notes) {
  const std::optional<int64_t> max_steps = config.scheduler.max_steps;
  if (!max_steps) return;
  if (config.train.train_samples) {
    fail(config, violations,
         "scheduler.max_steps goes with iteration-based training; with train.train_samples Bridge does not read it",
         {"scheduler.max_steps", "train.train_samples"},
         "give the decay's length as scheduler.lr_decay_samples, or train by train.train_iters");
    return;
  }
  if (*max_steps < 1) {
    fail(config, violations, "scheduler.max_steps must be >= 1 (or null)", {"scheduler.max_steps"},
         "set the schedule's length in steps, or null");
    return;
  }
  const std::optional<int64_t> train_iters = config.train.train_iters;
  if (train_iters && *max_steps < *train_iters) {
    fail(config, violations,
         strprintf("scheduler.max_steps %lld is less than train.train_iters %lld: the schedule would end before the "
                   "run (Bridge refuses it)",
                   static_cast<long long>(*max_steps), static_cast<long long>(*train_iters)),
         {"scheduler.max_steps", "train.train_iters"}, "set scheduler.max_steps >= train.train_iters, or null");
    return;
  }
  SchedulerConfig& s = config.scheduler;
  if (s.lr_decay_iters && *s.lr_decay_iters != *max_steps) {
    notes.push_back({16,
                     "scheduler.max_steps replaces scheduler.lr_decay_iters, as Bridge's _calculate_scheduler_steps "
                     "does: the lr decays over max_steps",
                     detail::key_values(config, {"scheduler.max_steps", "scheduler.lr_decay_iters"})});
  }
  s.lr_decay_iters = *max_steps;
  if (std::find(config.derived_keys.begin(), config.derived_keys.end(), "scheduler.lr_decay_iters") ==
      config.derived_keys.end()) {
    config.derived_keys.push_back("scheduler.lr_decay_iters");
  }
}

std::optional<int64_t> lr_warmup_fraction_iters(const Config& config) {
  const std::optional<double> fraction = config.scheduler.lr_warmup_fraction;
  if (!fraction || !config.scheduler.lr_decay_iters) return std::nullopt;
  return std::llround(*fraction * static_cast<double>(*config.scheduler.lr_decay_iters));
}

void check_lr_warmup_fraction(const Config& config, std::vector<Violation>& violations, std::vector<Note>& notes) {
  const SchedulerConfig& s = config.scheduler;
  if (!s.lr_warmup_fraction) return;
  const double fraction = *s.lr_warmup_fraction;
  if (s.lr_warmup_iters != 0 || s.lr_warmup_samples != 0) {
    fail(config, violations,
         "scheduler.lr_warmup_fraction and lr_warmup_iters / lr_warmup_samples all give the warmup (Bridge refuses "
         "more than one)",
         {"scheduler.lr_warmup_fraction", "scheduler.lr_warmup_iters", "scheduler.lr_warmup_samples"},
         "keep one: scheduler.lr_warmup_fraction=null, or lr_warmup_iters=0 and lr_warmup_samples=0");
    return;
  }
  if (!std::isfinite(fraction) || fraction < 0.0 || fraction >= 1.0) {
    fail(config, violations,
         "scheduler.lr_warmup_fraction must be in [0, 1): the warmup is that fraction of the decay's length",
         {"scheduler.lr_warmup_fraction"}, "set a fraction such as 0.01, or null");
    return;
  }
  if (!s.lr_decay_iters) return;  // an invalid run length is reported under its own key
  const int64_t decay = *s.lr_decay_iters, warmup = *lr_warmup_fraction_iters(config);
  const double exact = fraction * static_cast<double>(decay);
  if (warmup >= decay) {
    fail(config, violations,
         strprintf("scheduler.lr_warmup_fraction %g of lr_decay_iters %lld is %lld steps: the warmup must end before "
                   "the decay",
                   fraction, static_cast<long long>(decay), static_cast<long long>(warmup)),
         {"scheduler.lr_warmup_fraction", "scheduler.lr_decay_iters"}, "use a smaller fraction");
    return;
  }
  if (exact != static_cast<double>(warmup)) {
    notes.push_back(
        {16,
         strprintf("scheduler.lr_warmup_fraction %g of lr_decay_iters %lld is %.4g steps: the warmup takes %lld "
                   "(stepgraph's schedule counts whole steps; Megatron's warmup would end between two of them)",
                   fraction, static_cast<long long>(decay), exact, static_cast<long long>(warmup)),
         detail::key_values(config, {"scheduler.lr_warmup_fraction", "scheduler.lr_decay_iters"})});
  }
}

}  // namespace sg::config
