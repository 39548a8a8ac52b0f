// libFuzzer harness: dotted command-line overrides (config/config.h apply_overrides), as `stepgraph train RECIPE
// section.key=value ...` applies them, and the Bridge flags of `stepgraph bench` (bench/bridge_flags.h), which become
// overrides too. Input: the first byte picks a shipped recipe (recipes/**/*.yaml of this checkout), then one line per
// argument: a line starting with '-' is a Bridge flag and its values ("-rl 2", "--recompute_modules core_attn,mlp"),
// any other an override. The config then goes through emit_yaml, whose output must load again, and validate() (which
// reports what it judges, and throws for nothing). tests/config/config_test.cpp's ConfigFuzz tests mutate overrides at
// random; this one follows coverage.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bench/bridge_flags.h"
#include "config/config.h"
#include "config/validate.h"
#include "core/strings.h"
#include "fuzz_util.h"

namespace {

// The shipped recipes, read once from the checkout this file is in (the fuzz build embeds none).
const std::vector<std::pair<std::string, std::string>>& recipes() {
  static const std::vector<std::pair<std::string, std::string>> all = [] {
    std::vector<std::pair<std::string, std::string>> out;
    const std::filesystem::path dir = std::filesystem::path(__FILE__).parent_path() / ".." / ".." / "recipes";
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
      if (entry.path().extension() != ".yaml") continue;
      std::ifstream in(entry.path(), std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      out.emplace_back(entry.path().string(), text.str());
    }
    std::sort(out.begin(), out.end());
    if (out.empty()) {
      std::fprintf(stderr, "config_overrides_fuzz: no recipes under %s\n", dir.c_str());
      std::abort();
    }
    return out;
  }();
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)sg::fuzz::scratch_dir("config_overrides");  // quiets the log
  if (size == 0) return 0;
  const std::pair<std::string, std::string>& recipe = recipes()[data[0] % recipes().size()];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<std::string> overrides;
  sg::bench::BridgeFlagEffects effects;
  sg::fuzz::expect_sg_errors("config_overrides_fuzz", [&] {
    for (const std::string& line : sg::split(text, '\n')) {
      if (!line.empty() && line[0] == '-') {
        std::vector<std::string> words = sg::split(line, ' ');
        const std::string name = words[0];
        words.erase(words.begin());
        if (const sg::bench::BridgeFlag* flag = sg::bench::find_bridge_flag(name)) {
          sg::bench::apply_bridge_flag(*flag, name, words, effects);
        }
      } else if (!line.empty()) {
        overrides.push_back(line);
      }
    }
    overrides.insert(overrides.end(), effects.overrides.begin(), effects.overrides.end());
    sg::config::Config config = sg::config::load_config_yaml(recipe.second, recipe.first);
    sg::config::apply_overrides(config, overrides);
    const std::string yaml = sg::config::emit_yaml(config);
    try {
      (void)sg::config::load_config_yaml(yaml, "emitted.yaml");
    } catch (const sg::Error& e) {
      std::fprintf(stderr, "config_overrides_fuzz: emit_yaml wrote YAML that does not load again: %s\n---\n%s\n",
                   e.what(), yaml.c_str());
      std::abort();
    }
    const sg::config::ValidationReport report = sg::config::validate(config);
    (void)sg::config::emit_yaml(report.config);
  });
  return 0;
}
