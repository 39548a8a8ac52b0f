#pragma once
// Fingerprints of a flat buffer's bits in fixed chunks (CPU twin of kernels/weight_fingerprint.h): how data-parallel
// ranks check that they hold the same weights (validation.test_mode, Megatron's realtime consistency test) without
// sending them to each other.
//
// A chunk's fingerprint is the sum modulo 2^64 of fingerprint_mix(bits, index) over its elements: an integer sum, so
// every order of adding gives the same value (no floating point, no atomics: the GPU's blocks may add as they like),
// and a changed bit, or two elements swapped, changes the chunk's fingerprint unless a 64-bit coincidence.
#include <cstdint>
#include <vector>

namespace sg::ref {

inline constexpr int64_t kFingerprintChunkElements = int64_t{1} << 16;

// SplitMix64's finalizer of the element's bits and its index in the buffer (constexpr: the kernel uses it too).
constexpr uint64_t fingerprint_mix(uint64_t bits, uint64_t index) {
  uint64_t z = bits + 0x9e3779b97f4a7c15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

constexpr int64_t fingerprint_chunks(int64_t count, int64_t chunk_elements) {
  return (count + chunk_elements - 1) / chunk_elements;
}

// out[c] for c < fingerprint_chunks(count, chunk_elements): the fingerprint of elements [c chunk, (c + 1) chunk) of
// `data`, `element_bytes` (2 or 4) each, read as unsigned integers.
void weight_fingerprints(const void* data, int element_bytes, int64_t count, int64_t chunk_elements, uint64_t* out);

// One value for a list of fingerprints (what the ranks compare first; the list only when these differ).
uint64_t fingerprint_digest(const std::vector<uint64_t>& fingerprints);

}  // namespace sg::ref
