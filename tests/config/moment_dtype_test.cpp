// config/moment_dtype.h: the names optimizer.exp_avg_dtype and optimizer.exp_avg_sq_dtype accept (Megatron's
// --exp-avg-dtype / --exp-avg-sq-dtype spellings that stepgraph stores: fp32 and bf16), the dtype each names,
// and validation's answers through that table: every accepted spelling passes (bf16 with the precision-aware
// optimizer), Bridge's spellings of the same dtypes (torch.float32, float32, torch.bfloat16, bfloat16) are read as
// fp32 and bf16 with a note, every other one — Megatron's fp16 and fp8, other cases, other words for the same type,
// blanks — is refused with a violation naming the key, the value and the accepted names; bf16 without the
// precision-aware optimizer is refused naming both keys.
#include "config/moment_dtype.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/validate.h"
#include "validation_report_text.h"

namespace sg::config {
namespace {

const std::vector<std::string> kKeys = {"optimizer.exp_avg_dtype", "optimizer.exp_avg_sq_dtype"};

// Spellings a user may try that are not stepgraph's names.
const std::vector<std::string> kRefused = {"fp16",  "fp8",           "FP32",  "BF16",          "Fp32",     "bf16 ",
                                           " fp32", "Float32",       "float", "torch.float16", "f32",      "",
                                           "32",    "torch.Float32", "fp64",  "bf8",           "fp32,bf16"};

// Bridge's spellings (how it writes a torch.dtype, and the names its str_to_dtype reads back) and the name each is.
const std::vector<std::pair<std::string, std::string>> kBridgeSpellings = {
    {"torch.float32", "fp32"}, {"float32", "fp32"}, {"torch.bfloat16", "bf16"}, {"bfloat16", "bf16"}};

using test::describe;
using test::names_key;

// The violations that name `key`.
std::vector<Violation> about(const ValidationReport& r, const std::string& key) {
  std::vector<Violation> out;
  for (const auto& v : r.violations) {
    if (names_key(v, key)) out.push_back(v);
  }
  return out;
}

// llama/tiny with one moment key set to `value` (the other left at its default), the precision-aware
// optimizer on or off.
Config with_moment_dtype(const std::string& key, const std::string& value, bool precision_aware) {
  Config c = load_config("llama/tiny", {});
  c.optimizer.use_precision_aware_optimizer = precision_aware;
  (key == "optimizer.exp_avg_dtype" ? c.optimizer.exp_avg_dtype : c.optimizer.exp_avg_sq_dtype) = value;
  return c;
}

TEST(MomentDtype, TheNamesAreFp32AndBf16) {
  const std::vector<std::string>& names = moment_dtype_names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), (std::set<std::string>{"fp32", "bf16"}));
  EXPECT_EQ(names.size(), 2u) << "a name listed twice";
  EXPECT_EQ(&names, &moment_dtype_names()) << "one table, not a fresh copy per call";
}

TEST(MomentDtype, EveryNameMapsToItsDtype) {
  EXPECT_EQ(moment_dtype_named("fp32"), kernels::FloatDtype::fp32);
  EXPECT_EQ(moment_dtype_named("bf16"), kernels::FloatDtype::bf16);
  // The list and the lookup agree: every listed name is known, and to a different dtype.
  std::set<kernels::FloatDtype> seen;
  for (const std::string& name : moment_dtype_names()) {
    const auto dtype = moment_dtype_named(name);
    ASSERT_TRUE(dtype.has_value()) << name << " is listed but not known";
    EXPECT_TRUE(seen.insert(*dtype).second) << name << " names a dtype another name already names";
  }
}

TEST(MomentDtype, EveryOtherSpellingIsUnknown) {
  for (const std::string& name : kRefused) {
    EXPECT_FALSE(moment_dtype_named(name).has_value()) << "'" << name << "'";
    EXPECT_FALSE(moment_dtype_spelled(name).has_value()) << "'" << name << "'";
  }
  // Bridge's spellings are no names: validation rewrites them first (below), so only fp32 and bf16 ever run.
  for (const auto& [spelling, name] : kBridgeSpellings) {
    EXPECT_FALSE(moment_dtype_named(spelling).has_value()) << spelling;
    EXPECT_EQ(moment_dtype_spelled(spelling), name) << spelling;
  }
  for (const std::string& name : moment_dtype_names()) EXPECT_FALSE(moment_dtype_spelled(name).has_value()) << name;
}

