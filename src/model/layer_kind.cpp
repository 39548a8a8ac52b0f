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

namespace {

// Megatron's pattern may hold '|' (pipeline-stage boundaries) and, after '/', its multi-token-prediction layers:
// said as such, with the pattern that remains once they are removed, instead of "not a layer kind".
void refuse_megatron_separators(std::string_view pattern, std::string_view key) {
  const size_t bar = pattern.find('|'), slash = pattern.find('/');
  if (bar == std::string_view::npos && slash == std::string_view::npos) return;
  std::vector<std::string> why;
  if (bar != std::string_view::npos && bar < slash) {
    why.push_back(strprintf("'|' (character %zu) is Megatron's pipeline-stage separator and stepgraph trains on one "
                            "pipeline stage: remove the '|' characters",
                            bar + 1));
  }
  if (slash != std::string_view::npos) {
    const std::string_view mtp = pattern.substr(slash + 1);
    why.push_back(strprintf("the part after '/' (character %zu), \"%.*s\", is Megatron's multi-token-prediction "
                            "(MTP) layers, which stepgraph does not implement: remove '/' and what follows",
                            slash + 1, static_cast<int>(mtp.size()), mtp.data()));
  }
  std::string main_pattern;  // before the '/', without the '|'s
  for (const char c : pattern.substr(0, slash)) {
    if (c != '|') main_pattern += c;
  }
  std::string message = strprintf("%.*s = %.*s: %s", static_cast<int>(key.size()), key.data(),
                                  static_cast<int>(pattern.size()), pattern.data(), join(why, "; ").c_str());
  if (!main_pattern.empty()) {
    message += strprintf("; write %.*s = %s", static_cast<int>(key.size()), key.data(), main_pattern.c_str());
  }
  throw Error(message);
}

}  // namespace

std::vector<LayerKind> parse_layer_pattern(std::string_view pattern, std::string_view key) {
  refuse_megatron_separators(pattern, key);
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
