#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): counter-based,
// so the same (key, counter) gives the same numbers on the CPU and the GPU, eagerly or in a replayed
// graph. Header-only and __host__ __device__ so the CPU reference and the kernels share one definition.
#include <cstdint>

#if defined(__CUDACC__)
#define SG_HD __host__ __device__ __forceinline__
#else
#define SG_HD inline
#endif

namespace sg::rng {

struct Philox4x32Counter {
  uint32_t v[4];
};
struct Philox4x32Key {
  uint32_t v[2];
};

SG_HD void philox_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

SG_HD Philox4x32Counter philox4x32_10(Philox4x32Counter ctr, Philox4x32Key key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(kM0, ctr.v[0], hi0, lo0);
    philox_mulhilo(kM1, ctr.v[2], hi1, lo1);
    ctr = Philox4x32Counter{{hi1 ^ ctr.v[1] ^ key.v[0], lo1, hi0 ^ ctr.v[3] ^ key.v[1], lo0}};
    key.v[0] += kW0;
    key.v[1] += kW1;
  }
  return ctr;
}

// Device-resident generator state. Kernels receive a pointer to it, never host scalars, so a replayed
// graph reads the current seed/offset. `offset` advances on the device (once per microbatch).
struct RngState {
  uint64_t seed;
  uint64_t offset;
};

// The Philox counter of one call site's 4-word block `block` at generator offset `offset`:
// (block lo, block hi ^ (offset hi << 16), site, offset lo). The offset advances once per microbatch of the
// global batch (every data-parallel rank's), so a run passes 2^32 of them after 2^32 / (global_batch_size /
// micro_batch_size) steps (262144 steps of 16384 microbatches): its high bits enter word 1, so no offset
// repeats an earlier one's stream. The map is one-to-one while block < 2^48 (index < 2^50) and offset < 2^48;
// below offset 2^32 it is the layout the numbers always had, so every run's draws so far are unchanged.
SG_HD Philox4x32Counter philox_counter(uint64_t block, uint32_t site, uint64_t offset) {
  return Philox4x32Counter{{static_cast<uint32_t>(block),
                            static_cast<uint32_t>(block >> 32) ^ (static_cast<uint32_t>(offset >> 32) << 16), site,
                            static_cast<uint32_t>(offset)}};
}

// The stream of numbers for one call site: (seed, offset, site) -> 4 words per 4 consecutive indices.
// counter = philox_counter(index/4, site, offset), key = seed; word index%4 is returned. Checked against
// Random123's known answers in tests/core/philox_test.cpp.
SG_HD uint32_t philox_bits(uint64_t seed, uint64_t offset, uint32_t site, uint64_t index) {
  const Philox4x32Counter out =
      philox4x32_10(philox_counter(index >> 2, site, offset),
                    Philox4x32Key{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}});
  return out.v[index & 3];
}

// Uniform in [0, 1) with 24 random bits (exact in fp32, identical on CPU and GPU).
SG_HD float philox_uniform(uint64_t seed, uint64_t offset, uint32_t site, uint64_t index) {
  return static_cast<float>(philox_bits(seed, offset, site, index) >> 8) * (1.0f / 16777216.0f);
}

}  // namespace sg::rng