// Bridge's spellings validate as the names: the config then holds (and `config show` prints) fp32 / bf16, as if they
// had been written so, and one note says which keys were read how.
TEST(MomentDtype, BridgesSpellingsAreReadAsTheNamesWithANote) {
  for (const std::string& key : kKeys) {
    for (const auto& [spelling, name] : kBridgeSpellings) {
      SCOPED_TRACE(key + "=" + spelling);
      const ValidationReport r = validate(with_moment_dtype(key, spelling, true));
      ASSERT_TRUE(r.ok()) << describe(r);
      EXPECT_EQ(
          key == "optimizer.exp_avg_dtype" ? r.config.optimizer.exp_avg_dtype : r.config.optimizer.exp_avg_sq_dtype,
          name);
      const ValidationReport as_name = validate(with_moment_dtype(key, name, true));
      EXPECT_EQ(emit_yaml(r.config), emit_yaml(as_name.config));
      std::vector<Note> notes;
      for (const Note& n : r.notes) {
        if (n.message.find("Bridge's spelling") != std::string::npos) notes.push_back(n);
      }
      ASSERT_EQ(notes.size(), 1u) << describe(r);
      EXPECT_EQ(notes[0].rule, 16);
      EXPECT_NE(notes[0].message.find(key + " " + spelling + " as " + name), std::string::npos) << notes[0].message;
      ASSERT_EQ(notes[0].values.size(), 1u);
      EXPECT_EQ(notes[0].values[0].key, key);
      EXPECT_EQ(notes[0].values[0].value, spelling);
      EXPECT_EQ(as_name.notes.size() + 1, r.notes.size()) << describe(r);  // the names themselves: no such note
    }
  }
  // Both keys in one note; Bridge's recipes write both as torch.float32, without the precision-aware optimizer.
  const ValidationReport both = validate(
      load_config("llama/tiny", {"optimizer.exp_avg_dtype=torch.float32", "optimizer.exp_avg_sq_dtype=torch.float32"}));
  ASSERT_TRUE(both.ok()) << describe(both);
  size_t noted = 0;
  for (const Note& n : both.notes) noted += n.message.find("Bridge's spelling") != std::string::npos ? 1 : 0;
  EXPECT_EQ(noted, 1u) << describe(both);
  EXPECT_EQ(emit_yaml(both.config), emit_yaml(validate(load_config("llama/tiny")).config));
  // bf16 in Bridge's spelling still needs the precision-aware optimizer, and the refusal names the dtype as stepgraph's.
  for (const std::string& key : kKeys) {
    const ValidationReport r = validate(with_moment_dtype(key, "torch.bfloat16", false));
    const std::vector<Violation> v = about(r, key);
    ASSERT_EQ(v.size(), 1u) << describe(r);
    EXPECT_TRUE(names_key(v[0], "optimizer.use_precision_aware_optimizer")) << describe(r);
    EXPECT_NE(v[0].fix.find(key + "=fp32"), std::string::npos) << v[0].fix;
  }
}

TEST(MomentDtype, ValidationAcceptsEveryNameForBothKeys) {
  for (const std::string& key : kKeys) {
    for (const std::string& name : moment_dtype_names()) {
      SCOPED_TRACE(key + "=" + name);
      const ValidationReport r = validate(with_moment_dtype(key, name, true));
      EXPECT_TRUE(r.ok()) << describe(r);
    }
    // fp32, the default, needs no precision-aware optimizer.
    const ValidationReport plain = validate(with_moment_dtype(key, "fp32", false));
    EXPECT_TRUE(plain.ok()) << key << "=fp32:\n" << describe(plain);
  }
  // Both in bf16 at once.
  Config c = load_config("llama/tiny", {"optimizer.exp_avg_dtype=bf16", "optimizer.exp_avg_sq_dtype=bf16",
                                        "optimizer.use_precision_aware_optimizer=true"});
  EXPECT_TRUE(validate(c).ok()) << describe(validate(c));
}

