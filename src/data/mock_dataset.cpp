#include "data/mock_dataset.h"

#include "core/error.h"
#include "core/strings.h"
#include "data/shuffle.h"

namespace sg::data {

MockSampleSource::MockSampleSource(int64_t vocab_size, int64_t seq_length, uint64_t seed)
    : vocab_size_(vocab_size), seq_length_(seq_length), seed_(seed) {
  SG_CHECK(vocab_size > 0, strprintf("dataset.mock needs model.vocab_size > 0 (got %lld)",
                                     static_cast<long long>(vocab_size)));
  SG_CHECK(seq_length > 0, strprintf("dataset.mock needs seq_length > 0 (got %lld)",
                                     static_cast<long long>(seq_length)));
}

std::string MockSampleSource::describe() const {
  return strprintf("mock: seeded random tokens in [0, %lld), seed %llu",
                   static_cast<long long>(vocab_size_), static_cast<unsigned long long>(seed_));
}

void MockSampleSource::sample(uint64_t index, int32_t* out) {
  SplitMix64 rng(mix_seed(seed_, 0x6d6f636bull /* "mock" */, index));
  for (int64_t t = 0; t <= seq_length_; ++t) {
    out[t] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab_size_)));
  }
}

}  // namespace sg::data
