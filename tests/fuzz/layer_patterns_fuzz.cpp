// libFuzzer harness: the per-layer strings of a model config, Megatron's model.moe_layer_freq (config/moe_layer_freq.h:
// an integer, a 0/1 list, or a list expression such as "([1]*3+[0])*2") and the hybrid layer pattern
// model.hybrid_override_pattern (model/layer_kind.h parse_layer_pattern: "M*-E", with Megatron's '|' and '/' named).
// Input: the first byte is model.num_layers (0-255), the rest the value: read as the pattern, and as moe_layer_freq
// both whole (a YAML string) and split at its commas (a YAML list or "1,0,1"). A parsed pattern must print back as
// written, an expanded moe_layer_freq hold one 0/1 per layer.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "config/moe_layer_freq.h"
#include "core/strings.h"
#include "fuzz_util.h"
#include "model/layer_kind.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)sg::fuzz::scratch_dir("layer_patterns");  // quiets the log
  if (size == 0) return 0;
  const int64_t num_layers = data[0];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  sg::fuzz::expect_sg_errors("layer_patterns_fuzz", [&] {
    const std::vector<sg::model::LayerKind> kinds = sg::model::parse_layer_pattern(text);
    if (sg::model::layer_pattern_string(kinds) != text) {
      std::fprintf(stderr, "layer_patterns_fuzz: pattern '%s' prints back as '%s'\n", text.c_str(),
                   sg::model::layer_pattern_string(kinds).c_str());
      std::abort();
    }
    (void)sg::model::compact_layer_pattern(kinds);
  });
  for (const std::vector<std::string>& value : {std::vector<std::string>{text}, sg::split(text, ',')}) {
    sg::fuzz::expect_sg_errors("layer_patterns_fuzz", [&] {
      (void)sg::config::format_moe_layer_freq(value);
      const std::vector<int> per_block = sg::config::expand_moe_layer_freq(value, num_layers);
      if (static_cast<int64_t>(per_block.size()) != num_layers) {
        std::fprintf(stderr, "layer_patterns_fuzz: moe_layer_freq '%s' expands to %zu blocks of %lld\n", text.c_str(),
                     per_block.size(), static_cast<long long>(num_layers));
        std::abort();
      }
      for (const int bit : per_block) {
        if (bit != 0 && bit != 1) std::abort();
      }
    });
  }
  return 0;
}
