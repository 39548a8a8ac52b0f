// checkpoint/python_json.h: Python's bare Infinity, -Infinity and NaN outside strings are tagged as transformers 5
// writes them; strings that hold those words (escaped quotes included) and strict JSON are left as they are; text
// that is not JSON even so is an error naming the file.
#include "checkpoint/python_json.h"

#include <gtest/gtest.h>

#include <string>

#include "test_util.h"

namespace sg::checkpoint {
namespace {

TEST(PythonJson, BareConstantsAreTaggedAndStringsKept) {
  const nlohmann::json j = parse_python_json(
      R"({"limit": [0.0, Infinity], "low": -Infinity, "odd": NaN, "name": "Infinity NaN", "q": "a \"NaN\" b",)"
      R"( "nested": {"x": [Infinity, {"y": -Infinity}]}})",
      "config.json");
  EXPECT_EQ(j["limit"][0], 0.0);
  EXPECT_EQ(j["limit"][1], nlohmann::json({{"__float__", "Infinity"}}));
  EXPECT_EQ(j["low"], nlohmann::json({{"__float__", "-Infinity"}}));
  EXPECT_EQ(j["odd"], nlohmann::json({{"__float__", "NaN"}}));
  EXPECT_EQ(j["name"], "Infinity NaN");
  EXPECT_EQ(j["q"], "a \"NaN\" b");
  EXPECT_EQ(j["nested"]["x"][0], nlohmann::json({{"__float__", "Infinity"}}));
  EXPECT_EQ(j["nested"]["x"][1]["y"], nlohmann::json({{"__float__", "-Infinity"}}));
  const std::string strict = R"({"a": [1, 2.5e-3, "x\\y"], "b": null})";
  EXPECT_EQ(json_with_tagged_non_finite(strict), strict);
}

TEST(PythonJson, TextThatIsNotJsonEvenSoNamesTheFile) {
  const std::string message = test::thrown_message([] { parse_python_json("{\"a\": Inf}", "/m/config.json"); });
  EXPECT_NE(message.find("/m/config.json is not valid JSON"), std::string::npos) << message;
}

// Found by tests/fuzz/hf_config_fuzz.cpp: a number past double's range made nlohmann::json::parse throw
// out_of_range, which escaped as a foreign exception instead of the error naming the file.
TEST(PythonJson, ANumberPastDoubleNamesTheFile) {
  const std::string message =
      test::thrown_message([] { parse_python_json("{\"rope_theta\": 1e555}", "/m/config.json"); });
  EXPECT_NE(message.find("/m/config.json is not valid JSON"), std::string::npos) << message;
  EXPECT_NE(message.find("1e555"), std::string::npos) << message;
}

}  // namespace
}  // namespace sg::checkpoint
