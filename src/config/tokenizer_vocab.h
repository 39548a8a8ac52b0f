#pragma once
// The tokenizer section (Bridge's tokenizer.tokenizer_type / tokenizer.tokenizer_model) and the
// model's vocabulary, resolved the way Megatron-Bridge does it:
//   * model.vocab_size null: the tokenizer's vocabulary padded up to a multiple of
//     model.make_vocab_size_divisible_by (Megatron's _vocab_size_with_padding, tensor parallel 1);
//   * model.vocab_size set: it must hold every token id (>= the tokenizer's vocabulary) and is used
//     as is (a note says when it differs from the padded size).
#include <cstdint>
#include <optional>

#include "config/config.h"
#include "data/hf_tokenizer.h"

namespace sg::config {

inline constexpr const char* kHuggingFaceTokenizer = "HuggingFaceTokenizer";

// Whether the config names a tokenizer (either key set). validate's tokenizer check reports every way a named
// tokenizer fails (a key missing, an unknown type, a folder it cannot read) and takes model.vocab_size from it
// when it reads; only without one must model.vocab_size be set.
inline bool tokenizer_configured(const TokenizerConfig& tokenizer) {
  return tokenizer.tokenizer_type.has_value() || tokenizer.tokenizer_model.has_value();
}

// Megatron's padding: the smallest multiple of divisible_by that is >= vocab_size.
int64_t padded_vocab_size(int64_t vocab_size, int64_t divisible_by);

// The tokenizer folder of a validated config, read again (cheap: JSON files). nullopt when the config
// has no tokenizer. sg::Error when the files cannot be read (validate() reports that first).
std::optional<data::HfTokenizerInfo> load_tokenizer(const Config& config);

}  // namespace sg::config
