// Bridge's mixed_precision section: a recipe's name loads as the keys the recipe sets (in a file and as an
// override), the section's grad_reduce_in_fp32 is copied over ddp's and its keys replace the model's and optimizer's
// of the same names, each replaced value in a note, as Bridge's MixedPrecisionConfig.setup does; recipes that train in
// fp16, FP8 or FP4 are refused by the key that asks for it; and a Hydra reference to a torch.dtype (Bridge's YAML dump)
// reads as the dtype's name.
#include "config/mixed_precision.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/validate.h"
#include "core/error.h"
#include "core/strings.h"
#include "validation_report_text.h"

namespace sg::config {
namespace {

using test::check_recipe;
using test::describe;
using test::names_key;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string replaced_once(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

std::string base_yaml() {
  return emit_yaml(load_config("llama/tiny", {}));
}

std::string load_error(const std::string& yaml) {
  try {
    load_config_yaml(yaml, "saved.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::vector<const Violation*> violations_naming(const ValidationReport& r, const std::string& prefix) {
  std::vector<const Violation*> out;
  for (const Violation& v : r.violations) {
    for (const KeyValue& kv : v.values) {
      if (kv.key.rfind(prefix, 0) == 0) {
        out.push_back(&v);
        break;
      }
    }
  }
  return out;
}

const Note* note_containing(const ValidationReport& r, const std::string& text) {
  for (const Note& n : r.notes) {
    if (contains(n.message, text)) return &n;
  }
  return nullptr;
}

TEST(MixedPrecision, ARecipeNameLoadsAsTheKeysItSets) {
  const Config from_file = load_config_yaml(base_yaml() + "mixed_precision: bf16_mixed\n", "saved.yaml");
  EXPECT_EQ(format_value(from_file, "mixed_precision.bf16"), "true");
  EXPECT_EQ(format_value(from_file, "mixed_precision.params_dtype"), "torch.bfloat16");
  EXPECT_EQ(format_value(from_file, "mixed_precision.grad_reduce_in_fp32"), "true");
  EXPECT_EQ(format_value(from_file, "mixed_precision.fp8"), "null");
  // The override and NeMo 2's hyphens give the same; the emitted map reads back as itself.
  const Config overridden = load_config("llama/tiny", {"mixed_precision=bf16-mixed"});
  EXPECT_EQ(emit_yaml(overridden), emit_yaml(from_file));
  const std::string yaml = emit_yaml(from_file);
  EXPECT_TRUE(contains(yaml, "mixed_precision:\n  bf16: true\n")) << yaml;
  EXPECT_EQ(emit_yaml(load_config_yaml(yaml, "emitted")), yaml);
  // A config without the section emits none.
  EXPECT_FALSE(contains(base_yaml(), "mixed_precision"));
  // A recipe name replaces the whole section, as Bridge replaces it with the recipe's MixedPrecisionConfig.
  const Config replaced = load_config("llama/tiny", {"mixed_precision.fp8=hybrid", "mixed_precision=bf16_mixed"});
  EXPECT_EQ(format_value(replaced, "mixed_precision.fp8"), "null");
  // null is Bridge's None: no section.
  EXPECT_EQ(emit_yaml(load_config("llama/tiny", {"mixed_precision=bf16_mixed", "mixed_precision=null"})), base_yaml());
  // The recipe Bridge's LLM recipes use validates as what stepgraph does.
  const ValidationReport r = validate(from_file);
  EXPECT_TRUE(r.ok()) << describe(r);
  EXPECT_TRUE(r.config.ddp.grad_reduce_in_fp32);
  EXPECT_EQ(note_containing(r, "replaced by the mixed_precision section"), nullptr) << describe(r);
}

TEST(MixedPrecision, AnUnknownRecipeNameIsAnErrorListingTheRecipes) {
  const std::string e = load_error(base_yaml() + "mixed_precision: bf16_mixd\n");
  EXPECT_TRUE(contains(e, "saved.yaml:")) << e;
  EXPECT_TRUE(contains(e, "'bf16_mixd' is no Megatron-Bridge mixed-precision recipe")) << e;
  for (const std::string& name : mixed_precision_recipe_names()) EXPECT_TRUE(contains(e, name)) << e;
  Config c;
  EXPECT_THROW(apply_override(c, "mixed_precision=fp32_mixed"), ConfigError);
  EXPECT_EQ(mixed_precision_recipe_names().size(), 14u);
}

TEST(MixedPrecision, RecipesThatTrainInAnotherPrecisionAreRefusedByTheKeyThatAsksForIt) {
  const struct {
    const char* recipe;
    const char* key;
  } cases[] = {
      {"bf16_with_fp8_delayed_scaling_mixed", "mixed_precision.fp8"},
      {"bf16_with_mxfp8_mixed", "mixed_precision.fp8"},
      {"nemotron_h_bf16_with_fp8_current_scaling_mixed", "mixed_precision.fp8"},
      {"bf16_with_fp8_subchannel_scaling_mixed", "mixed_precision.fp8"},
      {"nemotron_3_super_bf16_with_nvfp4_mixed", "mixed_precision.fp4"},
  };
  for (const auto& c : cases) {
    const ValidationReport r = check_recipe("llama/tiny", {std::string("mixed_precision=") + c.recipe});
    const auto refused = violations_naming(r, "mixed_precision.");
    ASSERT_EQ(refused.size(), 1u) << c.recipe << "\n" << describe(r);
    EXPECT_TRUE(names_key(*refused[0], c.key)) << c.recipe << "\n" << describe(r);
    EXPECT_TRUE(contains(refused[0]->fix, "remove " + std::string(c.key))) << describe(r);
  }
  // fp16: the precision and the fp16 weights; its bf16-free gradients are copied over ddp's.
  const ValidationReport fp16 = check_recipe("llama/tiny", {"mixed_precision=fp16_mixed"});
  const auto refused = violations_naming(fp16, "mixed_precision.");
  ASSERT_EQ(refused.size(), 2u) << describe(fp16);
  EXPECT_TRUE(names_key(*refused[0], "mixed_precision.fp16")) << describe(fp16);
  EXPECT_TRUE(names_key(*refused[1], "mixed_precision.params_dtype")) << describe(fp16);
  EXPECT_FALSE(fp16.config.ddp.grad_reduce_in_fp32);
}

TEST(MixedPrecision, TheSectionsGradReduceIsCopiedOverDdpsWithANote) {
  // bf16 main gradients from the section, over ddp's true.
  const ValidationReport bf16_grads =
      check_recipe("llama/tiny", {"mixed_precision=bf16_mixed", "mixed_precision.grad_reduce_in_fp32=false"});
  EXPECT_TRUE(bf16_grads.ok()) << describe(bf16_grads);
  EXPECT_FALSE(bf16_grads.config.ddp.grad_reduce_in_fp32);
  const Note* note = note_containing(bf16_grads, "replaced by the mixed_precision section");
  ASSERT_NE(note, nullptr) << describe(bf16_grads);
  ASSERT_EQ(note->values.size(), 1u);
  EXPECT_EQ(note->values[0].key, "ddp.grad_reduce_in_fp32");
  EXPECT_EQ(note->values[0].value, "true");  // the value replaced
  // Unset, the section's is Bridge's default, true: it replaces an explicit ddp false.
  const ValidationReport unset =
      check_recipe("llama/tiny", {"mixed_precision.bf16=true", "ddp.grad_reduce_in_fp32=false"});
  EXPECT_TRUE(unset.config.ddp.grad_reduce_in_fp32) << describe(unset);
  EXPECT_NE(note_containing(unset, "replaced by the mixed_precision section"), nullptr) << describe(unset);
  // Without the section ddp's value stands; a value that is no boolean is refused, not copied.
  EXPECT_FALSE(check_recipe("llama/tiny", {"ddp.grad_reduce_in_fp32=false"}).config.ddp.grad_reduce_in_fp32);
  const ValidationReport odd =
      check_recipe("llama/tiny", {"mixed_precision.bf16=true", "mixed_precision.grad_reduce_in_fp32=maybe"});
  ASSERT_EQ(violations_naming(odd, "mixed_precision.grad_reduce_in_fp32").size(), 1u) << describe(odd);
  EXPECT_TRUE(odd.config.ddp.grad_reduce_in_fp32);
  // Its value, having an effect, is not among the keys noted as having none.
  const Note* none = note_containing(bf16_grads, "no effect in stepgraph");
  ASSERT_NE(none, nullptr);
  EXPECT_FALSE(contains(none->message, "grad_reduce_in_fp32")) << none->message;
}

TEST(MixedPrecision, TheModelsAndOptimizersPrecisionKeysGiveWayToTheSection) {
  // Alone, the model's bf16 false is fp32 training: refused.
  const ValidationReport alone = check_recipe("llama/tiny", {"model.bf16=false"});
  ASSERT_EQ(violations_naming(alone, "model.bf16").size(), 1u) << describe(alone);
  EXPECT_TRUE(check_recipe("llama/tiny", {"model.bf16=true", "model.params_dtype=torch.float32"}).ok());
  // With the section, Bridge copies the section's values over them: valid, and each replaced value is named.
  const ValidationReport r = check_recipe(
      "llama/tiny", {"model.bf16=false", "optimizer.params_dtype=torch.float16", "mixed_precision=bf16_mixed"});
  EXPECT_TRUE(r.ok()) << describe(r);
  const Note* note = note_containing(r, "replaced by the mixed_precision section");
  ASSERT_NE(note, nullptr) << describe(r);
  std::vector<std::string> keys;
  for (const KeyValue& kv : note->values) keys.push_back(kv.key + "=" + kv.value);
  EXPECT_EQ(join(keys, " "), "model.bf16=false optimizer.params_dtype=torch.float16");
  EXPECT_EQ(format_value(r.config, "model.bf16"), "null");
  // A section that sets no precision is Bridge's fp32 default unless merged over a recipe: named.
  const ValidationReport no_precision = check_recipe("llama/tiny", {"mixed_precision.fp8_margin=0"});
  EXPECT_NE(note_containing(no_precision, "sets none of bf16, fp16, fp32"), nullptr) << describe(no_precision);
  EXPECT_EQ(note_containing(r, "sets none of bf16, fp16, fp32"), nullptr) << describe(r);
}

TEST(MixedPrecision, AHydraReferenceToADtypeOrFunctionReadsAsItsName) {
  const Config c = load_config_yaml(base_yaml() +
                                        "mixed_precision:\n"
                                        "  _target_: megatron.bridge.training.mixed_precision.MixedPrecisionConfig\n"
                                        "  bf16: true\n"
                                        "  params_dtype:\n"
                                        "    _target_: torch.bfloat16\n"
                                        "    _call_: false\n",
                                    "saved.yaml");
  EXPECT_EQ(format_value(c, "mixed_precision.params_dtype"), "torch.bfloat16");
  EXPECT_TRUE(validate(c).ok()) << describe(validate(c));
  const std::string with_silu =
      replaced_once(base_yaml(), "  activation_func: silu\n",
                    "  activation_func: {_target_: torch.nn.functional.silu, _call_: false}\n");
  ASSERT_NE(with_silu, base_yaml());
  EXPECT_EQ(load_config_yaml(with_silu, "saved.yaml").model.activation_func, "torch.nn.functional.silu");
  // A reference Bridge would call (an object it builds) is no value here: a type error.
  const std::string called = load_error(base_yaml() +
                                        "mixed_precision:\n  params_dtype: {_target_: torch.bfloat16, "
                                        "_call_: true}\n");
  EXPECT_TRUE(contains(called, "mixed_precision.params_dtype")) << called;
}

}  // namespace
}  // namespace sg::config
