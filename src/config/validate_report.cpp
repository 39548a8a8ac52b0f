// The rules' one-line summaries (docs/configuration.md's table) and the human form of a violation or a note.
#include "config/validate.h"
#include "core/strings.h"

namespace sg::config {
namespace {

const char* const kRuleSummaries[kNumRules] = {
    "cuda_graph_impl is none, local or transformer_engine; every scope is a known scope",
    "cuda_graph_impl none clears cuda_graph_scope (a note)",
    "graphs need model.use_te_rng_tracker and rng.te_rng_tracker both true; the two stay in sync",
    "full_iteration only with local and alone; local only with full_iteration (empty = "
    "full_iteration); scoped graphs use transformer_engine",
    "NaN checks run in every graph mode, local full_iteration included: the flags are computed on "
    "the device inside the graph (a note; Megatron refuses this combination)",
    "moe and moe_router are mutually exclusive; moe_preprocess requires moe_router",
    "each scope needs its layers: moe scopes MoE layers, mlp dense MLPs, mamba Mamba layers, attn attention",
    "the moe scope with token-dropless MoE (no capacity factor) is graphed (a note; Megatron needs token-drop "
    "MoE there)",
    "graphs need static shapes: packed sequences need pad_to_max_length and pad_cu_seqlens",
    "cpu_offloading is incompatible with CUDA graphs",
    "full recompute only with local full_iteration, not with transformer_engine scopes",
    "transformer_engine with moe recompute and moe_router in the scope is rejected",
    "a graphed module that is recomputed draws the same random numbers as its forward (a note; "
    "Megatron refuses dropout there)",
    "delay_wgrad_compute with attn or moe_router graphed needs gradient_accumulation_fusion and "
    "no linear biases",
    "cuda_graph_warmup_steps is an integer from 0 to 2^31 - 2; a warmup of train_iters or more never captures "
    "(a note)",
    "shapes are consistent; unimplemented features are noted (train refuses them)",
};

std::string format_values(const std::vector<KeyValue>& values) {
  std::vector<std::string> parts;
  for (const auto& kv : values) parts.push_back(kv.key + " = " + kv.value);
  return join(parts, ", ");
}

}  // namespace

const char* rule_summary(int rule) {
  return rule >= 1 && rule <= kNumRules ? kRuleSummaries[rule - 1] : "unknown rule";
}

std::string format_violation(const Violation& v) {
  std::string out = strprintf("[rule %d] %s\n", v.rule, v.message.c_str());
  if (!v.values.empty()) out += "  " + format_values(v.values) + "\n";
  out += "  fix: " + v.fix + "\n";
  return out;
}

std::string format_note(const Note& n) {
  std::string out = strprintf("note [rule %d]: %s", n.rule, n.message.c_str());
  if (!n.values.empty()) out += " (" + format_values(n.values) + ")";
  return out + "\n";
}

}  // namespace sg::config
