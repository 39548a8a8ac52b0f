#pragma once
// The activation-recompute part of a `stepgraph bench --compare` mode: the last '+'-joined item of an
// entry, after the graph mode's scopes (bench/mode_list.h), so recompute settings sit side by side:
//   --compare local,local+recompute_full,transformer_engine:attn+mlp+recompute_selective=core_attn/mlp
// Spellings (every one starts with "recompute_", which no cuda_graph_scope does):
//   recompute_none                    model.recompute_granularity null (off, whatever the recipe says)
//   recompute_selective               selective, the recipe's model.recompute_modules (Megatron's
//                                     default: [core_attn])
//   recompute_selective=M1/M2         selective, these modules ('/' joins them: '+' joins scopes and
//                                     ',' modes), e.g. recompute_selective=core_attn/mlp
//   recompute_full                    full, the recipe's recompute_method and recompute_num_layers, or
//                                     uniform and 1 where it sets none
//   recompute_full=METHOD[/N]         full, METHOD uniform or block, N layers (e.g. recompute_full=block/2)
// A mode without one keeps the recipe's and the overrides' recompute settings. Only the spelling is
// checked here; what a model and graph mode allow (rule 11: full recompute with transformer_engine
// scopes, a module without its layer kind) is the validator's call, like any config.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace sg::bench {

struct RecomputeMode {
  std::string granularity;           // none, selective, full
  std::vector<std::string> modules;  // selective: as written; empty: the recipe's recompute_modules
  std::optional<std::string> method;       // full: uniform or block; none: the recipe's, else uniform
  std::optional<int64_t> num_layers;       // full: none: the recipe's, else 1

  // "recompute_full", "recompute_selective=core_attn/mlp" (parse_recompute_mode(label()) gives it back).
  std::string label() const;
  bool operator==(const RecomputeMode&) const = default;
};

inline constexpr std::string_view kRecomputePrefix = "recompute_";

// Whether a '+'-joined item of a mode is a recompute setting (it starts with "recompute_").
bool is_recompute_item(std::string_view item);

// The spellings for messages and "did you mean": recompute_none, recompute_selective, recompute_full.
const std::vector<std::string>& recompute_item_names();

// One item; `entry` is the whole mode, for messages. Throws config::ConfigError (usage error, exit 2) for
// an unknown granularity, module or method, a value on recompute_none, or N < 1.
RecomputeMode parse_recompute_mode(std::string_view item, const std::string& entry);

// The recompute setting a (normalized) config runs with, spelled as in --compare without the prefix and
// with every value explicit: "none", "selective=core_attn/mlp", "full=uniform/1".
std::string recompute_setting(const config::Config& config);

// Sets model.recompute_* as the mode says (see the file comment); full keeps the config's method and
// num_layers where the mode names none, selective and none unset them (they apply only to full).
void apply_recompute_mode(config::Config& config, const RecomputeMode& mode);

}  // namespace sg::bench
