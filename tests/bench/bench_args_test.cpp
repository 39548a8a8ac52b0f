// The command line of the tools in bench/ (bench/bench_args.h), without a GPU: --help wins, every misuse is a
// usage error naming the flag and pointing at --help, values are checked against their kind, range and choices,
// and the usage shows each flag's default.
#include "../../bench/bench_args.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sg::bench {
namespace {

const ToolSpec& spec() {
  static const ToolSpec s = {
      .program = "demo_bench",
      .about = "Times a demo kernel.",
      .flags = {{.name = "--iters", .default_value = "50", .min = 1, .max = 1000, .help = "timed calls"},
                {.name = "--seconds",
                 .value = ToolValue::number,
                 .default_value = "0.3",
                 .min = 0.001,
                 .max = 10,
                 .value_name = "S",
                 .help = "time per round"},
                {.name = "--case",
                 .value = ToolValue::text,
                 .default_value = "all",
                 .choices = {"small", "large", "all"},
                 .help = "the shapes"},
                {.name = "--ops",
                 .value = ToolValue::text,
                 .list = true,
                 .default_value = "fwd,bwd",
                 .choices = {"fwd", "bwd"},
                 .help = "which ops"},
                {.name = "--clusters", .list = true, .default_value = "2,3", .min = 2, .max = 64, .help = "shapes"},
                {.name = "--explore", .value = ToolValue::none, .help = "look further"}}};
  return s;
}

ToolArgs parse(std::vector<const char*> args) {
  args.insert(args.begin(), "demo_bench");
  return parse_tool_args(static_cast<int>(args.size()), args.data(), spec());
}

// The message of the usage error parse throws, "" when it does not throw.
std::string usage_error(std::vector<const char*> args) {
  try {
    parse(std::move(args));
  } catch (const ToolUsageError& e) {
    return e.what();
  }
  return "";
}

TEST(BenchToolArgs, HelpWinsBeforeAnythingElse) {
  EXPECT_TRUE(parse({"--help"}).help);
  EXPECT_TRUE(parse({"-h"}).help);
  EXPECT_TRUE(parse({"--bogus", "--iters", "--help"}).help);  // even after a misuse
  EXPECT_FALSE(parse({}).help);
}

TEST(BenchToolArgs, DefaultsAndGivenValues) {
  const ToolArgs defaults = parse({});
  EXPECT_EQ(defaults.integer("--iters"), 50);
  EXPECT_DOUBLE_EQ(defaults.number("--seconds"), 0.3);
  EXPECT_EQ(defaults.text("--case"), "all");
  EXPECT_EQ(defaults.items("--ops"), (std::vector<std::string>{"fwd", "bwd"}));
  EXPECT_FALSE(defaults.on("--explore"));
  EXPECT_FALSE(defaults.given("--iters"));
  const ToolArgs given =
      parse({"--iters", "7", "--seconds=2.5", "--case", "small", "--ops", "bwd", "--explore", "--clusters", "4,6,8"});
  EXPECT_EQ(given.integer("--iters"), 7);
  EXPECT_TRUE(given.given("--iters"));
  EXPECT_DOUBLE_EQ(given.number("--seconds"), 2.5);
  EXPECT_EQ(given.text("--case"), "small");
  EXPECT_EQ(given.items("--ops"), std::vector<std::string>{"bwd"});
  EXPECT_EQ(given.items("--clusters"), (std::vector<std::string>{"4", "6", "8"}));
  EXPECT_TRUE(given.on("--explore"));
  EXPECT_THROW(given.text("--undeclared"), std::logic_error);
}

TEST(BenchToolArgs, MisusesAreUsageErrorsNamingTheFlag) {
  const std::pair<std::vector<const char*>, std::string> cases[] = {
      {{"--bogus"}, "demo_bench: unknown flag '--bogus'; see demo_bench --help"},
      {{"--bogus=1"}, "demo_bench: unknown flag '--bogus'"},
      {{"--iters"}, "demo_bench: --iters needs a value: --iters N; see demo_bench --help"},
      {{"--iters", "--case", "small"}, "demo_bench: --iters needs a value: --iters N"},
      {{"--iters", "abc"}, "demo_bench: --iters abc: is not an integer"},
      {{"--iters", "1.5"}, "demo_bench: --iters 1.5: is not an integer"},
      {{"--iters", "0"}, "demo_bench: --iters 0: is out of range (1 to 1000)"},
      {{"--iters", "99999999999999999999"}, "--iters 99999999999999999999: is out of range"},
      {{"--seconds", "inf"}, "demo_bench: --seconds inf: is not a number"},
      {{"--seconds", "11"}, "demo_bench: --seconds 11: is out of range (0.001 to 10)"},
      {{"--case", "medium"}, "demo_bench: --case medium: is not one of small, large, all"},
      {{"--ops", "fwd,sideways"}, "demo_bench: --ops fwd,sideways: 'sideways' is not one of fwd, bwd"},
      {{"--ops", "fwd,"}, "demo_bench: --ops fwd,: has an empty item"},
      {{"--clusters", "2,65"}, "demo_bench: --clusters 2,65: '65' is out of range (2 to 64)"},
      {{"--explore=yes"}, "demo_bench: --explore is a switch and takes no value"},
      {{"--iters", "5", "--iters", "6"}, "demo_bench: --iters is given twice; give it once"},
      {{"50"}, "demo_bench: unexpected argument '50'"},
  };
  for (const auto& [args, message] : cases) {
    const std::string got = usage_error(args);
    EXPECT_NE(got.find(message), std::string::npos) << args[0] << ": " << got;
    EXPECT_NE(got.find("; see demo_bench --help"), std::string::npos) << got;
  }
  // A negative number is a value (not a flag), then out of range.
  EXPECT_NE(usage_error({"--iters", "-5"}).find("--iters -5: is out of range"), std::string::npos);
}

TEST(BenchToolArgs, UsageNamesEveryFlagWithItsDefault) {
  const std::string usage = tool_usage(spec());
  for (const char* text :
       {"Usage: demo_bench [--iters N] [--seconds S] [--case VALUE] [--ops VALUE,VALUE,...] [--clusters N,N,...] "
        "[--explore]\nTimes a demo kernel.\n\nFlags:\n",
        "\n  --iters N              timed calls (1 to 1000; default 50)\n",
        "\n  --seconds S            time per round (0.001 to 10; default 0.3)\n",
        "\n  --case VALUE           the shapes (one of small, large, all; default all)\n",
        "\n  --ops VALUE,VALUE,...  which ops (each one of fwd, bwd; default fwd,bwd)\n",
        "\n  --clusters N,N,...     shapes (each 2 to 64; default 2,3)\n", "\n  --explore              look further\n",
        "\n  -h, --help             print this text and exit\n"}) {
    EXPECT_NE(usage.find(text), std::string::npos) << text << "\n" << usage;
  }
}

// A long help wraps at about 110 columns, continued under its first word.
TEST(BenchToolArgs, LongHelpWrapsUnderItsFirstWord) {
  std::string help;
  for (int i = 0; i < 40; ++i) help += "word" + std::to_string(i) + " ";
  help.pop_back();
  const std::string usage = tool_usage({.program = "p", .about = "", .flags = {{.name = "--n", .help = help}}});
  const size_t flags = usage.find("Flags:\n");
  ASSERT_NE(flags, std::string::npos) << usage;
  std::string rejoined;
  size_t lines = 0;
  for (size_t at = flags + 7, end = 0; at < usage.size(); at = end + 1, ++lines) {
    end = usage.find('\n', at);
    const std::string line = usage.substr(at, end - at);
    EXPECT_LE(line.size(), 110u) << line;
    if (line.rfind("  --n N       word0 ", 0) == 0) {
      rejoined = line.substr(14);
    } else if (line.rfind("              word", 0) == 0) {
      rejoined += " " + line.substr(14);
    }
  }
  EXPECT_GT(lines, 3u) << usage;
  EXPECT_EQ(rejoined, help) << usage;  // every word, in order, each continuation under the first
}

}  // namespace
}  // namespace sg::bench
