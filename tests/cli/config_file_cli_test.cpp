// --config-file as Megatron-Bridge's scripts take it: a YAML of keys set over the recipe, before the dotted
// overrides, in train, validate and config show alike; repeatable in order; a missing file or a bad key names the
// file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "process_util.h"

namespace {

using sg::test::run_stepgraph;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class ConfigFileCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("sg_config_file_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const std::filesystem::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }
  std::filesystem::path dir_;
};

TEST_F(ConfigFileCli, KeysAreSetOverTheRecipeBeforeTheOverrides) {
  // Bridge's tutorial layout: the deprecated train.eval_* names, a Bridge key without effect.
  const std::string file = write("pretrain.yaml",
                                 "train:\n  train_iters: 30\n  eval_interval: 10\nscheduler:\n"
                                 "  lr_warmup_iters: 3\nmodel:\n  context_parallel_size: 1\n");
  const auto shown = run_stepgraph({"config", "show", "llama/tiny", "--config-file", file, "train.train_iters=12"},
                                   /*merge_stderr=*/false);
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_TRUE(has(shown.output, "  train_iters: 12\n")) << shown.output;     // the override comes last
  EXPECT_TRUE(has(shown.output, "  eval_interval: 10\n")) << shown.output;   // from the file
  EXPECT_TRUE(has(shown.output, "  lr_warmup_iters: 3\n")) << shown.output;  // from the file
  EXPECT_TRUE(has(shown.output, "  hidden_size: 256\n")) << shown.output;    // the recipe's, kept
  EXPECT_TRUE(has(shown.output, "--config-file " + file + " llama/tiny")) << shown.output;
  // Repeated, in order: the second file's value wins.
  const std::string later = write("later.yaml", "scheduler:\n  lr_warmup_iters: 4\n");
  const auto both =
      run_stepgraph({"config", "show", "--config-file", file, "--config-file", later, "llama/tiny"}, false);
  ASSERT_EQ(both.exit_code, 0) << both.output;
  EXPECT_TRUE(has(both.output, "  lr_warmup_iters: 4\n")) << both.output;
  // validate reads it the same way.
  const auto valid = run_stepgraph({"validate", "llama/tiny", "--config-file", file});
  EXPECT_EQ(valid.exit_code, 0) << valid.output;
  EXPECT_TRUE(has(valid.output, "train.eval_interval (at " + file + ":3:18)")) << valid.output;
}

TEST_F(ConfigFileCli, AMissingFileOrABadKeyNamesTheFile) {
  const auto missing = run_stepgraph({"validate", "llama/tiny", "--config-file", (dir_ / "none.yaml").string()});
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_TRUE(has(missing.output, "none.yaml' is not a file (no such path)")) << missing.output;
  const std::string bad = write("bad.yaml", "checkpoint:\n  finetune: true\n");
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"validate", "llama/tiny", "--config-file", bad},
        std::vector<std::string>{"train", "llama/tiny", "--config-file", bad, "--cpu"}}) {
    const auto r = run_stepgraph(command);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_TRUE(has(r.output, bad + ":2:3: unknown key 'checkpoint.finetune'")) << r.output;
  }
}

}  // namespace
