// libFuzzer harness: a Hugging Face tokenizer folder as tokenizer.tokenizer_model reads it
// (data/hf_tokenizer.h read_hf_tokenizer): tokenizer.json's model vocabulary and added tokens, and the eos/bos
// tokens of tokenizer_config.json or special_tokens_map.json. Input: tokenizer.json, then (after "\n=====\n"
// lines) tokenizer_config.json and special_tokens_map.json when there are those parts.
#include <cstdint>
#include <string>

#include "data/hf_tokenizer.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& dir = sg::fuzz::scratch_dir("hf_tokenizer");
  sg::fuzz::clear(dir);
  const auto parts = sg::fuzz::split_parts(data, size, 3);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const size_t separators = [&] {
    size_t n = 0;
    for (size_t at = text.find("\n=====\n"); at != std::string_view::npos; at = text.find("\n=====\n", at + 1)) ++n;
    return n;
  }();
  sg::fuzz::write_file(dir / sg::data::kTokenizerJson, parts[0]);
  if (separators >= 1) sg::fuzz::write_file(dir / sg::data::kTokenizerConfigJson, parts[1]);
  if (separators >= 2) sg::fuzz::write_file(dir / sg::data::kSpecialTokensMapJson, parts[2]);
  sg::fuzz::expect_sg_errors("hf_tokenizer_fuzz", [&] {
    const sg::data::HfTokenizerInfo info = sg::data::read_hf_tokenizer(dir.string());
    (void)info.describe();
  });
  return 0;
}
