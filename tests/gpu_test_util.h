#pragma once
// GPU test helpers: RAII device buffers, bf16 upload/download, poisoning so unwritten outputs fail.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cuda/arena.h"
#include "cuda/bf16.h"
#include "cuda/check.h"
#include "test_util.h"

namespace sg::test {

template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n)
      : p_(static_cast<T*>(cuda::device_allocate(std::max<size_t>(n, 1) * sizeof(T), "test DeviceBuffer"))), n_(n) {}
  ~DeviceBuffer() { cuda::device_free_noexcept(p_, "test DeviceBuffer"); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return p_; }
  size_t size() const { return n_; }
  // Every transfer synchronises the whole device first and last: kernels under test run on
  // non-blocking streams, which the legacy default stream of cudaMemcpy/cudaMemset does not wait for.
  void upload(const std::vector<T>& host) {
    SG_CUDA_CHECK(cudaDeviceSynchronize());
    SG_CUDA_CHECK(cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    SG_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    SG_CUDA_CHECK(cudaDeviceSynchronize());
    SG_CUDA_CHECK(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  // Fill with 0xFF bytes: NaN for float and bf16, so an element a kernel forgot to write fails.
  void poison() {
    SG_CUDA_CHECK(cudaDeviceSynchronize());
    SG_CUDA_CHECK(cudaMemset(p_, 0xFF, n_ * sizeof(T)));
    SG_CUDA_CHECK(cudaDeviceSynchronize());
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

inline std::vector<bf16> to_bf16(const std::vector<float>& v) {
  std::vector<bf16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t bits = float_to_bf16_bits(v[i]);
    std::memcpy(static_cast<void*>(&out[i]), &bits, 2);
  }
  return out;
}

inline std::vector<float> to_float(const std::vector<bf16>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, &v[i], 2);
    out[i] = bf16_bits_to_float(bits);
  }
  return out;
}

// Rounds through bf16, so a CPU reference sees exactly the inputs the GPU kernel sees.
inline std::vector<float> round_bf16(const std::vector<float>& v) { return to_float(to_bf16(v)); }

// The bf16 value nearest to `exact`, from the bf16 rounding of its float and that value's two neighbours (rounding
// through float first could round twice).
inline float nearest_bf16(double exact) {
  const uint16_t bits = float_to_bf16_bits(static_cast<float>(exact));
  float best = bf16_bits_to_float(bits);
  for (const uint16_t neighbour : {static_cast<uint16_t>(bits + 1), static_cast<uint16_t>(bits - 1)}) {
    const float candidate = bf16_bits_to_float(neighbour);
    if (std::isfinite(candidate) && std::fabs(candidate - exact) < std::fabs(best - exact)) best = candidate;
  }
  return best;
}

// Elements of `got` (bf16 values, widened) that are not the bf16 value nearest to `exact` (the sums in double).
// A kernel that rounds its fp32 sum once misses only where its summation order moved a sum across a rounding
// boundary: about 3e-4 of the elements at 1024-term sums in simulation. One that rounds twice (the product sum,
// then the sum with the stored value) misses about 26% of them, and one that truncates about 50%, while both stay
// within a relative-error tolerance of one bf16 step. Callers allow 1% (at least one element).
inline int64_t count_not_nearest_bf16(const std::vector<float>& got, const std::vector<double>& exact) {
  if (got.size() != exact.size()) return static_cast<int64_t>(std::max(got.size(), exact.size()));
  int64_t misses = 0;
  for (size_t i = 0; i < got.size(); ++i) misses += !(got[i] == nearest_bf16(exact[i]));
  return misses;
}
// dw[N,K] += dy[T,N]^T x[T,K] in double: the exact sums when the inputs are bf16 values (the products have 16
// significant bits, and double holds their sums at these sizes), for count_not_nearest_bf16.
inline void add_exact_weight_gradient(double* dw, const float* dy, const float* x, int64_t T, int64_t K, int64_t N) {
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t n = 0; n < N; ++n) {
      const double g = dy[t * N + n];
      for (int64_t k = 0; k < K; ++k) dw[n * K + k] += g * x[t * K + k];
    }
  }
}
inline int64_t allowed_bf16_order_misses(size_t elements) {
  return std::max<int64_t>(1, static_cast<int64_t>(elements) / 100);
}

}  // namespace sg::test