TEST(MomentDtype, ValidationRefusesEveryOtherSpellingNamingTheKeyAndTheAcceptedNames) {
  for (const std::string& key : kKeys) {
    for (const std::string& value : kRefused) {
      SCOPED_TRACE(key + "='" + value + "'");
      const ValidationReport r = validate(with_moment_dtype(key, value, true));
      const std::vector<Violation> v = about(r, key);
      ASSERT_EQ(v.size(), 1u) << describe(r);
      EXPECT_EQ(v[0].rule, 16);
      EXPECT_NE(v[0].message.find(key), std::string::npos) << v[0].message;
      EXPECT_NE(v[0].message.find("'" + value + "'"), std::string::npos) << v[0].message;
      for (const std::string& name : moment_dtype_names()) {
        EXPECT_NE(v[0].fix.find(name), std::string::npos) << "the fix does not offer " << name << ": " << v[0].fix;
      }
      const std::string shown = format_violation(v[0]);
      EXPECT_NE(shown.find(key), std::string::npos) << shown;
      // Only this key is wrong: nothing else is reported.
      EXPECT_EQ(r.violations.size(), 1u) << describe(r);
    }
  }
}

// A near miss gets the closest name suggested.
TEST(MomentDtype, ANearMissSuggestsTheName) {
  const ValidationReport r = validate(with_moment_dtype("optimizer.exp_avg_dtype", "bf61", true));
  const std::vector<Violation> v = about(r, "optimizer.exp_avg_dtype");
  ASSERT_EQ(v.size(), 1u) << describe(r);
  EXPECT_NE(v[0].fix.find("'bf16'"), std::string::npos) << v[0].fix;
}

// Both keys wrong: one violation each, each naming its own key.
TEST(MomentDtype, BothKeysAreCheckedSeparately) {
  Config c = load_config("llama/tiny", {"optimizer.use_precision_aware_optimizer=true"});
  c.optimizer.exp_avg_dtype = "fp16";
  c.optimizer.exp_avg_sq_dtype = "fp8";
  const ValidationReport r = validate(c);
  ASSERT_EQ(about(r, "optimizer.exp_avg_dtype").size(), 1u) << describe(r);
  ASSERT_EQ(about(r, "optimizer.exp_avg_sq_dtype").size(), 1u) << describe(r);
  EXPECT_NE(about(r, "optimizer.exp_avg_dtype")[0].message.find("'fp16'"), std::string::npos);
  EXPECT_NE(about(r, "optimizer.exp_avg_sq_dtype")[0].message.find("'fp8'"), std::string::npos);
}

// bf16 is a name stepgraph has, but only the precision-aware optimizer stores moments in it (Megatron's
// rule): refused without it, naming the key and the switch, and the fix offers both ways out.
TEST(MomentDtype, Bf16NeedsThePrecisionAwareOptimizer) {
  for (const std::string& key : kKeys) {
    SCOPED_TRACE(key);
    const ValidationReport r = validate(with_moment_dtype(key, "bf16", false));
    const std::vector<Violation> v = about(r, key);
    ASSERT_EQ(v.size(), 1u) << describe(r);
    EXPECT_EQ(v[0].rule, 16);
    EXPECT_TRUE(names_key(v[0], "optimizer.use_precision_aware_optimizer")) << describe(r);
    EXPECT_NE(v[0].message.find(key), std::string::npos) << v[0].message;
    EXPECT_NE(v[0].message.find("bf16"), std::string::npos) << v[0].message;
    EXPECT_NE(v[0].fix.find("optimizer.use_precision_aware_optimizer=true"), std::string::npos) << v[0].fix;
    EXPECT_NE(v[0].fix.find(key + "=fp32"), std::string::npos) << v[0].fix;
    EXPECT_EQ(r.violations.size(), 1u) << describe(r);
  }
  // An unknown name is not also told it needs the precision-aware optimizer: one violation, the name's.
  const ValidationReport r = validate(with_moment_dtype("optimizer.exp_avg_dtype", "fp16", false));
  ASSERT_EQ(r.violations.size(), 1u) << describe(r);
  EXPECT_FALSE(names_key(r.violations[0], "optimizer.use_precision_aware_optimizer")) << describe(r);
}

}  // namespace
}  // namespace sg::config
