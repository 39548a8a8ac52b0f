#pragma once
// Megatron-Bridge's mixed_precision section: a MixedPrecisionConfig map, or the name of one of Bridge's recipes
// (bf16_mixed, fp16_mixed, bf16_with_fp8_delayed_scaling_mixed, ...; hyphens read as underscores, as Bridge reads
// them). A name is written out as the keys its recipe sets, so `config show` prints them and validate judges them as
// the map's: bf16_mixed is what stepgraph does, and a recipe that trains in fp16, FP8 or FP4 is refused by the key
// that asks for it (config/bridge_inert_keys.h holds the keys and their neutral values).
//
// Bridge's MixedPrecisionConfig.setup copies every field of the section over the model's, optimizer's and ddp's
// fields of the same name. validate does the same (apply_mixed_precision): mixed_precision.grad_reduce_in_fp32 (true
// when unset, the dataclass default) becomes ddp.grad_reduce_in_fp32, and the model's and optimizer's precision keys
// give way to the section's; each value replaced is named in a note.
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace sg::config {

struct Violation;
struct Note;

// Bridge's recipe names (MIXED_PRECISION_RECIPES), with underscores, in its order.
const std::vector<std::string>& mixed_precision_recipe_names();

namespace detail {
// Sets the section to recipe `name`'s keys (the others unset), as Bridge replaces the section with the recipe's
// MixedPrecisionConfig. Throws ConfigError naming `where`, the name and the recipes when the name is unknown.
void assign_mixed_precision_recipe(Config& config, std::string_view name, const std::string& where);
// Whether any key of the section is set (the section is present).
bool has_mixed_precision(const Config& config);
// Bridge's MixedPrecisionConfig.setup, on a config about to be validated; see above.
void apply_mixed_precision(Config& config, std::vector<Note>& notes);
}  // namespace detail

}  // namespace sg::config
