#include "graph/region.h"

#include "core/strings.h"

namespace sg::graph {

const char* module_name(Module module) {
  switch (module) {
    case Module::attn: return "attn";
    case Module::mlp: return "mlp";
    case Module::moe: return "moe";
    case Module::moe_router: return "moe_router";
    case Module::moe_preprocess: return "moe_preprocess";
    case Module::mamba: return "mamba";
  }
  return "?";
}

const char* phase_name(Phase phase) { return phase == Phase::forward ? "forward" : "backward"; }

std::string region_name(const RegionKey& key) {
  return strprintf("layer %d %s %s%s", key.layer, module_name(key.module), phase_name(key.phase),
                   key.first_microbatch ? " first" : "");
}

}  // namespace sg::graph
