#include "config/tokenizer_vocab.h"

#include "core/error.h"
#include "core/strings.h"

namespace sg::config {

int64_t padded_vocab_size(int64_t vocab_size, int64_t divisible_by) {
  SG_CHECK(vocab_size > 0 && divisible_by > 0,
           strprintf("padded_vocab_size(%lld, %lld): both must be positive", static_cast<long long>(vocab_size),
                     static_cast<long long>(divisible_by)));
  return (vocab_size + divisible_by - 1) / divisible_by * divisible_by;
}

std::optional<data::HfTokenizerInfo> load_tokenizer(const Config& config) {
  if (!config.tokenizer.tokenizer_model) return std::nullopt;
  return data::read_hf_tokenizer(*config.tokenizer.tokenizer_model);
}

}  // namespace sg::config
