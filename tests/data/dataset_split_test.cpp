// dataset.split as Megatron-Bridge users write it: Megatron's parse_and_normalize_split reads the shares with a
// regex for numbers, so "90/10/0" and "90, 10, 0" are accepted there as well as "90,10,0" (missing shares are
// 0). stepgraph takes ',' and '/' and still refuses text that is no list of non-negative shares.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "data/dataset_split.h"

namespace sg::data {
namespace {

std::string thrown(const std::string& text) {
  try {
    parse_split(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DatasetSplitSeparators, SlashesReadAsCommasDo) {
  for (const std::string text : {"90/10/0", "90, 10, 0", " 90 / 10 / 0 ", "90/10,0"}) {
    EXPECT_EQ(parse_split(text), parse_split("90,10,0")) << text;
  }
  EXPECT_EQ(parse_split("99/1"), parse_split("99,1,0"));  // missing shares are 0
  EXPECT_EQ(parse_split("99,1"), parse_split("99,1,0"));
}

TEST(DatasetSplitSeparators, BadTextIsStillRefusedNamingItAndTheForms) {
  for (const std::string bad : {"a,b", "a/b", "90/-10", "-1,2", "0/0/0", "0,0", "1/2/3/4", "90//10", "90;10"}) {
    const std::string message = thrown(bad);
    EXPECT_NE(message.find("dataset.split = \"" + bad + "\""), std::string::npos) << bad << ": " << message;
    EXPECT_NE(message.find("90/10/0"), std::string::npos) << bad << ": " << message;
  }
  EXPECT_NE(thrown("0/0/0").find("sum to 0"), std::string::npos);
  EXPECT_NE(thrown("90/-10").find("'-10' is not a non-negative number"), std::string::npos);
}

}  // namespace
}  // namespace sg::data
