#pragma once
// The model and batch shapes the layer kinds' arithmetic (FLOPs, host memory) is checked on: every
// shipped recipe, and variants that reach each kind's other branches (tied embeddings, kv_channels,
// a shared expert, expert capacity, MoE with SwiGLU experts in a hybrid pattern, several microbatches;
// Nemotron 3's squared-ReLU experts are the shipped hybrid/tiny_hybrid_moe).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "config/model_config.h"
#include "config/validate.h"
#include "model/spec.h"
#include "shipped_recipe_data.h"

namespace sg::test {

struct StandardShape {
  std::string name;  // "llama/tiny", "llama/tiny model.kv_channels=96"
  model::ModelSpec model;
  model::BatchSpec batch;
};

inline std::vector<StandardShape> standard_shapes() {
  struct Variant {
    std::string recipe;
    std::vector<std::string> overrides;
  };
  std::vector<Variant> variants;
  for (const std::string& name : config::shipped_recipe_names()) variants.push_back({name, {}});
  variants.push_back({"llama/tiny", {"model.share_embeddings_and_output_weights=true", "train.global_batch_size=12"}});
  variants.push_back({"llama/tiny", {"model.kv_channels=96"}});
  variants.push_back({"moe/tiny_moe", {"model.moe_shared_expert_intermediate_size=128"}});
  variants.push_back({"moe/tiny_moe", {"model.moe_expert_capacity_factor=1.5"}});
  variants.push_back({"hybrid/tiny_hybrid",
                      {"model.hybrid_override_pattern=M*-EM*E-", "model.activation_func=silu",
                       "model.gated_linear_unit=true", "model.num_moe_experts=4", "model.moe_router_topk=2",
                       "model.moe_ffn_hidden_size=128", "model.moe_token_dispatcher_type=alltoall"}});
  std::vector<StandardShape> shapes;
  const InShippedRecipeDataDir in_data_dir;  // validation checks that llama/demo's dataset exists
  for (const Variant& v : variants) {
    std::string name = v.recipe;
    for (const std::string& o : v.overrides) name += " " + o;
    const config::ValidationReport report = config::validate(config::load_config(v.recipe, v.overrides));
    EXPECT_TRUE(report.ok()) << name << ": " << (report.ok() ? "" : config::format_violation(report.violations[0]));
    if (!report.ok()) continue;
    shapes.push_back({name, config::model_spec(report.config), config::batch_spec(report.config)});
  }
  return shapes;
}

}  // namespace sg::test
