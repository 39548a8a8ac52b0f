#pragma once
// The recompute modules (Megatron's recompute_modules names) and which layer kind each belongs to; the
// kinds' own declarations of what they can recompute are in model/layer_registry.h (one line per kind,
// next to the kind's registration). Pure CPU: validation reads it without building a model.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/layer_kind.h"
#include "model/recompute_spec.h"
#include "model/spec.h"

namespace sg::model {

struct RecomputeModuleInfo {
  RecomputeModule module;
  const char* name;                 // "core_attn"
  std::optional<LayerKind> kind;    // the kind whose activations it recomputes; none: see `step`
  bool step = false;                // the step's own (layernorm: every layer's pre-norm output)
  const char* what;                 // for `config show` and messages
};

const std::vector<RecomputeModuleInfo>& recompute_modules();  // every module, in enum order
const RecomputeModuleInfo& recompute_module_info(RecomputeModule module);
const char* recompute_module_name(RecomputeModule module);
std::optional<RecomputeModule> find_recompute_module(std::string_view name);
std::vector<std::string> recompute_module_names();

// What one layer kind declares it can recompute (model/layer_registry.h): the modules of selective
// recompute, and whether full recompute may rerun the whole layer.
struct LayerRecompute {
  std::vector<RecomputeModule> modules;
  bool full = false;
};

// One thing the recompute settings ask for that this model cannot do (a module of a layer kind this
// model has none of, or one that kind does not declare): the message names the module and the layer
// kind, the fix says what to change.
struct RecomputeProblem {
  std::string message;
  std::string fix;
};
std::vector<RecomputeProblem> check_recompute(const ModelSpec& spec);

// "selective (core_attn, mlp)", "full, uniform: every layer, in chunks of 1 model layer", "full, block: the first 2
// model layers" (model.num_layers' unit: a GPT block is one), "off".
std::string describe_recompute(const RecomputeSpec& spec);

}  // namespace sg::model
