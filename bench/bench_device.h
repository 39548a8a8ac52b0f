#pragma once
// What the GPU micro-benchmarks in bench/ share: the median of a set of timings, raw device buffers (a bench owns
// and frees its own, outside the engine's arena) and random bf16 inputs. bench_args.h stays standard-library only.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/bf16_bits.h"
#include "cuda/bf16.h"
#include "cuda/check.h"

namespace sg::bench {

// The upper median (0 for none): the timing half of the runs beat.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// cudaMalloc of n elements (at least one); the caller frees it with cudaFree.
template <class T>
T* device_alloc(size_t n) {
  T* p = nullptr;
  SG_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
  return p;
}

template <class T>
void upload(T* dst, const std::vector<T>& src) {
  SG_CUDA_CHECK(cudaMemcpy(dst, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice));
}

// n draws of N(0, stddev^2) rounded to bf16, from `seed`.
inline std::vector<bf16> random_bf16(size_t n, uint64_t seed, float stddev) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<bf16> v(n);
  for (auto& x : v) {
    const uint16_t bits = float_to_bf16_bits(dist(gen));
    std::memcpy(static_cast<void*>(&x), &bits, 2);
  }
  return v;
}

}  // namespace sg::bench
