#pragma once
// dataset.mock: seeded random tokens for benchmarks. Sample k is a pure function of (seed, k), so
// the mock stream resumes exactly like a real one and needs no files.
#include <cstdint>
#include <string>

#include "data/blended_dataset.h"

namespace sg::data {

class MockSampleSource : public SampleSource {
 public:
  MockSampleSource(int64_t vocab_size, int64_t seq_length, uint64_t seed);
  std::string describe() const override;
  uint64_t num_tokens() const override { return 0; }
  void sample(uint64_t index, int32_t* out) override;

 private:
  int64_t vocab_size_;
  int64_t seq_length_;
  uint64_t seed_;
};

}  // namespace sg::data
