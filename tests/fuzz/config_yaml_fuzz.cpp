// libFuzzer harness: a YAML recipe (config/config.h load_config_yaml), as `stepgraph train|validate|config show
// RECIPE.yaml` reads it, then emit_yaml, whose output must load again (its documented contract), and validate()
// (which reports what it judges, and throws for nothing). Input: the recipe's text. tests/config/config_test.cpp's
// ConfigFuzz tests mutate recipes and overrides at random; this one follows coverage.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "config/config.h"
#include "config/validate.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)sg::fuzz::scratch_dir("config_yaml");  // quiets the log
  const std::string text(reinterpret_cast<const char*>(data), size);
  sg::fuzz::expect_sg_errors("config_yaml_fuzz", [&] {
    const sg::config::Config config = sg::config::load_config_yaml(text, "fuzz.yaml");
    const std::string yaml = sg::config::emit_yaml(config);
    try {
      (void)sg::config::load_config_yaml(yaml, "emitted.yaml");
    } catch (const sg::Error& e) {
      std::fprintf(stderr, "config_yaml_fuzz: emit_yaml wrote YAML that does not load again: %s\n---\n%s\n", e.what(),
                   yaml.c_str());
      std::abort();
    }
    const sg::config::ValidationReport report = sg::config::validate(config);
    (void)sg::config::emit_yaml(report.config);
  });
  return 0;
}
