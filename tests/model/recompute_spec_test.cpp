// Megatron's recompute spellings (model/recompute_spec.h): one table, every name parses back, and the
// full-recompute defaults that model_config and `bench --compare` both fill in.
#include "model/recompute_spec.h"

#include <gtest/gtest.h>

namespace sg::model {
namespace {

TEST(RecomputeSpec, EveryGranularityNameParsesBack) {
  // Megatron's --recompute-granularity choices, in its order: validation lists them so.
  EXPECT_EQ(recompute_granularity_names(), (std::vector<std::string>{"full", "selective"}));
  for (const std::string& name : recompute_granularity_names()) {
    const std::optional<RecomputeGranularity> granularity = find_recompute_granularity(name);
    ASSERT_TRUE(granularity.has_value()) << name;
    EXPECT_EQ(recompute_granularity_name(*granularity), name);
  }
  // none is the key unset: named for `bench --compare`'s recompute_none, never a config spelling.
  EXPECT_STREQ(recompute_granularity_name(RecomputeGranularity::none), "none");
  EXPECT_FALSE(find_recompute_granularity("none").has_value());
  EXPECT_FALSE(find_recompute_granularity("").has_value());
  EXPECT_FALSE(find_recompute_granularity("Full").has_value());
}

TEST(RecomputeSpec, EveryMethodNameParsesBack) {
  EXPECT_EQ(recompute_method_names(), (std::vector<std::string>{"uniform", "block"}));
  for (RecomputeMethod method : {RecomputeMethod::uniform, RecomputeMethod::block}) {
    EXPECT_EQ(find_recompute_method(recompute_method_name(method)), method);
  }
  EXPECT_FALSE(find_recompute_method("blocks").has_value());
}

TEST(RecomputeSpec, FullRecomputeDefaultsAreUniformOneLayer) {
  constexpr FullRecomputeDefaults defaults = full_recompute_defaults();
  EXPECT_EQ(defaults.method, RecomputeMethod::uniform);
  EXPECT_EQ(defaults.num_layers, 1);
}

}  // namespace
}  // namespace sg::model
