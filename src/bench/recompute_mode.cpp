#include "bench/recompute_mode.h"

#include <algorithm>
#include <charconv>
#include <system_error>

#include "core/strings.h"
#include "model/recompute.h"

namespace sg::bench {
namespace {

using Granularity = model::RecomputeGranularity;

// Whether a RecomputeMode's granularity (a string, as --compare spells it) is `granularity`.
bool is(const std::string& name, Granularity granularity) {
  return name == model::recompute_granularity_name(granularity);
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string close = closest_match(word, candidates);
  return close.empty() ? std::string() : " (did you mean '" + close + "'?)";
}

[[noreturn]] void refuse(const std::string& entry, const std::string& what) {
  throw config::ConfigError("--compare: '" + entry + "': " + what +
                            "; recompute settings are recompute_none, recompute_selective[=MODULE/MODULE...] "
                            "or recompute_full[=uniform|block[/N]], e.g. local+recompute_full, "
                            "transformer_engine:attn+mlp+recompute_selective=core_attn/mlp");
}

int64_t parse_layers(const std::string& text, const std::string& entry) {
  int64_t n = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, n);
  if (text.empty() || error != std::errc() || stop != end || n < 1) {
    refuse(entry, "recompute_full's layer count '" + text + "' must be an integer >= 1");
  }
  return n;
}

}  // namespace

bool is_recompute_item(std::string_view item) {
  const std::string text = trim(item);
  return text.rfind(kRecomputePrefix, 0) == 0;
}

const std::vector<std::string>& recompute_item_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Granularity g : {Granularity::none, Granularity::selective, Granularity::full}) {
      out.push_back(std::string(kRecomputePrefix) + model::recompute_granularity_name(g));
    }
    return out;
  }();
  return names;
}

std::string RecomputeMode::label() const {
  std::string text = std::string(kRecomputePrefix) + granularity;
  // Appended piece by piece: GCC 12's -Wrestrict misfires on "=" + std::string temporaries.
  if (is(granularity, Granularity::selective) && !modules.empty()) text.append("=").append(join(modules, "/"));
  if (is(granularity, Granularity::full) && method) {
    text.append("=").append(*method);
    if (num_layers) text.append("/").append(std::to_string(*num_layers));
  }
  return text;
}

RecomputeMode parse_recompute_mode(std::string_view item, const std::string& entry) {
  const std::string text = trim(item);
  const size_t eq = text.find('=');
  const std::string name = trim(text.substr(0, eq));
  const bool has_value = eq != std::string::npos;
  const std::string value = has_value ? trim(text.substr(eq + 1)) : std::string();
  const auto& names = recompute_item_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    refuse(entry, "unknown recompute setting '" + name + "'" + did_you_mean(name, names));
  }
  RecomputeMode mode;
  mode.granularity = name.substr(kRecomputePrefix.size());
  if (has_value && value.empty()) refuse(entry, "'" + name + "=' names nothing after '='");
  if (!has_value) return mode;
  if (is(mode.granularity, Granularity::none)) refuse(entry, "recompute_none takes no value");
  if (is(mode.granularity, Granularity::selective)) {
    const std::vector<std::string> known = model::recompute_module_names();
    for (const std::string& raw : split(value, '/')) {
      const std::string module = trim(raw);
      if (module.empty()) refuse(entry, "empty recompute module between '/'");
      if (std::find(known.begin(), known.end(), module) == known.end()) {
        refuse(entry, "unknown recompute module '" + module + "'" + did_you_mean(module, known) +
                          " (Megatron's recompute_modules: " + join(known, ", ") + ")");
      }
      if (std::find(mode.modules.begin(), mode.modules.end(), module) != mode.modules.end()) {
        refuse(entry, "recompute module '" + module + "' is named twice");
      }
      mode.modules.push_back(module);
    }
    return mode;
  }
  // full=METHOD[/N]
  const size_t slash = value.find('/');
  const std::string method = trim(value.substr(0, slash));
  if (!model::find_recompute_method(method)) {
    refuse(entry, "unknown recompute_method '" + method + "'" + did_you_mean(method, model::recompute_method_names()) +
                      " (uniform: every layer, in chunks of N; block: the first N layers)");
  }
  mode.method = method;
  if (slash != std::string::npos) mode.num_layers = parse_layers(trim(value.substr(slash + 1)), entry);
  return mode;
}

std::string recompute_setting(const config::Config& config) {
  const config::ModelConfig& m = config.model;
  RecomputeMode mode;
  mode.granularity = m.recompute_granularity.value_or(model::recompute_granularity_name(Granularity::none));
  if (is(mode.granularity, Granularity::selective)) mode.modules = m.recompute_modules;
  if (is(mode.granularity, Granularity::full)) {
    const model::FullRecomputeDefaults defaults = model::full_recompute_defaults();
    mode.method = m.recompute_method.value_or(model::recompute_method_name(defaults.method));
    mode.num_layers = m.recompute_num_layers.value_or(defaults.num_layers);
  }
  return mode.label().substr(kRecomputePrefix.size());
}

void apply_recompute_mode(config::Config& config, const RecomputeMode& mode) {
  config::ModelConfig& m = config.model;
  if (is(mode.granularity, Granularity::full)) {
    const model::FullRecomputeDefaults defaults = model::full_recompute_defaults();
    m.recompute_granularity = mode.granularity;
    if (mode.method) m.recompute_method = *mode.method;
    if (!m.recompute_method) m.recompute_method = model::recompute_method_name(defaults.method);
    if (mode.num_layers) m.recompute_num_layers = *mode.num_layers;
    if (!m.recompute_num_layers) m.recompute_num_layers = defaults.num_layers;
    return;
  }
  // recompute_method and recompute_num_layers apply only to full recompute (the validator refuses
  // recompute_num_layers with selective).
  m.recompute_method.reset();
  m.recompute_num_layers.reset();
  if (is(mode.granularity, Granularity::selective)) {
    m.recompute_granularity = mode.granularity;
    if (!mode.modules.empty()) m.recompute_modules = mode.modules;
  } else {
    m.recompute_granularity.reset();
  }
}

}  // namespace sg::bench
