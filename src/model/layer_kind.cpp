#include "model/layer_kind.h"

#include "core/error.h"
#include "core/strings.h"

namespace sg::model {

const std::vector<LayerKindInfo>& layer_kinds() {
  using graph::Module;
  static const std::vector<LayerKindInfo> kinds = {
      {LayerKind::attention, '*', "attention", "attention", {Module::attn}, "self_attn"},
      {LayerKind::mlp, '-', "mlp", "dense MLP", {Module::mlp}, "mlp"},
      {LayerKind::moe, 'E', "moe", "MoE", {Module::moe_router, Module::moe_preprocess, Module::moe}, "block_sparse_moe"},
      {LayerKind::mamba, 'M', "mamba", "Mamba", {Module::mamba}, nullptr},
  };
  return kinds;
}

const LayerKindInfo& layer_kind_info(LayerKind kind) { return layer_kinds().at(static_cast<size_t>(kind)); }
const char* layer_kind_name(LayerKind kind) { return layer_kind_info(kind).name; }
char layer_kind_letter(LayerKind kind) { return layer_kind_info(kind).letter; }

std::vector<LayerKind> parse_layer_pattern(std::string_view pattern, std::string_view key) {
  std::vector<std::string> letters;
  for (const LayerKindInfo& k : layer_kinds()) letters.push_back(strprintf("%c (%s)", k.letter, k.description));
  SG_REQUIRE(!pattern.empty(), strprintf("%.*s is empty: write one letter per layer, from %s",
                                         static_cast<int>(key.size()), key.data(), join(letters, ", ").c_str()));
  std::vector<LayerKind> kinds;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const LayerKindInfo* found = nullptr;
    for (const LayerKindInfo& k : layer_kinds()) {
      if (k.letter == pattern[i]) found = &k;
    }
    SG_REQUIRE(found != nullptr,
               strprintf("%.*s = %.*s: character %zu '%c' is not a layer kind; use one letter per layer from %s",
                         static_cast<int>(key.size()), key.data(), static_cast<int>(pattern.size()), pattern.data(),
                         i + 1, pattern[i], join(letters, ", ").c_str()));
    kinds.push_back(found->kind);
  }
  return kinds;
}

std::string layer_pattern_string(const std::vector<LayerKind>& kinds) {
  std::string out;
  for (LayerKind k : kinds) out += layer_kind_letter(k);
  return out;
}

std::string compact_layer_pattern(const std::vector<LayerKind>& kinds) {
  const std::string pattern = layer_pattern_string(kinds);
  const size_t n = pattern.size();
  for (size_t unit = 1; unit < n; ++unit) {
    if (n % unit != 0) continue;
    bool repeats = true;
    for (size_t i = unit; i < n && repeats; ++i) repeats = pattern[i] == pattern[i - unit];
    if (repeats) return strprintf("(%s)x%zu", pattern.substr(0, unit).c_str(), n / unit);
  }
  return pattern;
}

}  // namespace sg::model
