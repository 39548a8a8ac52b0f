// emit_yaml (config/config_emit.cpp) writes model.moe_layer_freq in Megatron-Bridge's forms — an int, a list of
// ints, or the Python list expression as one string — and reads each back to the same value.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"

namespace sg::config {
namespace {

std::string freq_line(const std::vector<std::string>& value) {
  Config c;
  c.model.moe_layer_freq = value;
  const std::string yaml = emit_yaml(c);
  const size_t at = yaml.find("  moe_layer_freq: ");
  if (at == std::string::npos) return "";
  return yaml.substr(at, yaml.find('\n', at) - at);
}

std::vector<std::string> read_back(const std::vector<std::string>& value) {
  Config c;
  c.model.moe_layer_freq = value;
  return load_config_yaml(emit_yaml(c), "emitted").model.moe_layer_freq;
}

TEST(ConfigEmit, MoeLayerFreqInBridgesForms) {
  EXPECT_EQ(freq_line({"1"}), "  moe_layer_freq: 1");
  EXPECT_EQ(freq_line({"2"}), "  moe_layer_freq: 2");
  EXPECT_EQ(freq_line({"1", "0", "1"}), "  moe_layer_freq: [1, 0, 1]");
  EXPECT_EQ(freq_line({"([1]*3+[0])*2"}), "  moe_layer_freq: \"([1]*3+[0])*2\"");
  // An expression with commas arrives split at them (a comma-separated scalar): one string again.
  EXPECT_EQ(freq_line({"([1", "0]*2)"}), "  moe_layer_freq: \"([1,0]*2)\"");
}

TEST(ConfigEmit, MoeLayerFreqReadsBackTheSame) {
  for (const std::vector<std::string>& value :
       std::vector<std::vector<std::string>>{{"1"}, {"4"}, {"1", "0", "1", "1"}, {"([1]*3+[0])*2"}, {"([1", "0]*2)"}}) {
    EXPECT_EQ(read_back(value), value) << freq_line(value);
  }
}

}  // namespace
}  // namespace sg::config
