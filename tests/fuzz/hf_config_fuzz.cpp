// libFuzzer harness: a Hugging Face folder's config.json and generation_config.json as
// checkpoint.pretrained_checkpoint and generate read them (checkpoint/hf_import.h read_hf_config: Llama, Mixtral,
// NemotronH; Python's bare Infinity/NaN through checkpoint/python_json.h), then the config.json a save writes back
// for the spec read. Input: config.json, then (after a "\n=====\n" line) generation_config.json when there is one.
#include <cstdint>
#include <string>

#include "checkpoint/hf_config.h"
#include "checkpoint/hf_import.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& dir = sg::fuzz::scratch_dir("hf_config");
  sg::fuzz::clear(dir);
  const auto parts = sg::fuzz::split_parts(data, size, 2);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  sg::fuzz::write_file(dir / "config.json", parts[0]);
  if (text.find("\n=====\n") != std::string_view::npos) sg::fuzz::write_file(dir / "generation_config.json", parts[1]);
  sg::fuzz::expect_sg_errors("hf_config_fuzz", [&] {
    const sg::checkpoint::HfModelConfig config = sg::checkpoint::read_hf_config(dir.string());
    (void)sg::checkpoint::hf_model_config(config.spec, "bfloat16");
  });
  return 0;
}
