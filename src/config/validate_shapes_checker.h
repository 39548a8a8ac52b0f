#pragma once
// Internal to validate_shapes*.cpp: rule 16's ShapeChecker, one class whose per-area checks live in their own
// files (validate_shapes.cpp: the dense model, attention, layers, batch, optimizer, data and the order they run
// in; validate_shapes_moe.cpp: MoE; validate_shapes_mamba.cpp: Mamba) over one context: the config read and the
// violations and notes reported, by the helpers of validate_shapes_checker.cpp.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/model_config.h"
#include "config/validate.h"
#include "model/layer_kind.h"

namespace sg::config::detail {

// The largest size a key may have: the kernels index with int32.
inline constexpr int64_t kMaxSize = std::numeric_limits<int32_t>::max();

inline long long ll(int64_t v) {
  return static_cast<long long>(v);
}

// The multiple of `step` nearest to `value` within [step, max] (a concrete value for a fix).
inline int64_t nearest_multiple(int64_t value, int64_t step, int64_t max = kMaxSize) {
  const int64_t down = value / step * step;
  const int64_t near = value - down < step - (value - down) ? down : down + step;
  return std::clamp(near, step, max / step * step);
}

class ShapeChecker {
 public:
  ShapeChecker(const Config& config, std::vector<Violation>& out, std::vector<Note>& notes)
      : c_(config), out_(out), notes_(notes) {}

  void run();  // every check, in the order of the report

 private:
  // Reporting (validate_shapes_checker.cpp): a violation or note of rule 16 naming `keys` with their values.
  void fail(const std::string& message, const std::vector<std::string>& keys, const std::string& fix);
  void note(const std::string& message, const std::vector<std::string>& keys);
  // An integer in [min, max]; false (and reported) otherwise.
  bool in_range(const std::string& key, int64_t value, int64_t min, int64_t max);
  bool size(const std::string& key, int64_t value, int64_t max = kMaxSize);  // in [1, max]
  bool size(const std::string& key, const std::optional<int64_t>& value);    // set, and in [1, kMaxSize]
  void real(const std::string& key, double value, double min, bool min_inclusive, double max, bool max_inclusive);
  void positive(const std::string& key, double value);
  void non_negative(const std::string& key, double value);
  // Whether `value` is one of `valid`; reported when not: one of Megatron's values stepgraph does not implement
  // as such, anything else as unknown (with the closest valid one).
  bool one_of(const std::string& key, const std::string& value, const std::vector<std::string>& valid,
              const std::vector<std::string>& megatron_only = {});
  bool one_of(const KeyValues& values, const std::string& value);
  // 0 < lo <= hi for the model keys lo_key, hi_key.
  void positive_range(const std::string& lo_key, double lo, const std::string& hi_key, double hi,
                      const std::string& defaults);
  // A kind's checks (its kernel limits, the experts' activation) apply only where its layers run.
  bool has_layers(model::LayerKind kind) const { return has_layer_kind(c_, kind, kMaxLayers); }

  // validate_shapes.cpp
  void check_model();
  void check_hybrid();
  void check_layers_and_recompute();
  void check_kernel_limits();
  void check_attention_limits();
  void check_rotary_percent();  // model.rotary_percent: a share in (0, 1] giving an even count, only with RoPE
  void check_longrope();        // model.longrope_*: one positive factor per rotated pair in each list, only with RoPE
  void check_batch_and_optimizer();
  void check_data_and_io();
  // validate_shapes_moe.cpp
  void check_moe();
  void check_moe_routing();
  void check_moe_limits();
  void check_padded_capacity(int64_t mbs);
  // validate_shapes_mamba.cpp
  void check_mamba();
  void check_gated_norm_width(int64_t heads, const std::vector<std::string>& head_keys, const std::string& heads_text);

  const Config& c_;
  std::vector<Violation>& out_;
  std::vector<Note>& notes_;
};

}  // namespace sg::config::detail
