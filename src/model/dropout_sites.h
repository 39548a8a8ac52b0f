#pragma once
// Dropout call sites, defined once for the CPU reference and the GPU step so both draw the same masks.
// A site id is Philox counter word 2 (see core/philox.h), a plan-time constant of each launch. Sites
// are handed out at declaration time by a DropoutSiteAllocator, in stack order: each layer takes the
// sites it draws inside (attention: its probabilities), then the step takes the layer's output site
// (hidden_dropout before the residual add). The dense model therefore numbers, per GPT block b,
// attention_probs 3b, attention_output 3b+1, mlp_output 3b+2 — the numbers it always had.
// The per-microbatch variation comes from RngState::offset, which advances by kRngOffsetPerMicrobatch
// after every microbatch (on the device in the GPU step, on the host in the CPU model), so microbatch
// k of the run (0-based, counting over all steps) draws with offset = initial_offset + k *
// kRngOffsetPerMicrobatch.
#include <cstdint>

#include "core/philox.h"

namespace sg::model {

class DropoutSiteAllocator {
 public:
  uint32_t next() { return next_++; }
  uint32_t count() const { return next_; }  // sites handed out so far

 private:
  uint32_t next_ = 0;
};

inline constexpr uint64_t kRngOffsetPerMicrobatch = 1;

// cuDNN's fused attention draws its dropout mask from its own Philox stream, keyed by an int64 seed and
// offset in device memory (kernels/attention.h). Each attention layer gets its own seed (a hash of the
// generator's seed and the layer's attention-probabilities site) so layers draw independent masks, and
// the microbatch's RNG offset is spread by 2^32 so the counter ranges of consecutive microbatches never
// overlap (cuDNN advances its counter within one call by far less than that). Written on the device once per
// microbatch from the RngState (model/attention_dropout_seeds.h); both values stay non-negative.
// The spread keeps 31 bits of the generator offset, which advances once per microbatch of the global batch:
// a run of 16384 microbatches a step passes 2^31 of them after 131072 steps. The bits above enter the seed
// (its "epoch", offset / 2^31), so microbatch k + 2^31 does not draw microbatch k's masks again; in the first
// epoch the seed is the hash of (seed, site) alone, as it always was.
constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
inline constexpr int kAttentionDropoutOffsetBits = 31;
constexpr int64_t attention_dropout_seed(uint64_t seed, uint32_t site, uint64_t offset = 0) {
  uint64_t h = splitmix64(seed ^ (static_cast<uint64_t>(site) << 32 | 0xA77Eu));
  const uint64_t epoch = offset >> kAttentionDropoutOffsetBits;
  if (epoch != 0) h = splitmix64(h ^ splitmix64(epoch));
  return static_cast<int64_t>(h >> 1);
}
constexpr int64_t attention_dropout_offset(uint64_t offset) {
  return static_cast<int64_t>((offset & ((uint64_t{1} << kAttentionDropoutOffsetBits) - 1)) << 32);
}

}  // namespace sg::model
