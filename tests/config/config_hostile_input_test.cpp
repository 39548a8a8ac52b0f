// Config inputs that used to be misread or reported confusingly (issue 17): numbers that underflow
// to 0 or a denormal, a NUL byte in a recipe, an empty list item, an unknown recipe name; and the
// checkpoint-directory keys and the NaN-check note (rule 5) that replaced a refusal.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/validate.h"

namespace sg::config {
namespace {

std::string config_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::string override_error(const std::string& text) {
  return config_error([&] {
    Config c;
    apply_override(c, text);
  });
}

TEST(HostileConfig, UnderflowToZeroOrDenormalIsRefused) {
  // 1e400 was refused while 1e-400 silently became 0.0 (a learning rate of 0 trains nothing).
  std::string e = override_error("optimizer.lr=1e-400");
  EXPECT_NE(e.find("optimizer.lr"), std::string::npos) << e;
  EXPECT_NE(e.find("magnitude at least 2.2e-308, or 0"), std::string::npos) << e;
  EXPECT_NE(override_error("optimizer.adam_eps=4e-320").find("2.2e-308"), std::string::npos);  // denormal
  EXPECT_NE(override_error("optimizer.lr=1e400").find("double range"), std::string::npos);
  e = config_error([] { load_config_yaml("optimizer:\n  lr: 1.0e-999\n", "r.yaml"); });
  EXPECT_NE(e.find("r.yaml:2:"), std::string::npos) << e;
  // Zero written as zero, and small normal numbers, stay valid.
  for (const char* ok : {"optimizer.min_lr=0", "optimizer.min_lr=0.0", "optimizer.min_lr=0e-999",
                         "optimizer.adam_eps=1e-300", "optimizer.lr=-0.0"}) {
    EXPECT_EQ(override_error(ok), "") << ok;
  }
  Config c;
  apply_override(c, "optimizer.adam_eps=2.5e-308");
  EXPECT_DOUBLE_EQ(c.optimizer.adam_eps, 2.5e-308);
}

TEST(HostileConfig, ANulByteInARecipeIsNamedWithItsLine) {
  const std::string text = std::string("model:\n  num_layers: 2\n  hidden_size: \"a\\g") + '\0' + "\"\n";
  const std::string e = config_error([&] { load_config_yaml(text, "nul.yaml"); });
  EXPECT_NE(e.find("nul.yaml:3: the file holds a NUL byte"), std::string::npos) << e;
  EXPECT_EQ(e.find("unknown escape"), std::string::npos) << e;
}

// Megatron's null recompute_modules is [core_attn]: an empty override (an unset shell variable) is refused, not
// read as null; a YAML merge key says it is one.
TEST(HostileConfig, AnEmptyRecomputeModulesAndAMergeKeyAreNamed) {
  std::string e = override_error("model.recompute_modules=");
  EXPECT_NE(e.find("model.recompute_modules is empty"), std::string::npos) << e;
  EXPECT_NE(e.find("[] for none"), std::string::npos) << e;
  Config c = load_config("llama/tiny");
  apply_override(c, "model.recompute_modules=[]");
  EXPECT_TRUE(c.model.recompute_modules.empty());
  apply_override(c, "model.recompute_modules=null");
  EXPECT_EQ(c.model.recompute_modules, std::vector<std::string>{"core_attn"});
  e = config_error([] { load_config_yaml("optimizer:\n  <<: {lr: 0.0003}\n", "r.yaml"); });
  EXPECT_NE(e.find("YAML merge keys (<<) are not supported"), std::string::npos) << e;
}

TEST(HostileConfig, AnEmptyListItemSaysWhichItem) {
  std::string e = override_error("model.cuda_graph_scope=attn,,mlp");
  EXPECT_NE(e.find("item 2 of the list is empty"), std::string::npos) << e;
  EXPECT_EQ(e.find("list a list"), std::string::npos) << e;
  e = config_error([] { load_config_yaml("dataset:\n  data_path: [a, '', b]\n", "r.yaml"); });
  EXPECT_NE(e.find("item 2 of the list is empty"), std::string::npos) << e;
}

TEST(HostileConfig, AnUnknownRecipeMessageReadsAsSentences) {
  const std::string e = config_error([] { find_recipe("zzzz_no_such_recipe"); });
  EXPECT_NE(e.find("no shipped recipe has that name. Shipped recipes: "), std::string::npos) << e;
  EXPECT_EQ(e.find("name Shipped"), std::string::npos) << e;
}

TEST(CheckpointKeys, AutoResumeAndOverwriteAreKeysThatContradictEachOther) {
  Config c = load_config("llama/tiny", {"checkpoint.save=/tmp/x", "checkpoint.auto_resume=true"});
  EXPECT_TRUE(c.checkpoint.auto_resume);
  EXPECT_FALSE(c.checkpoint.overwrite);
  EXPECT_TRUE(validate(c).ok());
  for (const std::vector<std::string>& both :
       {std::vector<std::string>{"checkpoint.save=/tmp/x", "checkpoint.auto_resume=true", "checkpoint.overwrite=true"},
        std::vector<std::string>{"checkpoint.save=/tmp/x", "checkpoint.load=/tmp/x", "checkpoint.overwrite=true"},
        // The same folder spelled another way: a trailing separator, a "./", a "..".
        std::vector<std::string>{"checkpoint.save=/tmp/x", "checkpoint.load=/tmp/x/", "checkpoint.overwrite=true"},
        std::vector<std::string>{"checkpoint.save=./ck", "checkpoint.load=ck", "checkpoint.overwrite=true"},
        std::vector<std::string>{"checkpoint.save=runs/a/../ck//", "checkpoint.load=runs/ck",
                                 "checkpoint.overwrite=true"}}) {
    SCOPED_TRACE(both[1]);
    const ValidationReport r = validate(load_config("llama/tiny", both));
    ASSERT_EQ(r.violations.size(), 1u);
    EXPECT_EQ(r.violations[0].rule, 16);
    EXPECT_NE(r.violations[0].message.find("checkpoint.overwrite"), std::string::npos);
    // The fix turns off the resume key that is on (a run's config.yaml keeps auto_resume: adding overwrite alone
    // to it fails).
    const std::string& fix = r.violations[0].fix;
    EXPECT_NE(fix.find(both[1] == "checkpoint.auto_resume=true" ? "to start over: checkpoint.overwrite=true "
                                                                  "checkpoint.auto_resume=false"
                                                                : "to start over: checkpoint.overwrite=true "
                                                                  "checkpoint.load=null"),
              std::string::npos)
        << fix;
  }
  // Another folder starts over without a conflict (checkpoint.load must exist: train would refuse it).
  const std::string save = ::testing::TempDir() + "sg_checkpoint_keys_" + std::to_string(::getpid());
  std::filesystem::create_directories(save + "/old");
  EXPECT_TRUE(validate(load_config("llama/tiny", {"checkpoint.save=" + save, "checkpoint.load=" + save + "/old",
                                                  "checkpoint.overwrite=true"}))
                  .ok());
  std::filesystem::remove_all(save);
}

// validate is train's pre-flight check: a checkpoint.load that does not exist is refused there too, except as
// checkpoint.save (Bridge's resume idiom: a first run finds nothing and starts fresh).
TEST(CheckpointKeys, ALoadFolderThatDoesNotExistIsRefusedUnlessItIsTheSaveFolder) {
  const std::string missing = ::testing::TempDir() + "sg_no_such_checkpoint_" + std::to_string(::getpid());
  const ValidationReport r = validate(load_config("llama/tiny", {"checkpoint.load=" + missing}));
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_NE(r.violations[0].message.find("checkpoint.load " + missing + ": no such directory"), std::string::npos)
      << r.violations[0].message;
  EXPECT_NE(r.violations[0].fix.find("null to start fresh"), std::string::npos);
  EXPECT_TRUE(validate(load_config("llama/tiny", {"checkpoint.load=" + missing, "checkpoint.save=" + missing})).ok());
}

// Bridge's checkpoint.most_recent_k: -1 (the default) keeps every checkpoint, k >= 1 the k newest; 0 and other
// negative values are refused naming the key, the value and the fix; set without checkpoint.save it is a note.
TEST(CheckpointKeys, MostRecentKIsMinusOneOrACountAndANoteWithoutSave) {
  EXPECT_EQ(Config{}.checkpoint.most_recent_k, -1);
  EXPECT_EQ(load_config("llama/tiny").checkpoint.most_recent_k, -1);
  for (const char* ok : {"-1", "1", "3", "1000"}) {
    SCOPED_TRACE(ok);
    const Config c =
        load_config("llama/tiny", {"checkpoint.save=/tmp/x", std::string("checkpoint.most_recent_k=") + ok});
    EXPECT_EQ(c.checkpoint.most_recent_k, std::stoll(ok));
    const ValidationReport r = validate(c);
    EXPECT_TRUE(r.ok()) << (r.violations.empty() ? "" : format_violation(r.violations[0]));
    for (const Note& n : r.notes) EXPECT_EQ(n.message.find("most_recent_k"), std::string::npos) << n.message;
  }
  for (const char* bad : {"0", "-2", "-100"}) {
    SCOPED_TRACE(bad);
    const ValidationReport r =
        validate(load_config("llama/tiny", {"checkpoint.save=/tmp/x", std::string("checkpoint.most_recent_k=") + bad}));
    ASSERT_EQ(r.violations.size(), 1u);
    const Violation& v = r.violations[0];
    EXPECT_EQ(v.rule, 16);
    EXPECT_NE(v.message.find(std::string("checkpoint.most_recent_k = ") + bad), std::string::npos) << v.message;
    EXPECT_NE(v.message.find("-1 (keep every checkpoint) or a count >= 1"), std::string::npos) << v.message;
    ASSERT_EQ(v.values.size(), 1u);
    EXPECT_EQ(v.values[0].key, "checkpoint.most_recent_k");
    EXPECT_EQ(v.values[0].value, bad);
    EXPECT_NE(v.fix.find("checkpoint.most_recent_k=-1 to keep every checkpoint"), std::string::npos) << v.fix;
    EXPECT_EQ(v.message.find("not even the one just saved") != std::string::npos, std::string(bad) == "0") << v.message;
  }
  // The YAML key reads as the override does; `config show` prints it.
  EXPECT_EQ(load_config_yaml("checkpoint:\n  most_recent_k: 2\n", "r.yaml").checkpoint.most_recent_k, 2);
  EXPECT_NE(emit_yaml(load_config("llama/tiny")).find("  most_recent_k: -1\n"), std::string::npos);
  EXPECT_NE(override_error("checkpoint.most_recent_k=two").find("checkpoint.most_recent_k"), std::string::npos);
  // Without checkpoint.save nothing is written, so nothing is removed: a note, not an error.
  const ValidationReport unsaved = validate(load_config("llama/tiny", {"checkpoint.most_recent_k=2"}));
  EXPECT_TRUE(unsaved.ok());
  bool noted = false;
  for (const Note& n : unsaved.notes) {
    noted |= n.rule == 16 && n.message ==
                                 "checkpoint.most_recent_k without checkpoint.save: no checkpoints are "
                                 "written, so none are removed";
  }
  EXPECT_TRUE(noted);
}

TEST(NanChecks, AWholeStepGraphKeepsTheChecksWithANote) {
  // Rule 5 was a refusal (Megatron's host-side checks cannot run inside a whole-step graph); the
  // flags are device-side here, so it is a note and the checks stay on.
  const ValidationReport r =
      validate(load_config("llama/tiny", {"model.cuda_graph_impl=local", "rerun_state_machine.check_for_nan_in_loss=true",
                                          "ddp.check_for_nan_in_grad=true"}));
  EXPECT_TRUE(r.ok()) << (r.violations.empty() ? "" : format_violation(r.violations[0]));
  EXPECT_TRUE(r.config.rerun_state_machine.check_for_nan_in_loss);
  EXPECT_TRUE(r.config.ddp.check_for_nan_in_grad);
  bool noted = false;
  for (const Note& n : r.notes) noted |= n.rule == 5 && n.message.find("inside the graph") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(NanChecks, EveryShippedRecipeStopsOnNaN) {
  for (const auto& name : shipped_recipe_names()) {
    SCOPED_TRACE(name);
    const Config c = load_config(name);
    EXPECT_TRUE(c.rerun_state_machine.check_for_nan_in_loss);
    EXPECT_TRUE(c.ddp.check_for_nan_in_grad);
  }
}

}  // namespace
}  // namespace sg::config
