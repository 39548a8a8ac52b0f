#include "config/training_samples.h"

#include <optional>
#include <string>

#include "config/schedule_lengths.h"
#include "core/strings.h"

namespace sg::config {

void resolve_sample_based_lengths(Config& config, std::vector<Violation>& violations, std::vector<Note>& notes) {
  TrainConfig& t = config.train;
  SchedulerConfig& s = config.scheduler;
  const auto fail = [&](const std::string& message, const std::vector<std::string>& keys, const std::string& fix) {
    violations.push_back({16, message, detail::key_values(config, keys), fix});
  };
  const bool sample_fields =
      s.lr_warmup_samples != 0 || s.lr_decay_samples.has_value() || s.lr_wsd_decay_samples.has_value();
  if (!t.train_samples) {
    if (sample_fields) {
      fail(
          "scheduler.lr_warmup_samples, lr_decay_samples and lr_wsd_decay_samples go with train.train_samples "
          "(sample-based training); this run counts train.train_iters",
          {"scheduler.lr_warmup_samples", "scheduler.lr_decay_samples", "scheduler.lr_wsd_decay_samples",
           "train.train_iters"},
          "use scheduler.lr_warmup_iters / lr_decay_iters / lr_wsd_decay_iters, or set train.train_samples (and "
          "train.train_iters=null)");
    }
    return;
  }
  const int64_t gbs = t.global_batch_size.value_or(0);
  if (gbs < 1) return;  // the batch rules report it
  const int64_t samples = *t.train_samples;
  if (samples < gbs) {
    fail(strprintf("train.train_samples %lld is less than one global batch (%lld sequences): no step to train",
                   static_cast<long long>(samples), static_cast<long long>(gbs)),
         {"train.train_samples", "train.global_batch_size"}, "set train.train_samples to at least the global batch");
    return;
  }
  if (s.lr_warmup_samples < 0) {
    fail("scheduler.lr_warmup_samples must be >= 0", {"scheduler.lr_warmup_samples"}, "set it to 0 for no warmup");
    return;
  }
  if (s.lr_decay_samples && *s.lr_decay_samples < 1) {
    fail("scheduler.lr_decay_samples must be >= 1 (or null: train.train_samples)", {"scheduler.lr_decay_samples"},
         "set the decay's length in samples, or null");
    return;
  }
  const int64_t decay_samples = s.lr_decay_samples.value_or(samples);
  // The step counts the sample lengths make. An _iters key set to exactly that (as `config show` writes the derived
  // values) says the same; any other value mixes the two modes, which Bridge refuses.
  const int64_t steps = samples / gbs, warmup_steps = s.lr_warmup_samples / gbs, decay_steps = decay_samples / gbs;
  if (t.train_iters && *t.train_iters != steps) {
    fail("train.train_iters and train.train_samples both give the run's length (Bridge refuses both)",
         {"train.train_iters", "train.train_samples"}, "keep one: train.train_iters=null, or train.train_samples=null");
    return;
  }
  const std::optional<int64_t> wsd_steps =
      s.lr_wsd_decay_samples ? std::optional<int64_t>(*s.lr_wsd_decay_samples / gbs) : std::nullopt;
  if ((s.lr_warmup_iters != 0 && s.lr_warmup_iters != warmup_steps) ||
      (s.lr_decay_iters && *s.lr_decay_iters != decay_steps) ||
      (s.lr_wsd_decay_iters && s.lr_wsd_decay_iters != wsd_steps)) {
    fail(
        "sample-based training (train.train_samples) takes its schedule in samples: lr_warmup_samples, "
        "lr_decay_samples and lr_wsd_decay_samples, not lr_warmup_iters, lr_decay_iters and lr_wsd_decay_iters "
        "(Bridge refuses the mix)",
        {"train.train_samples", "scheduler.lr_warmup_iters", "scheduler.lr_decay_iters",
         "scheduler.lr_wsd_decay_iters"},
        "set scheduler.lr_warmup_iters=0 scheduler.lr_decay_iters=null scheduler.lr_wsd_decay_iters=null and give "
        "the lengths in samples");
    return;
  }
  // A length in samples the steps' schedule reproduces: a whole number of global batches.
  const auto whole_batches = [&](const char* key, int64_t value) {
    if (value % gbs == 0) return true;
    fail(strprintf("%s %lld is not a whole number of global batches (%lld sequences): stepgraph's schedule counts "
                   "steps, and Megatron's would change between two of them",
                   key, static_cast<long long>(value), static_cast<long long>(gbs)),
         {key, "train.global_batch_size"},
         strprintf("use %lld or %lld", static_cast<long long>(value / gbs * gbs),
                   static_cast<long long>((value / gbs + 1) * gbs)));
    return false;
  };
  const bool warmup_ok = whole_batches("scheduler.lr_warmup_samples", s.lr_warmup_samples);
  const bool decay_ok =
      whole_batches(s.lr_decay_samples ? "scheduler.lr_decay_samples" : "train.train_samples", decay_samples);
  const bool wsd_ok = !s.lr_wsd_decay_samples || *s.lr_wsd_decay_samples < 1 ||
                      whole_batches("scheduler.lr_wsd_decay_samples", *s.lr_wsd_decay_samples);
  if (warmup_ok && decay_ok && s.lr_warmup_samples >= decay_samples) {
    fail("lr_warmup_samples must be less than lr_decay_samples (null = train.train_samples)",
         {"scheduler.lr_warmup_samples", "scheduler.lr_decay_samples", "train.train_samples"},
         "shorten the warmup or lengthen the decay");
  }
  if (!t.train_iters) {
    t.train_iters = steps;  // Bridge's rounding down
    config.derived_keys.push_back("train.train_iters");
  }
  if (samples % gbs != 0 && decay_ok) {
    notes.push_back({16,
                     strprintf("train.train_samples %lld is %lld steps of %lld sequences; the last %lld samples are "
                               "not trained (as Bridge rounds down)",
                               static_cast<long long>(samples), static_cast<long long>(steps),
                               static_cast<long long>(gbs), static_cast<long long>(samples % gbs)),
                     detail::key_values(config, {"train.train_samples", "train.global_batch_size"})});
  }
  if (warmup_ok && decay_ok && !s.lr_decay_iters) {
    s.lr_decay_iters = decay_steps;
    config.derived_keys.push_back("scheduler.lr_decay_iters");
  }
  // WSD's annealing phase in steps (config/lr_decay.h checks it; a length below one sample is reported there).
  if (wsd_ok && wsd_steps && !s.lr_wsd_decay_iters) {
    s.lr_wsd_decay_iters = *s.lr_wsd_decay_samples < 1 ? *s.lr_wsd_decay_samples : *wsd_steps;
    config.derived_keys.push_back("scheduler.lr_wsd_decay_iters");
  }
}

int64_t resolved_lr_warmup_iters(const Config& config) {
  if (const std::optional<int64_t> from_fraction = lr_warmup_fraction_iters(config)) return *from_fraction;
  const int64_t gbs = config.train.global_batch_size.value_or(0);
  if (config.train.train_samples && gbs > 0) return config.scheduler.lr_warmup_samples / gbs;
  return config.scheduler.lr_warmup_iters;
}

}  // namespace sg::config
