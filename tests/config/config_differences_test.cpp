// config/config_differences.h: a configuration as one line a key, and the keys two such texts differ in (how
// data-parallel ranks find that they were started with different configurations).
#include "config/config_differences.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "config/config.h"

namespace sg::config {
namespace {

size_t count_lines(const std::string& text) {
  size_t n = 0;
  for (const char c : text) n += c == '\n' ? 1 : 0;
  return n;
}

TEST(ConfigDifferences, EveryKeyIsOneLineWithItsValue) {
  const Config config = load_config("llama/tiny", {"optimizer.lr=0.00025", "model.cuda_graph_scope=[attn,mlp]"});
  const std::string lines = key_value_lines(config);
  EXPECT_EQ(count_lines(lines), config_keys().size());
  EXPECT_NE(lines.find("optimizer.lr = " + format_value(config, "optimizer.lr") + "\n"), std::string::npos) << lines;
  EXPECT_NE(lines.find("model.cuda_graph_scope = [attn, mlp]\n"), std::string::npos);
  EXPECT_EQ(key_value_lines(load_config("llama/tiny", {"optimizer.lr=0.00025", "model.cuda_graph_scope=[attn,mlp]"})),
            lines)
      << "the same configuration gives the same text";
}

TEST(ConfigDifferences, SameConfigurationsHaveNoDifference) {
  const std::string lines = key_value_lines(load_config("moe/tiny_moe", {}));
  EXPECT_TRUE(key_differences(lines, lines).empty());
}

TEST(ConfigDifferences, TheDifferingKeysAreNamedWithBothValuesInKeyOrder) {
  const std::string a = key_value_lines(load_config("llama/tiny", {}));
  const std::string b =
      key_value_lines(load_config("llama/tiny", {"train.micro_batch_size=2", "optimizer.lr=0.001", "rng.seed=7"}));
  const std::vector<KeyDifference> d = key_differences(a, b);
  ASSERT_EQ(d.size(), 3u);
  // config_keys() order: model, train, optimizer, ..., rng.
  std::vector<std::string> keys;
  for (const KeyDifference& k : d) keys.push_back(k.key);
  const std::vector<std::string> all = config_keys();
  const auto position = [&all](const std::string& key) { return std::find(all.begin(), all.end(), key) - all.begin(); };
  EXPECT_LT(position(keys[0]), position(keys[1]));
  EXPECT_LT(position(keys[1]), position(keys[2]));
  for (const KeyDifference& k : d) {
    if (k.key == "train.micro_batch_size") {
      EXPECT_EQ(k.b, "2");
      EXPECT_EQ(k.a, format_value(load_config("llama/tiny", {}), "train.micro_batch_size"));
    } else if (k.key == "optimizer.lr") {
      EXPECT_EQ(k.b, format_value(load_config("llama/tiny", {"optimizer.lr=0.001"}), "optimizer.lr"));
    } else {
      EXPECT_EQ(k.key, "rng.seed");
      EXPECT_EQ(k.b, "7");
    }
  }
}

// Ranks running different stepgraph builds may know different keys: a key one text lacks is a difference.
TEST(ConfigDifferences, AKeyOnlyOneTextHasIsADifference) {
  const std::string a = "model.hidden_size = 256\nmodel.new_key = 1\ntrain.train_iters = 10\n";
  const std::string b = "model.hidden_size = 256\ntrain.train_iters = 10\ntrain.other = x\n";
  const std::vector<KeyDifference> d = key_differences(a, b);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].key, "model.new_key");
  EXPECT_EQ(d[0].a, "1");
  EXPECT_EQ(d[0].b, "(no such key)");
  EXPECT_EQ(d[1].key, "train.other");
  EXPECT_EQ(d[1].a, "(no such key)");
  EXPECT_EQ(d[1].b, "x");
}

TEST(ConfigDifferences, AValueMayHoldTheSeparator) {
  const std::string a = "dataset.data_path = [a = b]\n", b = "dataset.data_path = [a = c]\n";
  const std::vector<KeyDifference> d = key_differences(a, b);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].a, "[a = b]");
  EXPECT_EQ(d[0].b, "[a = c]");
  EXPECT_TRUE(key_differences(a, a).empty());
}

}  // namespace
}  // namespace sg::config
