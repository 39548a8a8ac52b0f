#include "core/strings.h"

#include <gtest/gtest.h>

namespace sg {
namespace {

TEST(Strings, SplitKeepsEmptyFields) {
  EXPECT_EQ(split("a,,b", ','), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(split("", ','), (std::vector<std::string>{""}));
}

TEST(Strings, ClosestMatchFindsTypos) {
  const std::vector<std::string> keys = {"num_layers", "hidden_size", "seq_length"};
  EXPECT_EQ(closest_match("num_layer", keys), "num_layers");
  EXPECT_EQ(closest_match("hiden_size", keys), "hidden_size");
  EXPECT_EQ(closest_match("completely_different", keys), "");
}

TEST(Strings, HumanBytes) {
  EXPECT_EQ(human_bytes(12), "12 B");
  EXPECT_EQ(human_bytes(3ull << 30), "3.00 GiB");
}

}  // namespace
}  // namespace sg
