// GPU weight fingerprints (validation.test_mode) against reference/weight_fingerprint, bit for bit: bf16 and fp32
// buffers of random values at sizes that are not chunk multiples (one element, one chunk plus one, a last chunk of
// 5), small chunks and more chunks than the kernel's blocks (they stride), and an empty buffer. The outputs are
// poisoned first.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/weight_fingerprint.h"
#include "reference/weight_fingerprint.h"

namespace {

using namespace sg;
using namespace sg::test;

struct Case {
  int64_t count, chunk;
};

template <class T>
void check_against_twin(const std::vector<T>& host, int64_t chunk) {
  const auto count = static_cast<int64_t>(host.size());
  const int64_t chunks = ref::fingerprint_chunks(count, chunk);
  std::vector<uint64_t> expected(static_cast<size_t>(chunks));
  ref::weight_fingerprints(host.data(), static_cast<int>(sizeof(T)), count, chunk, expected.data());
  DeviceBuffer<T> data(std::max<int64_t>(count, 1));
  if (count > 0) data.upload(host);
  DeviceBuffer<uint64_t> out(std::max<int64_t>(chunks, 1));
  out.poison();
  cuda::Stream stream;
  kernels::weight_fingerprints(stream, {.data = data.get(),
                                        .element_bytes = static_cast<int>(sizeof(T)),
                                        .count = count,
                                        .chunk_elements = chunk,
                                        .fingerprints = out.get()});
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<uint64_t> got = out.download();
  for (int64_t c = 0; c < chunks; ++c) {
    ASSERT_EQ(got[static_cast<size_t>(c)], expected[static_cast<size_t>(c)])
        << "chunk " << c << " of " << chunks << " (" << count << " elements of " << sizeof(T) << " bytes, chunk "
        << chunk << ")";
  }
}

class WeightFingerprintGpu : public ::testing::TestWithParam<Case> {};

TEST_P(WeightFingerprintGpu, Bf16AndFp32EqualTheCpuTwinBitForBit) {
  const Case c = GetParam();
  const std::vector<float> values = random_normal(c.count, 900 + c.count, 0.02f);
  check_against_twin(values, c.chunk);
  check_against_twin(to_bf16(values), c.chunk);
}

INSTANTIATE_TEST_SUITE_P(Shapes, WeightFingerprintGpu,
                         ::testing::Values(Case{0, ref::kFingerprintChunkElements},
                                           Case{1, ref::kFingerprintChunkElements},
                                           Case{ref::kFingerprintChunkElements + 1, ref::kFingerprintChunkElements},
                                           Case{3 * ref::kFingerprintChunkElements + 5, ref::kFingerprintChunkElements},
                                           Case{1000, 7}, Case{70000, 16}));  // 4375 chunks: more than the blocks

}  // namespace
